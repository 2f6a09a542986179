"""Both load drivers for real, in cross-check mode: vLLM's own benchmark and GuideLLM take
turns on every point of a vLLM-CPU server; the vllm-bench points are stored like GuideLLM's
(columns, samples, server-metrics windows, validity) and the run holds the two drivers'
disagreement with intervals and a verdict per point. One point replays the first 15 s of
the Azure cut at 2x: vllm-bench through vLLM's timed_trace dataset, with the same arrival
and length evidence as GuideLLM's replay."""

from __future__ import annotations

import csv
import datetime

import pandas as pd
import pytest

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.analysis.compare import align_key
from tunebench.store.layout import RunLayout
from tunebench.store.run import read_points, read_requests

# alone, in `make test`'s last step: two load drivers agree on one server only when
# neither is slowed by other work
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]

POINTS = ("concurrent-1", "concurrent-8", "poisson-4")
REPLAY = "replay-azure-2"  # the spec's replay point: Azure's first 15 s at 2x
AZURE = REPO / "sweeps" / "data" / "traces" / "azure-2023-conv-180s.csv"
AZURE_SECONDS, CONTEXT = 15, 512  # the spec's slice and max-model-len
VERDICTS = ("agree", "guidellm client-bound", "vllm-bench client-bound", "undecided")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("cross-check")
    result = run_cli("sweep", "tests/specs/vllm-bench-cpu.yaml", "--output", str(root), timeout=900)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert result.returncode == 0 and len(runs) == 1, (result.stdout[-3000:], result.stderr)
    return runs[0], result.stdout


def test_every_point_is_measured_by_both_drivers_alternated(swept):
    run, _ = swept
    rows = read_points(run)
    assert [r["point_id"] for r in rows] == [
        "concurrent-1@guidellm",
        "concurrent-1@vllm-bench",
        "concurrent-8@vllm-bench",
        "concurrent-8@guidellm",
        "poisson-4@guidellm",
        "poisson-4@vllm-bench",
        "replay-azure-2@vllm-bench",
        "replay-azure-2@guidellm",
    ]
    assert all(r["load_driver"] == r["point_id"].split("@")[1] for r in rows)


def test_vllm_bench_points_have_the_columns_guidellm_points_have(swept):
    run, _ = swept
    rows = {r["point_id"]: r for r in read_points(run)}
    for point in POINTS:
        for driver in ("guidellm", "vllm-bench"):
            row = rows[f"{point}@{driver}"]
            assert row["valid"] == "True", (point, driver, row.get("invalid_reason"))
            for column in ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "output_tok_s", "e2e_p50_s"):
                assert float(row[column]) > 0, (point, driver, column)
            assert float(row["output_tokens_mean"]) == 32.0  # both ignore EOS
            assert row["server_metrics"] != "absent" and float(row["kv_usage_max"]) >= 0
            assert float(row["dispatch_lag_p95_ms"]) >= 0
        bench = rows[f"{point}@vllm-bench"]
        assert int(bench["requests_ok"]) == (20 if point == "poisson-4" else 40)
    bench8, bench1 = rows["concurrent-8@vllm-bench"], rows["concurrent-1@vllm-bench"]
    # more streams, more throughput, from the same server
    assert float(bench8["output_tok_s"]) > float(bench1["output_tok_s"])
    assert 2.0 < float(bench8["achieved_concurrency"]) <= 8.5


def test_per_request_samples_carry_epoch_times_inside_the_window(swept):
    run, _ = swept
    rows = {r["point_id"]: r for r in read_points(run)}
    for point_id in ("concurrent-8@vllm-bench", "concurrent-8@guidellm"):
        samples = [r for r in read_requests(run, "c1") if r["point_id"] == point_id]
        assert len(samples) == 40, point_id
        start, end = float(rows[point_id]["start_time"]), float(rows[point_id]["end_time"])
        for sample in samples:
            assert start - 1 <= float(sample["start_time"]) <= float(sample["end_time"]) <= end + 1
            assert float(sample["ttft_ms"]) > 0


def test_the_run_holds_the_disagreement_and_a_verdict_per_point(swept):
    run, stdout = swept
    layout = RunLayout(run)
    with open(layout.cross_check_verdicts) as handle:
        verdicts = {r["point"]: r for r in csv.DictReader(handle)}
    replay = align_key(pd.Series({"point_id": REPLAY, "load_kind": "replay", "target": 2.0}))
    assert set(verdicts) == {"concurrent 1", "concurrent 8", "poisson 4", replay}
    assert "arrival lag p95" in verdicts[replay]["evidence"]
    for verdict in verdicts.values():
        assert verdict["verdict"] in VERDICTS or verdict["verdict"].endswith("adds client delay")
        assert "output tok/s" in verdict["evidence"], verdict
    with open(layout.cross_check_table) as handle:
        table = list(csv.DictReader(handle))
    tok = next(r for r in table if r["point"] == "concurrent 8" and r["metric"] == "output_tok_s")
    assert float(tok["guidellm"]) > 0 and float(tok["vllm-bench"]) > 0
    assert float(tok["ci_low_pct"]) <= float(tok["change_pct"]) <= float(tok["ci_high_pct"])
    assert "cross-check: vllm-bench vs guidellm" in stdout
    shown = run_cli("show", str(run))
    assert shown.returncode == 0 and "cross-check: vllm-bench vs guidellm" in shown.stdout
    assert "concurrent 8: " in shown.stdout


def test_each_driver_keeps_its_own_results_in_the_run(swept):
    run, _ = swept
    load_dir = RunLayout(run).load_dir("c1", 1, 1)
    assert len(list((load_dir / "vllm-bench" / "results").glob("*.json"))) == 4
    # the replay point's timed_trace file and its summary, beside vLLM's result
    assert (load_dir / "vllm-bench" / "trace" / f"{REPLAY}@vllm-bench.jsonl").is_file()
    assert (load_dir / "vllm-bench" / "trace" / f"{REPLAY}@vllm-bench.json").is_file()
    assert (load_dir / "vllm-bench" / "vllm-bench.log").is_file()
    assert (load_dir / "guidellm" / "guidellm.log").is_file()


def _azure_slice(seconds: float) -> list[tuple[int, int]]:
    """(prompt, output) tokens of the Azure cut's first `seconds`, read with csv."""
    rows = list(csv.DictReader(AZURE.open()))

    def moment(text: str) -> float:
        whole, _, fraction = text.partition(".")
        parsed = datetime.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        return parsed.timestamp() + float("0." + (fraction or "0"))

    first = min(moment(r["TIMESTAMP"]) for r in rows)
    return [
        (int(r["ContextTokens"]), int(r["GeneratedTokens"]))
        for r in rows
        if moment(r["TIMESTAMP"]) - first < seconds
    ]


def test_vllm_bench_replays_the_azure_cut_at_2x_on_time_and_at_its_lengths(swept):
    """vLLM's timed_trace plays the slice: every request sent, lag p95 under 50 ms against
    the trace's times at 2x (from the column and from the per-request times), and the
    server's token counts within 5% of the lengths the trace asks for at its scale."""
    run, _ = swept
    rows = {r["point_id"]: r for r in read_points(run)}
    row = rows[f"{REPLAY}@vllm-bench"]
    azure = _azure_slice(AZURE_SECONDS)
    assert row["load_driver"] == "vllm-bench" and row["valid"] == "True", row["invalid_reason"]
    assert int(row["trace_requests"]) == len(azure) == int(row["requests_ok"])
    assert float(row["arrival_lag_p95_ms"]) < 50, row["arrival_lag_p95_ms"]
    assert "not checked" not in row["unverified_reason"], row["unverified_reason"]
    samples = [r for r in read_requests(run, "c1") if r["point_id"] == f"{REPLAY}@vllm-bench"]
    assert len(samples) == len(azure)
    lags_ms = sorted((float(r["start_time"]) - float(r["scheduled_time"])) * 1000 for r in samples)
    assert lags_ms[int(0.95 * (len(lags_ms) - 1))] < 50, lags_ms
    # length_scale auto: the longest request fits the context; the BOS counted (2 at least)
    scale = min(1.0, CONTEXT / max(p + o for p, o in azure))
    prompt = sum(max(2, round(p * scale)) for p, _ in azure)
    output = sum(max(1, round(o * scale)) for _, o in azure)
    assert abs(float(row["prompt_tokens_ratio"]) - 1) <= 0.05, row["prompt_tokens_ratio"]
    assert abs(float(row["output_tokens_ratio"]) - 1) <= 0.05, row["output_tokens_ratio"]
    assert abs(sum(int(r["prompt_tokens"]) for r in samples) / prompt - 1) <= 0.05
    assert abs(sum(int(r["output_tokens"]) for r in samples) / output - 1) <= 0.05
