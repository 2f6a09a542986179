"""A resumed run stops the server an interrupted (SIGKILLed) tunebench left running, and
nothing else."""

from __future__ import annotations

import subprocess
import sys
import time

from tunebench.processes import group_members
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore

SLEEP = "import sys, time; time.sleep(float(sys.argv[1]))"


def _group(*marker: str) -> subprocess.Popen:
    """A process in a group of its own whose command line holds `marker`."""
    return subprocess.Popen([sys.executable, "-c", SLEEP, "60", *marker], start_new_session=True)


def test_a_resume_stops_the_recorded_server_group_and_leaves_others(tmp_path):
    server = _group("-m", "vllm.entrypoints.openai.api_server")  # what a server runs
    stranger = _group("not-a-server")  # a group id the system gave to something else
    try:
        store = RunStore.create(tmp_path, RunKind.SWEEP, "t", versions={}, host={})
        store.update_config("c1", server_pgid=server.pid)
        store.update_config("c2", server_pgid=stranger.pid)
        store.acquire_lock()
        notes = store.stop_leftover_processes()
        store.release_lock()
        assert notes == [
            f"stopped the server of c1 that the interrupted run left running (process group "
            f"{server.pid})"
        ]
        assert server.wait(timeout=10) is not None
        time.sleep(0.2)
        assert stranger.poll() is None and group_members(stranger.pid)
        # a group that is gone already: nothing to do, no note
        assert RunStore.open(store.path).stop_leftover_processes() == []
    finally:
        for process in (server, stranger):
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
