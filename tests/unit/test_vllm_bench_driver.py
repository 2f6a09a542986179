"""The vllm-bench driver's pure parts: which points it can run, and the flags it passes."""

from __future__ import annotations

import pytest

from tunebench.load.vllm_bench import num_prompts, point_argv, profile_problem
from tunebench.spec.models import SyntheticData
from tunebench.spec.plan import LoadPoint

DATA = SyntheticData(kind="synthetic", prompt_tokens=64, output_tokens=32, seed=7)


def point(kind: str, target: float | None, **limits) -> LoadPoint:
    return LoadPoint(
        point_id=f"{kind}-{target}",
        kind=kind,
        target=target,
        max_seconds=limits.get("max_seconds"),
        max_requests=limits.get("max_requests"),
        warmup=limits.get("warmup"),
    )


def flags(argv: list[str]) -> dict[str, str]:
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


def test_a_concurrent_point_runs_its_requests_at_that_concurrency():
    argv = flags(point_argv(point("concurrent", 8, max_requests=40), DATA))
    assert argv["--max-concurrency"] == "8" and argv["--num-prompts"] == "40"
    assert argv["--random-input-len"] == "64" and argv["--random-output-len"] == "32"
    assert argv["--random-range-ratio"] == "0.000" and argv["--seed"] == "7"
    assert argv["--dataset-name"] == "random" and argv["--endpoint"] == "/v1/completions"
    assert "--request-rate" not in argv


def test_a_poisson_point_of_seconds_becomes_its_expected_request_count():
    p = point("poisson", 2.5, max_seconds=10)
    argv = flags(point_argv(p, DATA))
    assert argv["--request-rate"] == "2.5" and argv["--burstiness"] == "1"
    assert num_prompts(p) == 25 and argv["--num-prompts"] == "25"


def test_spread_in_the_data_becomes_a_range_ratio_of_the_same_sd():
    data = SyntheticData(
        kind="synthetic", prompt_tokens=100, output_tokens=32, prompt_tokens_stdev=10
    )
    argv = flags(point_argv(point("synchronous", None, max_requests=5), data))
    assert argv["--random-range-ratio"] == "0.173"  # 0.1 x sqrt(3)
    assert argv["--max-concurrency"] == "1"


@pytest.mark.parametrize(
    "bad, says",
    [
        (point("constant", 2.0, max_seconds=5), "kind constant"),
        (point("sweep", None, max_seconds=5), "kind sweep"),
        (point("concurrent", 4, max_seconds=5), "without max_requests"),
        (point("poisson", 2.0, max_seconds=5, warmup=2), "warmup/cooldown"),
    ],
)
def test_points_it_cannot_express_are_named(bad, says):
    assert says in profile_problem(bad)


def test_points_it_can_run_pass():
    assert profile_problem(point("poisson", 2.0, max_seconds=5)) is None
    assert profile_problem(point("throughput", None, max_requests=20)) is None


def test_a_real_result_becomes_the_columns_and_samples_of_a_point():
    import json
    from pathlib import Path

    from tunebench.load.vllm_bench_report import (
        client_columns,
        measured_window,
        request_samples,
    )

    data = json.loads(
        (Path(__file__).parent.parent / "fixtures/vllm-bench/concurrent-8.json").read_text()
    )
    columns = client_columns(data)
    assert columns["load_kind"] == "concurrent" and columns["target"] == 8.0
    assert columns["requests_ok"] == 40 and columns["output_tokens_mean"] == 32.0
    assert columns["output_tok_s"] == data["output_throughput"]
    assert columns["ttft_p50_ms"] == data["median_ttft_ms"]
    assert 0 <= columns["dispatch_lag_p50_ms"] <= columns["dispatch_lag_p95_ms"]
    samples = request_samples(data)
    assert len(samples) == 40
    start, end = measured_window(data)
    assert abs((end - start) - data["duration"]) < 0.5  # epoch times from perf counters
    assert all(start <= s["start_time"] < s["end_time"] <= end for s in samples)
    assert [s["start_time"] for s in samples] == sorted(s["start_time"] for s in samples)
