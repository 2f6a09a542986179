"""stop_session stops a process and every session it started (as `run_cli` in the tests and
benchmarks/fresh_clone.py stop `tunebench` and `make`): servers run in sessions of their own,
which a signal to the process's group never reaches."""

from __future__ import annotations

import os
import subprocess
import time

import psutil

from tunebench.processes import stop_session

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
