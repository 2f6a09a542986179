"""import: real AIPerf 0.13.0 and inference-perf 0.7.0 files (tests/fixtures/peers, made by
the tools against the CPU server; README there)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.conftest import FIXTURES
from tunebench.errors import SpecError
from tunebench.importers import import_results
from tunebench.store.run import read_points, read_requests

AIPERF = FIXTURES / "peers" / "aiperf-poisson-4"
INFERENCE_PERF = FIXTURES / "peers" / "inference-perf-concurrent-1-4"


def _only_point(run):
    (row,) = read_points(run)
    return row


def test_an_aiperf_artifact_directory_is_one_point_with_its_requests(tmp_path):
    run = import_results([AIPERF], "aiperf", tmp_path).path
    row = _only_point(run)
    assert (row["point_id"], row["load_kind"], row["load_driver"]) == (
        "poisson-4",
        "poisson",
        "aiperf",
    )
    assert int(row["requests_ok"]) == 20 and row["valid"] == "True"
    summary = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    assert float(row["ttft_p50_ms"]) == pytest.approx(summary["time_to_first_token"]["p50"])
    duration = summary["benchmark_duration"]["avg"]
    tokens = summary["total_usage_completion_tokens"]["avg"]
    assert float(row["output_tok_s"]) == pytest.approx(tokens / duration)
    samples = read_requests(run, "c1")
    assert len(samples) == 20
    starts = [float(s["start_time"]) for s in samples]
    assert starts == sorted(starts) and starts[0] > 1.7e9  # epoch seconds
    # ITL as tunebench defines it: (latency - TTFT) / (server tokens - 1), per request
    itl = [(float(s["e2e_s"]) * 1000 - float(s["ttft_ms"])) / 31 for s in samples]
    assert float(row["itl_p50_ms"]) == pytest.approx(float(np.quantile(itl, 0.5)), rel=1e-6)
    assert float(row["start_time"]) == pytest.approx(min(starts), abs=1e-3)


def test_the_aiperf_summary_file_imports_like_its_directory(tmp_path):
    by_dir = _only_point(import_results([AIPERF], "a", tmp_path / "a").path)
    by_file = _only_point(
        import_results([AIPERF / "profile_export_aiperf.json"], "b", tmp_path / "b").path
    )
    for column in ("ttft_p50_ms", "itl_p50_ms", "output_tok_s", "requests_ok", "target"):
        assert by_dir[column] == by_file[column], column


def test_an_inference_perf_report_is_one_point_per_stage_cut_by_start_order(tmp_path):
    run = import_results([INFERENCE_PERF], "ip", tmp_path).path
    rows = read_points(run)
    assert [(r["point_id"], r["load_driver"]) for r in rows] == [
        ("concurrent-1", "inference-perf"),
        ("concurrent-4", "inference-perf"),
    ]
    samples = read_requests(run, "c1")
    first = [s for s in samples if s["point_id"] == "concurrent-1"]
    second = [s for s in samples if s["point_id"] == "concurrent-4"]
    assert len(first) == len(second) == 20
    # stages run one after the other: every request of the second starts after the first's
    assert max(float(s["start_time"]) for s in first) < min(float(s["start_time"]) for s in second)
    for row in rows:
        assert float(row["output_tokens_mean"]) == 32
        # the server's tokens over the stage, not inference-perf's re-tokenised count
        assert float(row["output_tok_s"]) == pytest.approx(
            32 * float(row["achieved_rps"]), rel=0.01
        )
    one, four = rows
    assert float(four["achieved_rps"]) > float(one["achieved_rps"])


def test_a_per_request_file_that_does_not_add_up_gives_no_samples_not_wrong_ones(tmp_path):
    report = tmp_path / "report"
    shutil.copytree(INFERENCE_PERF, report)
    per_request = report / "per_request_lifecycle_metrics.json"
    entries = json.loads(per_request.read_text())
    per_request.write_text(json.dumps(entries[:-1]))
    run = import_results([report], "ip", tmp_path / "runs").path
    assert len(read_points(run)) == 2
    assert read_requests(run, "c1") == []


def test_a_stage_file_imports_its_own_stage(tmp_path):
    run = import_results([INFERENCE_PERF / "stage_1_lifecycle_metrics.json"], "ip", tmp_path).path
    assert _only_point(run)["point_id"] == "concurrent-4"
    assert len(read_requests(run, "c1")) == 20


def test_a_directory_of_neither_tool_is_one_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="neither AIPerf's .* nor inference-perf's"):
        import_results([tmp_path / "empty"], None, tmp_path / "runs")


def test_a_broken_aiperf_record_names_its_line(tmp_path):
    broken = tmp_path / "aiperf"
    shutil.copytree(AIPERF, broken)
    records = broken / "profile_export.jsonl"
    lines = records.read_text().splitlines()
    records.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(SpecError, match="profile_export.jsonl:2: not a JSON line"):
        import_results([broken], None, tmp_path / "runs")
