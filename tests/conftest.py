"""Shared helpers: run the real `tunebench` CLI in a subprocess, find the repo's files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """`tunebench ARGS` as a user runs it; returns the CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("COLUMNS", "200")
    return subprocess.run(
        [sys.executable, "-m", "tunebench.cli.main", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def s3():
    """One local S3 server (moto, credentials enforced) for the session: moto's state is
    process-wide, so a second server in the same process would share its users."""
    from tests.s3_server import serve_s3

    yield from serve_s3()
