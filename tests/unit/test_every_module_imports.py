"""Every module of the package imports: a name moved between modules and missed by an
importer fails here, not first in the command (or the e2e test) that reaches it."""

from __future__ import annotations

import importlib
import pkgutil

import tunebench


def test_every_module_imports():
    names = [m.name for m in pkgutil.walk_packages(tunebench.__path__, "tunebench.")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, with its module
            failed[name] = repr(exc)
    assert len(names) > 150 and not failed, failed
