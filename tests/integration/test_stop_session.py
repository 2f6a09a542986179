"""stop_session stops a process and every session it started (as `run_cli` in the tests and
benchmarks/fresh_clone.py stop `tunebench` and `make`): servers run in sessions of their own,
which a signal to the process's group never reaches."""

from __future__ import annotations

import os
import subprocess
import time

import psutil
import pytest

from tunebench.processes import run_in_own_session, stop_session

# a stand-in for `make test`: a child in a session of its own (as a test's vLLM server is),
# one in make's own group, and make itself waiting on them
MAKE = """
setsid sleep 300 &
sleep 300 &
echo started
wait
"""


def test_make_and_every_session_it_started_are_stopped():
    make = subprocess.Popen(
        ["bash", "-c", MAKE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert make.stdout is not None and make.stdout.readline().strip() == "started"
    # until both children run, one of them in its own session (setsid starts in make's group
    # and only then leaves it)
    deadline = time.monotonic() + 10
    while True:
        children = psutil.Process(make.pid).children(recursive=True)
        groups = {os.getpgid(child.pid) for child in children}
        if len(children) == 2 and groups == {make.pid, *groups - {make.pid}} and len(groups) == 2:
            break
        assert time.monotonic() < deadline, ("the stand-in's children did not start", groups)
        time.sleep(0.05)

    stop_session(make, grace_s=2)

    assert make.poll() is not None
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, alive
    assert os.getpgrp() not in groups  # the test's own group was never signalled


# the stand-in again, writing its children's pids first (run_in_own_session blocks until it
# ends, so the test reads them only after the timeout). The children do not hold the output
# pipes: a stop of the stand-in alone would return at once and leave them running.
MAKE_WRITING_PIDS = """
setsid sleep 3600 >/dev/null 2>&1 &
echo $! > pids
sleep 3600 >/dev/null 2>&1 &
echo $! >> pids
echo started
wait
"""


def test_run_in_own_session_stops_everything_it_started_at_its_timeout(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        run_in_own_session(
            ["bash", "-c", MAKE_WRITING_PIDS], tmp_path, dict(os.environ), timeout=3, grace_s=2
        )
    # the output it had written before it was stopped comes with the exception
    assert timed_out.value.stdout == "started\n"
    pids = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2
    children = []
    for pid in pids:
        try:
            children.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass  # already gone and reaped
    gone, alive = psutil.wait_procs(children, timeout=5)
    for survivor in alive:  # a failed test leaves nothing running
        survivor.kill()
    assert not alive, alive
