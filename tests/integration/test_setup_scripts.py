"""The set-up scripts stop with one line that names what is missing and how to get it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_setup_without_python_311_says_which_python_it_needs(tmp_path):
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\nexec /usr/bin/env python3 -c 'import sys; sys.exit(1)'\n")
    old.chmod(0o755)
    result = subprocess.run(
        ["bash", "scripts/setup-env.sh"],
        cwd=REPO,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PYTHON": str(old),
            "VENV": str(tmp_path / "venv"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "needs Python 3.11 or newer" in lines[0] and "PYTHON=" in lines[0]
    assert not (tmp_path / "venv").exists()  # nothing half-made
