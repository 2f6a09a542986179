"""A `tunebench sweep` started by a benchmark that plants something while it runs.

The sweep runs in its own session (stopped with everything it started, also on Ctrl-C) and
writes its output to a log file: a pipe read only at the end would fill during a long sweep
and stall it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def start_sweep(spec_path: Path, runs: Path, log_path: Path) -> subprocess.Popen:
    """`tunebench sweep spec_path -o runs`, its output into `log_path`."""
    with log_path.open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tunebench.cli.main", "sweep", str(spec_path), "-o", str(runs)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def fail(sweep: subprocess.Popen, log_path: Path) -> None:
    """Exit 1 with the end of a failed sweep's output."""
    print(f"sweep failed (exit {sweep.returncode}); its output ({log_path}) ends:")
    print(log_path.read_text()[-3000:])
    raise SystemExit(1)
