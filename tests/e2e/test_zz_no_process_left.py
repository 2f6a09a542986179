"""Runs last among the e2e tests (file order): after every sweep, fault, interrupt, helm and
pipeline test, no vLLM server, GuideLLM worker or fake port-forward they started is left.
The one server the session shares is still up by design; it is excluded by its group."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import NEEDS_SERVER

# alone, in `make test`'s last step: runs last, after every other e2e file
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]
MARKERS = (
    "vllm.entrypoints.openai.api_server",
    "tunebench.load.guidellm_worker",
    "fakes/bin/oc",
    "batch.worker",
)


def our_processes() -> list[tuple[int, int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            pgid = os.getpgid(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
        if any(marker in cmdline for marker in MARKERS):
            found.append((int(entry.name), pgid, cmdline[:200]))
    return found


def test_no_server_or_load_process_outlives_its_test(guarded_server):
    left = [p for p in our_processes() if p[1] != guarded_server.pgid]
    assert left == [], left
