"""/metrics parsing for both naming generations, and per-point window statistics."""

from __future__ import annotations

import pytest

from tunebench.metrics.parse import MetricsParseError, Snapshot, snapshot_from_text
from tunebench.metrics.summary import summarize_window


def test_v1_names_from_a_real_vllm_032_scrape(fixtures):
    snap = snapshot_from_text((fixtures / "metrics/vllm-0.32-idle.txt").read_text(), 1.0)
    values = snap.values
    assert values["kv_usage"] == 0.0
    assert values["running"] == 0.0 and values["waiting"] == 0.0
    assert values["preemptions"] == 0.0  # vllm:num_preemptions_total
    assert values["prefix_queries"] == 0.0  # vllm:prefix_cache_queries_total
    assert values["queue_time_count"] == 0.0
    assert "prefix_hit_rate_gauge" not in values  # V0 only
    assert snap.cache_config["block_size"] == "128"
    assert snap.cache_config["kv_cache_size_tokens"] == "262144"
    assert snap.cache_config["enable_prefix_caching"] == "True"
    assert "engine" not in snap.cache_config


def test_v0_names_and_counters_without_total(fixtures):
    snap = snapshot_from_text((fixtures / "metrics/vllm-v0-busy.txt").read_text(), 1.0)
    values = snap.values
    assert values["kv_usage"] == pytest.approx(0.42)  # vllm:gpu_cache_usage_perc
    assert values["running"] == 4 and values["waiting"] == 3
    assert values["prefix_hit_rate_gauge"] == pytest.approx(0.25)
    assert values["preemptions"] == 7  # counter without _total
    assert values["spec_draft_tokens"] == 300 and values["spec_accepted_tokens"] == 180
    assert values["queue_time_sum"] == 12.5 and values["queue_time_count"] == 100
    assert snap.cache_config["cache_dtype"] == "fp8"


def test_series_of_several_engines_combine():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 5\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6\n'
    )
    values = snapshot_from_text(text, 0).values
    assert values["running"] == 8  # summed
    assert values["kv_usage"] == pytest.approx(0.4)  # averaged


def test_garbage_is_a_parse_error():
    with pytest.raises(MetricsParseError):
        snapshot_from_text("<html>not metrics</html>\n{", 0)


def _snap(t, **values):
    return Snapshot(time=t, values=values)


def test_window_gauges_counters_histograms():
    series = [
        _snap(
            0,
            kv_usage=0.0,
            running=0,
            waiting=0,
            preemptions=1,
            queue_time_sum=1.0,
            queue_time_count=10,
            prefix_hits=0,
            prefix_queries=0,
            spec_drafts=0,
            spec_draft_tokens=0,
            spec_accepted_tokens=0,
        ),
        _snap(
            10,
            kv_usage=0.5,
            running=2,
            waiting=4,
            preemptions=1,
            queue_time_sum=2.0,
            queue_time_count=15,
            prefix_hits=5,
            prefix_queries=10,
            spec_drafts=10,
            spec_draft_tokens=30,
            spec_accepted_tokens=15,
        ),
        _snap(
            20,
            kv_usage=0.3,
            running=2,
            waiting=2,
            preemptions=3,
            queue_time_sum=4.0,
            queue_time_count=30,
            prefix_hits=10,
            prefix_queries=40,
            spec_drafts=20,
            spec_draft_tokens=60,
            spec_accepted_tokens=30,
        ),
    ]
    out = summarize_window(series, start=5, end=20)
    assert out["kv_usage_mean"] == pytest.approx(0.4) and out["kv_usage_max"] == 0.5
    assert out["waiting_max"] == 4 and out["running_mean"] == 2
    # counters: baseline is the last scrape at or before start (t=0), final at or after end
    assert out["preemptions"] == 2
    assert out["queue_time_mean_s"] == pytest.approx(3.0 / 20)
    assert out["queue_depth_mean"] == pytest.approx(3.0 / 20)  # Little's law: 3 s over 20 s
    assert out["prefix_hit_rate"] == pytest.approx(10 / 40)
    assert out["spec_acceptance_rate"] == pytest.approx(0.5)
    assert out["spec_mean_acceptance_length"] == pytest.approx(1 + 30 / 20)
    assert out["spec_drafts"] == 20  # 20 - 0 between the scrapes around the window
    assert out["server_samples"] == 2


def test_speculation_that_proposed_nothing_says_zero_drafts_not_nothing():
    """n-gram lookup on text that never repeats: the counters exist and stand still."""
    series = [
        _snap(t, spec_drafts=7, spec_draft_tokens=21, spec_accepted_tokens=9) for t in (0, 10, 20)
    ]
    out = summarize_window(series, start=5, end=15)
    assert out["spec_drafts"] == 0
    assert out["spec_acceptance_rate"] is None and out["spec_mean_acceptance_length"] is None
    without = summarize_window([_snap(t, running=1) for t in (0, 10, 20)], start=5, end=15)
    assert without["spec_drafts"] is None


def test_window_without_data_is_all_none():
    out = summarize_window([], 0, 10)
    assert out["server_samples"] == 0
    assert all(v is None for k, v in out.items() if k != "server_samples")


def test_v0_hit_rate_gauge_is_used_when_counters_are_missing():
    series = [
        _snap(0, prefix_hit_rate_gauge=0.2),
        _snap(5, prefix_hit_rate_gauge=0.4),
        _snap(10, prefix_hit_rate_gauge=0.6),
    ]
    assert summarize_window(series, 0, 10)["prefix_hit_rate"] == pytest.approx(0.4)
