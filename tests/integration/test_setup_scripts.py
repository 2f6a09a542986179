"""The set-up scripts stop with one line that names what is missing and how to get it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_script(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """A set-up script of the repository with only `env` (and the system PATH) set."""
    return subprocess.run(
        ["bash", *argv],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_setup_without_python_311_says_which_python_it_needs(tmp_path):
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\nexec /usr/bin/env python3 -c 'import sys; sys.exit(1)'\n")
    old.chmod(0o755)
    result = run_script(
        "scripts/setup-env.sh", HOME=str(tmp_path), PYTHON=str(old), VENV=str(tmp_path / "venv")
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "needs Python 3.11 or newer" in lines[0] and "PYTHON=" in lines[0]
    assert not (tmp_path / "venv").exists()  # nothing half-made


def test_setup_never_replaces_an_environment_it_did_not_make(tmp_path):
    gpu_venv = tmp_path / "venv"
    (gpu_venv / "bin").mkdir(parents=True)
    (gpu_venv / "bin" / "python").write_text("a GPU environment's interpreter\n")
    result = run_script(
        "scripts/setup-env.sh",
        HOME=str(tmp_path),
        PYTHON=sys.executable,
        VENV=str(gpu_venv),
        TUNEBENCH_VENV_CACHE=str(tmp_path / "cache"),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "was not made by make setup" in result.stderr and "VENV=" in result.stderr
    assert (gpu_venv / "bin" / "python").read_text() == "a GPU environment's interpreter\n"
    assert not (tmp_path / "cache").exists()  # refused before anything was built


def test_gpu_and_cpu_extras_together_are_refused_in_one_line():
    result = run_script("scripts/install-deps.sh", "/bin/false", EXTRAS="cpu,gpu,dev")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "choose one" in result.stderr
