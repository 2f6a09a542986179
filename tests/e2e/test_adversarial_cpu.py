"""Planted faults on the real vLLM-CPU server: each must end with its point flagged, never
a plain "valid", and the flag must say why.

All cases reach the session's guarded server (one start) as an `endpoint`, some through a
small proxy that plants the fault (tests/e2e/planted_proxy.py):
- declared args that the server does not run, and streams cut short by a proxy;
- half of the requests failed by a proxy;
- over-drive: the load generator is handed twice the rate its point names;
- a starved client: the sweep pinned to one core beside three busy processes.
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
from pathlib import Path

import pytest

from tests.conftest import REPO, invoke
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER
from tests.e2e.planted_proxy import PlantedProxy
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]
ENV = {"TB_ADV_KEY": GUARDED_KEY}


def endpoint_spec(tmp_path: Path, name: str, url: str, metrics_url: str, extra: str, load: str):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        textwrap.dedent(f"""
        name: {name}
        model: builtin:tiny-llama
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
    tmp_path, guarded_server
):
    with PlantedProxy(guarded_server.base_url, "truncate", keep_events=4) as proxy:
        spec = endpoint_spec(
            tmp_path,
            "adv-truncate",
            proxy.base_url,
            f"{guarded_server.base_url}/metrics",
            "server: {args: {max-model-len: 512}}\n",  # the server runs 256
            CONCURRENT_2,
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

    def doubled(points):
        groups = honest(points)
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
    assert row["client_limited_reason"].split(" req/s")[1] == " for a target of 1.5"
    print(f"\nflagged: {row['client_limited_reason']}")


def test_a_starved_client_is_flagged(tmp_path, guarded_server):
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
            - {kind: concurrent, streams: 1, max_seconds: 5}
        """,
    )
    core = sorted(os.sched_getaffinity(0))[0]
    pin = lambda: os.sched_setaffinity(0, {core})  # noqa: E731  (in the child, before exec)
    spinners = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"], preexec_fn=pin, start_new_session=True
        )
        for _ in range(3)
    ]
    try:
        sweep = subprocess.run(
            [
                sys.executable,
                "-m",
                "tunebench.cli.main",
                "sweep",
                str(spec),
                "--root",
                str(tmp_path / "runs"),
                "--no-report",
            ],
            cwd=REPO,
            env={**os.environ, **ENV, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=pin,
            start_new_session=True,
        )
    finally:
        for spinner in spinners:
            os.killpg(spinner.pid, signal.SIGKILL)
            spinner.wait()
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    row, _ = only_point(tmp_path / "runs")
    assert row["client_limited"] == "True", row
    assert (
        "client starved: a load-generator thread waited for a CPU" in row["client_limited_reason"]
    )
    assert float(row["client_wait_pct"]) >= 80
    print(f"\nflagged: {row['client_limited_reason']}")
