"""The engine-arg names come from the installed vLLM's own parser, read once per version."""

from __future__ import annotations

import time

import pytest

from tunebench.spec.vllm_names import VllmArgNames, arg_names, installed_version


def test_names_are_the_installed_vllms_and_cached_by_version(tmp_path):
    version = installed_version()
    if version is None:
        pytest.skip("vLLM is not installed in this environment (make setup installs it)")
    names = arg_names(cache=tmp_path)
    assert isinstance(names, VllmArgNames), names
    # engine args and the server's own, as `vllm serve` parses them
    assert {"max-num-seqs", "max-model-len", "enforce-eager", "api-key"} <= names.names
    assert names.unknown("max-num-sequences") == (
        f"'max-num-sequences' is not an engine arg of {version}; did you mean max-num-seqs?"
    )
    (cached,) = tmp_path.iterdir()
    assert cached.name == f"vllm-args-{version.replace(' ', '-')}.json"
    started = time.monotonic()
    assert arg_names(cache=tmp_path) == names
    assert time.monotonic() - started < 2  # read back, vLLM not imported again
