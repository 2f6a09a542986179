"""GuideLLM 0.8.1 report parsing (fixture: a real report, trimmed to 5 request records)."""

from __future__ import annotations

import json

import pytest

from tunebench.load.guidellm import build_groups, point_budget_s
from tunebench.load.guidellm_data import data_args
from tunebench.load.guidellm_report import (
    client_columns,
    dispatch_lag,
    measured_window,
    request_samples,
    strategy_of,
)
from tunebench.spec.models import SyntheticData
from tunebench.spec.plan import LoadPoint


@pytest.fixture
def benchmark(fixtures):
    # A real GuideLLM 0.8.1 report (max-num-seqs 2, concurrent 1 and 8; 40 request records each)
    return json.loads((fixtures / "guidellm/v0.8.1-mns2-c1-c8.json").read_text())["benchmarks"][1]


def test_strategy_and_window(benchmark):
    assert strategy_of(benchmark) == ("concurrent", 8)
    start, end = measured_window(benchmark)
    assert end - start == pytest.approx(10.0, abs=0.01)


def test_client_columns(benchmark):
    row = client_columns(benchmark)
    assert row["requests_ok"] == 128 and row["requests_failed"] == 0
    assert row["requests_incomplete"] == 0
    assert row["achieved_rps"] == pytest.approx(12.2)
    assert row["achieved_concurrency"] == pytest.approx(4.214, abs=1e-3)
    assert row["ttft_p50_ms"] == pytest.approx(262.643, abs=1e-3)
    assert row["ttft_p95_ms"] == pytest.approx(427.042, abs=1e-3)
    assert row["ttft_p50_ms"] <= row["ttft_p90_ms"] <= row["ttft_p95_ms"] <= row["ttft_p99_ms"]
    assert row["itl_p50_ms"] is not None and row["tpot_p50_ms"] is not None
    assert 0 < row["e2e_p50_s"] < row["e2e_p99_s"] < 1  # seconds, not ms
    assert row["output_tok_s"] == pytest.approx(391.13, abs=0.01)
    assert row["output_tokens_mean"] == 32
    assert row["client_warnings"] == "generation_delay_ttft;root_late"


def test_request_samples(benchmark):
    samples = request_samples(benchmark)
    assert len(samples) == 40
    assert all(s["ttft_ms"] > 0 and s["output_tokens"] == 32 for s in samples)


def test_old_style_report_without_percentile_blocks():
    old = {
        "metrics": {
            "time_to_first_token_ms": {"successful": {"mean": 10.0, "median": 9.0, "count": 3}}
        }
    }
    row = client_columns(old)
    assert row["ttft_p50_ms"] == 9.0 and row["ttft_p95_ms"] is None
    assert row["requests_ok"] is None


def _point(kind, target, seconds=10.0, requests=None):
    return LoadPoint(f"{kind}-{target}", kind, target, seconds, requests, None)


def test_points_group_into_profiles():
    points = [
        _point("concurrent", 1),
        _point("concurrent", 4),
        _point("poisson", 2.5),
        _point("synchronous", None),
        _point("synchronous", None, 5.0),
    ]
    groups = build_groups(points)
    assert groups[0] == {
        "profile": {"kind": "concurrent", "streams": [1, 4]},
        "constraints": [{"kind": "max_duration", "seconds": [10.0, 10.0]}],
    }
    assert groups[1]["profile"] == {"kind": "poisson", "rate": [2.5]}
    assert len(groups) == 4  # synchronous points are never merged
    assert all(point_budget_s(p) > 2 * p.max_seconds for p in points)


def test_data_args(tmp_path):
    data = SyntheticData(
        kind="synthetic", prompt_tokens=64, output_tokens=32, prompt_tokens_stdev=8
    )
    assert data_args(data, tmp_path) == {
        "kind": "synthetic_text",
        "prompt_tokens": 64,
        "output_tokens": 32,
        "prompt_tokens_stdev": 8,
    }


def test_dispatch_lag_is_request_start_minus_targeted_start(benchmark):
    # concurrent 8 on 2 cores: the recorded client sent requests 0.34 s late at the median
    lag = dispatch_lag(benchmark)
    assert lag == {"dispatch_lag_p50_ms": 338.4, "dispatch_lag_p95_ms": 761.0}
    assert client_columns(benchmark)["dispatch_lag_p95_ms"] == 761.0
    assert dispatch_lag({"requests": {"successful": [{"request_latency": 1.0}]}}) == {
        "dispatch_lag_p50_ms": None,
        "dispatch_lag_p95_ms": None,
    }


def test_warmup_and_cooldown_reach_guidellm_and_split_profiles():
    from dataclasses import replace

    steady = replace(_point("poisson", 2.0, 60.0), warmup=0.1, cooldown=0.1)
    groups = build_groups([steady, replace(steady, target=4.0), _point("poisson", 8.0, 60.0)])
    assert groups[0]["profile"] == {
        "kind": "poisson",
        "warmup": 0.1,
        "cooldown": 0.1,
        "rate": [2.0, 4.0],
    }
    assert "cooldown" not in groups[1]["profile"]  # another crop: another GuideLLM profile


def test_guidellm_worker_processes_follow_the_clients_cpus(monkeypatch):
    from tunebench.load.guidellm import worker_processes

    assert worker_processes({1}) == 1  # the 2-core box: client on one core
    assert worker_processes({0, 1}) == 1  # sharing two cores with the server
    assert worker_processes(set(range(8, 16))) == 4
    assert worker_processes(set(range(64))) == 8  # capped
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)))
    assert worker_processes(None) == 8  # unpinned: this process's CPUs


def test_a_dataset_that_ran_out_is_a_client_limit_the_window_names(fixtures, benchmark):
    """A real report whose 30-row file ran out at 4 streams: GuideLLM stopped queuing with
    `requests_exhausted`; the point is client-limited, saying so. A report that ended at its
    own max_seconds is not."""
    from tunebench.points.client_limit import verdict

    report = json.loads((fixtures / "guidellm/v0.8.1-data-ran-out-c4.json").read_text())
    row = client_columns(report["benchmarks"][0])
    assert "requests_exhausted" in row["client_warnings"].split(";")
    assert row["requests_ok"] == 30
    limited = verdict({**row, "load_kind": "concurrent", "target": 4})
    assert limited["client_limited"] is True
    assert limited["client_limited_reason"].startswith("its dataset ran out after 30 requests")
    assert "requests_exhausted" not in client_columns(benchmark)["client_warnings"]
