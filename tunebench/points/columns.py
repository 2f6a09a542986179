"""The columns of points.csv and requests/<config>.csv, in order: the stable run format.

This module owns the names; the load drivers, the metrics summary and the rules of this
package fill them. docs/run-format.md describes each column.
"""

from __future__ import annotations

# `repeat`: 1, or the repeat of the point when the sweep sets `repeats: N`
ID_COLUMNS = ("run_id", "config_id", "config_label", "point_id", "load_kind", "target", "repeat")

# What the load generator measured (client side).
CLIENT_COLUMNS = (
    "achieved_rps",
    "achieved_concurrency",
    "requests_ok",
    "requests_failed",
    "requests_incomplete",
    "duration_s",
    "ttft_mean_ms",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "itl_mean_ms",
    "itl_p50_ms",
    "itl_p95_ms",
    "itl_p99_ms",
    "tpot_mean_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p95_s",
    "e2e_p99_s",
    "output_tok_s",
    "total_tok_s",
    "prompt_tokens_mean",
    "output_tokens_mean",
    "client_warnings",
)

# The load generator itself over the window: how late it sent requests (GuideLLM's request
# start minus its targeted start) and its CPU (load/client_usage.py); points/client_limit.py
# flags a saturated or starved client.
CLIENT_LOAD_COLUMNS = (
    "load_driver",  # guidellm | vllm-bench (both in a cross-check run), or the imported tool
    "dispatch_lag_p50_ms",
    "dispatch_lag_p95_ms",
    "client_cpu_pct",
    "client_busiest_pct",
    "client_wait_pct",
)

# What the server's /metrics said over the point's window (metrics/summary.py).
SERVER_COLUMNS = (
    "kv_usage_mean",
    "kv_usage_max",
    "running_mean",
    "running_max",
    "waiting_mean",
    "waiting_max",
    "queue_depth_mean",
    "running_depth_mean",
    "queue_time_mean_s",
    "prefill_time_mean_s",
    "decode_time_mean_s",
    "preemptions",
    "prefix_hit_rate",
    "spec_drafts",
    "spec_acceptance_rate",
    "spec_mean_acceptance_length",
    # counter deltas between the scrapes around the window (points/tokens.py reconciles
    # them with what the client counted); extra_s: how far those scrapes lie outside it
    "server_prompt_tokens",
    "server_output_tokens",
    "server_requests_ok",
    "server_window_extra_s",
    "server_samples",
)

# With `cost:` in the spec (points/cost.py): the replica's price per hour and what a point
# costs at the rate it was measured.
COST_COLUMNS = ("cost_per_hour", "cost_per_mtok_output", "cost_per_mtok_total", "requests_per_cost")

# Energy over the point's window (points/energy.py, tunebench/energy/): joules, mean power,
# joules per output token and per token; energy_source names the meter and what it measured;
# without a meter the numbers stay empty and energy_note says why (never 0 for unknown).
ENERGY_COLUMNS = (
    "energy_j",
    "power_w",
    "joules_per_output_token",
    "joules_per_token",
    "energy_source",
    "energy_note",
)

# The decode roofline (points/roofline.py): the output tok/s that memory bandwidth allows at
# the point's batch, and the measured output tok/s as a share of it.
ROOFLINE_COLUMNS = ("roofline_decode_tok_s", "roofline_pct")

# A replayed trace (`kind: replay`, points/trace.py): the slice and its fit to the context,
# how late requests were sent against the trace's times, the lengths the server counted
# against those asked for, and the prefix-cache hit rate the workload predicts (beside the
# measured `prefix_hit_rate`).
TRACE_COLUMNS = (
    "trace_requests",
    "trace_length_scale",
    "trace_clamped",
    "arrival_lag_p50_ms",
    "arrival_lag_p95_ms",
    "arrival_late_share",
    "prompt_tokens_ratio",
    "output_tokens_ratio",
    "length_mismatch_share",
    "prefix_hit_rate_predicted",
)

# Shared prefixes on synthetic data (`load.data.prefix`, points/prefix.py): the groups, their
# prefix tokens and popularity skew, the groups primed before the window (empty: no prime)
# and the requests a warmup sent ahead of it; with them and the server's block size the row
# predicts `prefix_hit_rate_predicted` (above) for the measured `prefix_hit_rate`.
PREFIX_COLUMNS = (
    "prefix_groups",
    "prefix_tokens",
    "prefix_zipf",
    "prefix_primed_groups",
    "prefix_requests_before",
)

# Multi-turn sessions (`load.data kind: sessions`, points/sessions.py): turns asked per session,
# sessions seen and complete, a complete session's first start to last answer. Each turn k
# adds turn<k>_requests, _ttft_p50_ms, _ttft_p95_ms, _prompt_tokens_mean and _cached_share
# after the columns below (as many as the sessions have turns).
SESSION_COLUMNS = (
    "session_turns",
    "sessions",
    "sessions_complete",
    "session_e2e_p50_s",
    "session_e2e_p95_s",
)

# Whether the machine held still under the point (points/machine.py, points/steadiness.py).
MACHINE_COLUMNS = (
    "window_change_pct",  # the steadiness test's stretch: how much slower (signed), and where
    "window_change_from_s",
    "window_change_to_s",
    "throttled_pct",  # of the window, the server's cgroup held by its CPU quota
    "steal_pct",  # of the server's CPUs' time, stolen by the hypervisor
    "foreign_cpu_pct",  # of the server's CPUs' time, used by processes that are not ours
    "cpu_mhz",
    "probe_ms",  # the probe's median inside the window
    "probe_before_ms",  # the last probe before the window
    "probe_after_ms",  # the first probe after it
    "machine_note",  # what could not be read (no telemetry here, too few requests)
)

SLO_COLUMNS = ("slo_met", "slo_ratio", "slo_violations", "goodput_rps", "goodput_fraction")
LIMIT_COLUMNS = ("client_limited", "client_limited_reason")
# Percentile columns that rest on fewer requests than that percentile needs (points/samples.py)
SAMPLE_COLUMNS = ("thin_percentiles",)
STATUS_COLUMNS = (
    "server_metrics",
    "server_metrics_note",
    "valid",
    "invalid_reason",
    "unverified_reason",
    "start_time",
    "end_time",
    "raw_report",
)

# requests/<config>.csv: one row per successful request of every point of a configuration.
# start_time/end_time: epoch seconds, so compare can resample in time order and bin rates.
REQUEST_COLUMNS = (
    "point_id",
    "repeat",
    "ttft_ms",
    "itl_ms",
    "tpot_ms",
    "e2e_s",
    "prompt_tokens",
    "output_tokens",
    "start_time",
    "end_time",
    # a replayed trace: when the request was due, the lengths asked for, and the prefix it
    # shares with the prompts sent before it (points/trace.py)
    "scheduled_time",
    "trace_prompt_tokens",
    "trace_output_tokens",
    "reuse_tokens",
    # a multi-turn session: which session and turn (from 1), and the prompt tokens the server
    # found in its prefix cache (usage cached_tokens; empty unless the server reports them)
    "session",
    "turn",
    "cached_tokens",
)

# Text columns (everything else in points.csv is a number or a boolean).
TEXT_COLUMNS = frozenset(
    {
        *ID_COLUMNS,
        "variant",
        "server_metrics",
        "server_metrics_note",
        "invalid_reason",
        "unverified_reason",
        "client_warnings",
        "load_driver",
        "raw_report",
        "slo_violations",
        "client_limited_reason",
        "thin_percentiles",
        "energy_source",
        "energy_note",
        "machine_note",
    }
    - {"target"}
)
BOOL_COLUMNS = ("valid", "client_limited", "slo_met")


def point_columns(varied_args: list[str]) -> list[str]:
    """Identity, varied server args, client stats, server stats, SLO, client-limited, validity."""
    return [
        *ID_COLUMNS,
        *varied_args,
        *(c for c in CLIENT_COLUMNS if c != "client_warnings"),
        *CLIENT_LOAD_COLUMNS,
        *SERVER_COLUMNS,
        *TRACE_COLUMNS,
        *PREFIX_COLUMNS,
        *SESSION_COLUMNS,
        *SLO_COLUMNS,
        *COST_COLUMNS,
        *ENERGY_COLUMNS,
        *ROOFLINE_COLUMNS,
        *MACHINE_COLUMNS,
        *LIMIT_COLUMNS,
        *SAMPLE_COLUMNS,
        *STATUS_COLUMNS,
        "client_warnings",
    ]
