"""import: GuideLLM 0.3-style (YAML) and 0.8 reports, vllm bench serve JSON."""

from __future__ import annotations

import json

import numpy as np
import yaml

from tests.conftest import FIXTURES
from tunebench.analysis.api import compare, load_requests, load_run


def _distribution(values):
    values = np.asarray(values, dtype=float)
    return {
        "mean": float(values.mean()),
        "median": float(np.median(values)),
        "count": len(values),
        "min": float(values.min()),
        "max": float(values.max()),
        "percentiles": {
            f"p{p:02d}" if p < 100 else "p99": float(np.percentile(values, p))
            for p in (10, 25, 75, 90, 95, 99)
        },
    }


def guidellm_03_report(streams=(1, 4), seed=0, kind="concurrent") -> dict:
    """A report in GuideLLM 0.3's documented layout: args.strategy, run_stats, computed fields.
    `kind` synchronous: one benchmark without a numeric target."""
    if kind == "synchronous":
        streams = (1,)
    rng = np.random.default_rng(seed)
    benchmarks = []
    for i, stream in enumerate(streams):
        ttft = rng.lognormal(np.log(40 * stream), 0.2, 60)
        itl = rng.lognormal(np.log(5), 0.1, 60)
        latency = (ttft + 31 * itl) / 1000
        requests = [
            {
                "type_": "generative_text_response",
                "request_id": str(j),
                "prompt_tokens": 64,
                "output_tokens": 32,
                "time_to_first_token_ms": float(t),
                "inter_token_latency_ms": float(gap),
                "time_per_output_token_ms": float(gap),
                "request_latency": float(e),
            }
            for j, (t, gap, e) in enumerate(zip(ttft, itl, latency))
        ]
        start = 1_750_000_000.0 + 100 * i
        benchmarks.append(
            {
                "type_": "generative_benchmark",
                "run_id": "r",
                "id_": str(i),
                "args": {
                    "strategy_index": i,
                    "strategy": {"type_": "synchronous"}
                    if kind == "synchronous"
                    else {"type_": "concurrent", "streams": stream},
                    "max_duration": 30.0,
                },
                "run_stats": {
                    "start_time": start,
                    "end_time": start + 30,
                    "requests_made": {"successful": 60, "errored": 0, "incomplete": 0, "total": 60},
                },
                "start_time": start,
                "end_time": start + 30,
                "metrics": {
                    "request_totals": {
                        "successful": 60,
                        "errored": 0,
                        "incomplete": 0,
                        "total": 60,
                    },
                    "requests_per_second": {"successful": {"mean": 2.0 * stream, "count": 60}},
                    "request_concurrency": {"successful": {"mean": float(stream), "count": 60}},
                    "time_to_first_token_ms": {"successful": _distribution(ttft)},
                    "inter_token_latency_ms": {"successful": _distribution(itl)},
                    "request_latency": {"successful": _distribution(latency)},
                    "output_tokens_per_second": {
                        "successful": {"mean": 64.0 * stream, "count": 60}
                    },
                },
                "requests": {"successful": requests, "errored": [], "incomplete": []},
            }
        )
    return {"benchmarks": benchmarks}


def vllm_bench_result(rate=4.0, ttft_scale=1.0, seed=0) -> dict:
    """`vllm bench serve --save-result --save-detailed` output, per vllm/benchmarks/serve.py."""
    rng = np.random.default_rng(seed)
    ttfts = rng.lognormal(np.log(0.05 * ttft_scale), 0.2, 80)
    itls = [list(rng.lognormal(np.log(0.005), 0.1, 31)) for _ in range(80)]
    latencies = ttfts + np.array([sum(i) for i in itls])
    result = {
        "date": "20261121-120000",
        "backend": "vllm",
        "model_id": "m",
        "num_prompts": 80,
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 20.0,
        "completed": 80,
        "failed": 0,
        "total_input_tokens": 5120,
        "total_output_tokens": 2560,
        "request_throughput": 4.0,
        "output_throughput": 128.0,
        "total_token_throughput": 384.0,
        "input_lens": [64] * 80,
        "output_lens": [32] * 80,
        "ttfts": list(ttfts),
        "itls": itls,
        "latencies": list(latencies),
        "errors": [""] * 80,
    }
    for name, values in (
        ("ttft", ttfts),
        ("tpot", latencies / 32),
        ("itl", np.concatenate(itls)),
        ("e2el", latencies),
    ):
        result[f"mean_{name}_ms"] = float(values.mean() * 1000)
        result[f"median_{name}_ms"] = float(np.median(values) * 1000)
        result[f"std_{name}_ms"] = float(values.std() * 1000)
        result[f"p99_{name}_ms"] = float(np.percentile(values, 99) * 1000)
    return result


def test_guidellm_08_report(tmp_path, cli):
    result = cli(
        "import",
        str(FIXTURES / "guidellm/v0.8.1-mns2-c1-c8.json"),
        "--name",
        "g08",
        "--root",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "imported 2 point(s)" in result.stdout
    points = load_run("g08", tmp_path)
    assert list(points["point_id"]) == ["concurrent-1", "concurrent-8"]
    assert (points["server_metrics"] == "absent").all()
    assert points["ttft_p50_ms"].iloc[1] > points["ttft_p50_ms"].iloc[0]
    assert len(load_requests("g08", tmp_path, point_id="concurrent-8")) == 40


def test_guidellm_03_yaml_report_imports_and_compares(tmp_path, cli):
    for name, seed in (("old-a", 1), ("old-b", 2)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(guidellm_03_report(seed=seed)))
        assert cli("import", str(path), "--root", str(tmp_path / "runs")).returncode == 0
    points = load_run("old-a", tmp_path / "runs")
    assert list(points["point_id"]) == ["concurrent-1", "concurrent-4"]
    assert points["ttft_p50_ms"].iloc[0] < points["ttft_p50_ms"].iloc[1]
    assert points["duration_s"].iloc[0] == 30
    result = compare(["old-a", "old-b"], root=tmp_path / "runs", metrics=["ttft_p50"])
    assert set(result.rows["verdict"]) == {"no significant change"}  # same distribution


def test_vllm_bench_results_import_and_compare(tmp_path, cli):
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps(vllm_bench_result(seed=1)))
    slow.write_text(json.dumps(vllm_bench_result(ttft_scale=1.5, seed=2)))
    for path in (base, slow):
        assert cli("import", str(path), "--root", str(tmp_path / "runs")).returncode == 0
    points = load_run("base", tmp_path / "runs")
    row = points.iloc[0]
    assert row["load_kind"] == "poisson" and row["target"] == 4.0
    assert row["requests_ok"] == 80 and row["output_tok_s"] == 128.0
    assert 40 < row["ttft_p50_ms"] < 60 and row["server_metrics"] == "absent"
    assert len(load_requests("base", tmp_path / "runs")) == 80
    gate = cli(
        "compare",
        "base",
        "slow",
        "--root",
        str(tmp_path / "runs"),
        "-m",
        "ttft_p50",
        "--fail-on-regression",
        "10",
    )
    assert gate.returncode == 1, gate.stdout
    report = cli("report", "slow", "--root", str(tmp_path / "runs"))
    assert report.returncode == 0 and "report.html" in report.stdout


def test_unknown_file_is_a_one_line_error(tmp_path, cli):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"hello": "world"}))
    result = cli("import", str(path), "--root", str(tmp_path))
    assert result.returncode == 2
    assert "not a GuideLLM report" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "unreadable json file" in cli("import", str(broken), "--root", str(tmp_path)).stderr


# -- issue 46, item 15: GuideLLM 0.3 keeps its request counts beside the metrics ------------

GUIDELLM_03 = FIXTURES / "guidellm/v0.3-layout-c2.json"


def test_a_guidellm_03_report_keeps_its_request_counts_and_passes_its_own_gate(tmp_path, cli):
    report = json.loads(GUIDELLM_03.read_text())
    (benchmark,) = report["benchmarks"]
    # 0.3's layout: the counts beside the metrics, not in them
    assert "request_totals" not in benchmark["metrics"]
    totals = benchmark["request_totals"]
    assert (totals["successful"], totals["incomplete"], totals["total"]) == (14, 1, 15)
    for name in ("a", "b"):
        done = cli("import", str(GUIDELLM_03), "--name", name, "--root", str(tmp_path))
        assert done.returncode == 0, done.stderr
    points = load_run("a", tmp_path)
    row = points.iloc[0]
    assert (row["requests_ok"], row["requests_incomplete"], row["requests_failed"]) == (14, 1, 0)
    assert bool(row["valid"]) and not row["invalid_reason"]
    # an import is unverified by nature (no server metrics); its points are valid
    gate = cli(
        "compare", "a", "b", "--root", str(tmp_path), "--fail-on-regression", "5",
        "--allow-unverified",
    )  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_a_report_without_request_counts_is_unverified_not_invalid(tmp_path, cli):
    report = json.loads(GUIDELLM_03.read_text())
    del report["benchmarks"][0]["request_totals"]
    path = tmp_path / "no-counts.json"
    path.write_text(json.dumps(report))
    assert cli("import", str(path), "--root", str(tmp_path / "runs")).returncode == 0
    row = load_run("no-counts", tmp_path / "runs").iloc[0]
    assert bool(row["valid"]) and not row["invalid_reason"]
    assert row["unverified_reason"].endswith("; request counts not in the report")
