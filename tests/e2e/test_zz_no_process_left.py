"""Runs last among the e2e tests (file order): after every sweep, fault, interrupt, helm and
pipeline test, no vLLM server, GuideLLM worker or fake port-forward they started is left.
A server the session shares (the guarded one, if this session started it) is still up by
design; it is excluded by its group. `make test` runs this file last of all, alone, after
every other file has ended in either step: whatever they left is still there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import NEEDS_SERVER, SHARED_SERVER_PGIDS

# alone, in `make test`'s last step: runs last, after every other e2e file
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]
MARKERS = (  # every kind of process the suite starts
    "vllm.entrypoints.openai.api_server",  # servers
    "tunebench.load.guidellm_worker",  # load generators
    "tunebench.load.vllm_bench_worker",
    "tunebench.cli.main",  # CLI runs
    "batch.worker",  # batch engines (shards, Slurm jobs)
    "fakes/bin/oc",  # the fake cluster's port-forwards
    "lm_eval",  # lm-eval against a server
    "inference_perf",  # the peer tools
    "aiperf",
    "raylet",  # the local Ray cluster
    "gcs_server",
    "while True: pass",  # the starved-client test's spinners
    "/tmp/pytest-of-",  # daemons started on a test's directory: Prometheus, PostgreSQL,
    # Slurm, Chromium's profile
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


def test_no_server_or_load_process_outlives_its_test():
    left = [p for p in our_processes() if p[1] not in SHARED_SERVER_PGIDS]
    assert left == [], left
