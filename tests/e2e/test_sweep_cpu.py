"""`tunebench sweep` end to end: real vLLM-CPU server, real GuideLLM, real /metrics."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.numbers import to_float
from tunebench.points.client_limit import SATURATED_PCT, STARVED_PCT

# alone, in `make test`'s last step: physics and regressions between configurations, from
# timed load on pinned cores
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]


def test_bad_config_fails_fast_with_the_servers_own_error(e2e_sweep):
    bad = e2e_sweep.config("bad-arg")
    assert bad["status"] == "failed"
    assert "argument --kv-cache-dtype: invalid choice: 'not-a-dtype'" in bad["error"]
    # fast: noticed when the process exited, not after the spec's start_timeout_s (300 s) of
    # waiting for a health check that could never come. vLLM's imports alone, before its
    # argparse speaks, took 43 s on a busy machine, so the bound is the timeout's half
    assert bad["start_s"] < 150, bad["start_s"]
    assert e2e_sweep.rows_of("bad-arg") == []
    assert "invalid choice: 'not-a-dtype'" in e2e_sweep.stderr  # shown while it runs


def test_sweep_goes_on_and_records_the_failure(e2e_sweep):
    assert e2e_sweep.returncode == 1, e2e_sweep.stderr[-2000:]
    assert e2e_sweep.manifest["status"] == "failed"
    assert [c["status"] for c in e2e_sweep.manifest["configs"]] == [
        "failed",
        "complete",
        "complete",
    ]
    assert "c1 failed:" in e2e_sweep.stdout and f"run: {e2e_sweep.shown}  " in e2e_sweep.stdout


@pytest.mark.parametrize("label", ["mns2", "mns8"])
def test_every_point_measured_with_server_metrics(e2e_sweep, label):
    rows = e2e_sweep.rows_of(label)
    assert [r["point_id"] for r in rows] == ["concurrent-1", "concurrent-8", "poisson-4"]
    for row in rows:
        assert int(row["requests_ok"]) > 10, row
        assert int(row["requests_failed"]) == 0, row
        assert row["valid"] == "True", row["invalid_reason"]
        assert row["server_metrics"] == "present"
        assert int(row["server_samples"]) >= 5  # 1 s scrapes over a 8-10 s point
        for column in (
            "kv_usage_max",
            "running_max",
            "waiting_max",
            "queue_time_mean_s",
            "prefill_time_mean_s",
            "decode_time_mean_s",
            "preemptions",
            "prefix_hit_rate",
            "ttft_p50_ms",
            "itl_p50_ms",
            "output_tok_s",
        ):
            assert row[column] != "", (column, row)
        # The time-averaged number of running requests comes from the inference-time
        # histogram, so it is exact. The running/KV gauges are not asserted on: on 2 cores
        # the scrape is served when vLLM's event loop is idle, i.e. mostly between requests,
        # and a whole configuration's samples can all read 0.
        assert float(row["running_depth_mean"]) > 0.1, row
    assert (e2e_sweep.path / f"metrics/{e2e_sweep.config(label)['config_id']}.csv").exists()


@pytest.mark.parametrize("label,seqs", [("mns2", 2), ("mns8", 8)])
def test_effective_configuration_recorded(e2e_sweep, label, seqs):
    config = e2e_sweep.config(label)
    effective = config["effective"]
    assert effective["max_model_len"] == 512
    assert effective["block_size"] > 0
    assert effective["kv_capacity_tokens"] > 0
    assert effective["cache_dtype"] == "auto"
    assert effective["prefix_caching"] is True
    assert effective["quantization"] is None and effective["speculative_method"] is None
    assert effective["vllm_version"]
    assert config["invalid_reasons"] == []
    assert config["args"]["max-num-seqs"] == seqs
    assert f"--max-num-seqs {seqs}" in " ".join(config["command_args"])


def test_physics_max_num_seqs_2_queues_at_8_streams(e2e_sweep):
    small = e2e_sweep.point("mns2", "concurrent-8")
    large = e2e_sweep.point("mns8", "concurrent-8")
    # Requests waited: the time-averaged queue depth (exact, from the queue-time histogram)
    # is above zero; the sampled gauge may or may not catch a burst at 1 scrape/s.
    assert float(small["queue_depth_mean"]) > 0.05, small
    assert float(small["queue_time_mean_s"]) > 10 * float(large["queue_time_mean_s"])
    assert float(small["running_max"]) <= 2
    assert float(small["ttft_p50_ms"]) > float(large["ttft_p50_ms"])


@pytest.mark.parametrize("label", ["mns2", "mns8"])
def test_a_sentinel_between_points_and_one_after_the_last_read_the_first_point_again(
    e2e_sweep, label
):
    """`machine: {sentinel_every: 1}`: concurrent-1, its sentinel, concurrent-8, poisson-4,
    the last sentinel; each read against the reading before it, the last also against
    concurrent-1 itself (runner/sentinel.py)."""
    records = e2e_sweep.config(label)["sentinels"]
    assert [(r["after"], r["against"], r["points"]) for r in records] == [
        ("concurrent-1", "concurrent-1", ["concurrent-1"]),
        ("poisson-4", "concurrent-1~sentinel@concurrent-1", ["concurrent-8", "poisson-4"]),
    ], records
    for record in records:
        assert "held" in record or record.get("note"), record
    assert "first_held" in records[1] or records[1].get("first_note"), records[1]
    # a sentinel is no row
    assert [r["point_id"] for r in e2e_sweep.rows_of(label)] == [
        "concurrent-1",
        "concurrent-8",
        "poisson-4",
    ]
    assert "sentinel after concurrent-1: concurrent-1 again for" in e2e_sweep.stderr


def test_run_directory_layout(e2e_sweep):
    path = e2e_sweep.path
    manifest = e2e_sweep.manifest
    assert manifest["schema_version"] == 2 and manifest["kind"] == "sweep"
    assert manifest["versions"]["vllm"] and manifest["versions"]["guidellm"] == "0.8.1"
    assert manifest["started_at"] and manifest["ended_at"]
    assert manifest["spec"]["name"] == "e2e-cpu"
    for config in ("c2", "c3"):
        reports = sorted((path / "guidellm" / config / "benchmarks").glob("*.json"))
        assert len(reports) == 5  # three points and two sentinels (points/sentinel.py)
        assert json.loads(reports[0].read_text())["benchmarks"][0]["requests"]["successful"]
        assert (path / "logs" / f"server-{config}.log").stat().st_size > 0
    header = (path / "points.csv").read_text().splitlines()[0].split(",")
    for column in (
        "run_id",
        "config_id",
        "point_id",
        "load_kind",
        "target",
        "achieved_rps",
        "achieved_concurrency",
        "requests_ok",
        "requests_failed",
        "ttft_p50_ms",
        "ttft_p95_ms",
        "ttft_p99_ms",
        "itl_p50_ms",
        "itl_p95_ms",
        "tpot_p50_ms",
        "e2e_p50_s",
        "e2e_p95_s",
        "output_tok_s",
        "kv_usage_mean",
        "kv_usage_max",
        "waiting_max",
        "running_max",
        "queue_time_mean_s",
        "preemptions",
        "prefix_hit_rate",
        "spec_acceptance_rate",
        "valid",
        "invalid_reason",
        "variant",
    ):
        assert column in header, column


def test_every_file_lands_in_the_run_under_a_relative_root(e2e_sweep):
    """The sweep ran with `--output <name>` relative to its working directory (as the
    default `reports/` is): each path the layout names is inside the run, once, and the
    report draws the server time series from it."""
    from tunebench.analysis.frames import load_run
    from tunebench.analysis.plots import run_figures
    from tunebench.store.layout import RunLayout

    path = e2e_sweep.path
    layout = RunLayout(path)
    assert not (path / path.parent.name).exists()  # not <run>/<root>/<run>/...
    for config in ("c2", "c3"):
        series = layout.series(config)
        assert series.is_file() and "kv_usage" in series.read_text().splitlines()[0].split(",")
        assert layout.requests(config).is_file() and layout.server_log(config).is_file()
    assert layout.points.is_file() and layout.manifest.is_file()
    titles = [title for title, _ in run_figures(load_run(path), path)]
    assert "Server time series: mns2" in titles and "Server time series: mns8" in titles


def test_no_process_left_behind(e2e_sweep):
    import os

    for config in e2e_sweep.manifest["configs"]:
        for key in ("server_pgid", "load_pgid"):
            if config.get(key):
                with pytest.raises(ProcessLookupError):
                    os.killpg(config[key], 0)


def test_show_and_runs(e2e_sweep):
    root = str(e2e_sweep.path.parent)
    shown = run_cli("show", e2e_sweep.path.name, "--root", root, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    points = json.loads(shown.stdout)
    assert len(points) == 6
    assert isinstance(points[0]["ttft_p50_ms"], float) and isinstance(points[0]["requests_ok"], int)
    assert points[0]["valid"] is True
    listed = run_cli("runs", "--root", root)
    assert e2e_sweep.path.name in listed.stdout and "failed" in listed.stdout
    table = run_cli("show", "e2e-cpu", "--root", root)
    assert "concurrent-8" in table.stdout and "c1 failed" in table.stdout


def gate_between_variants(e2e_sweep, baseline: str):
    """`compare RUN --by variant --baseline BASELINE` on TTFT with the 5% gate: (exit code,
    the rows at 8 streams, stderr)."""
    gate = run_cli(
        "compare",
        e2e_sweep.path.name,
        "--root",
        str(e2e_sweep.path.parent),
        "--by",
        "variant",
        "--baseline",
        baseline,
        "-m",
        "ttft_p50",
        "-m",
        "ttft_p95",
        "--format",
        "json",
        "--fail-on-regression",
        "5",
        # the gate's statistics are this test's subject; a window the machine moved under
        # (tests/e2e/test_drift_cpu.py's) would make its rows undecided
        "--allow-drift",
    )
    rows = json.loads(gate.stdout)["rows"] if gate.stdout else []
    at8 = [r for r in rows if r["load_kind"] == "concurrent" and r["target"] == 8]
    return gate.returncode, at8, gate.stderr


def test_compare_flags_the_real_regression(e2e_sweep):
    code, at8, stderr = gate_between_variants(e2e_sweep, "mns8")
    assert code == 1, stderr
    assert {r["candidate"] for r in at8} == {"variant=mns2"}
    worse = [r for r in at8 if r["verdict"] == "worse"]
    # the gate's rule: significantly worse (the CI excludes 0) by more than 5%
    assert any(r["ci_low_pct"] > 0 and r["change_pct"] > 5 for r in worse), at8
    # the other way round: the gate passes the better candidate, and says why
    code, at8, stderr = gate_between_variants(e2e_sweep, "mns2")
    assert code == 0, stderr
    assert {r["candidate"] for r in at8} == {"variant=mns8"}
    assert any(r["verdict"] == "better" for r in at8), at8
    assert "gate: pass: no row worse by more than 5%" in stderr, stderr


def test_slo_goodput_and_client_verdict(e2e_sweep):
    for label in ("mns2", "mns8"):
        for row in e2e_sweep.rows_of(label):
            # The verdict follows the spec's thresholds from the point's own percentiles
            # (slo: ttft p95 <= 5000 ms, e2e p99 <= 10 s, errors <= 1%).
            ok, failed = int(row["requests_ok"]), int(row["requests_failed"])
            meets = (
                float(row["ttft_p95_ms"]) <= 5000
                and float(row["e2e_p99_s"]) <= 10
                and failed / (ok + failed) <= 0.01
            )
            assert (row["slo_met"] == "True") == meets, row["slo_violations"]
            assert (row["slo_violations"] == "") == meets
            # goodput counts the requests that met every threshold, at the achieved rate
            fraction = float(row["goodput_fraction"])
            assert 0 <= fraction <= 1
            assert float(row["goodput_rps"]) == pytest.approx(fraction * float(row["achieved_rps"]))
        at8 = e2e_sweep.point(label, "concurrent-8")
        # Whether 2 cores can keep 8 streams busy is a property of the machine, not of the
        # code: assert that the verdict follows the rule from the point's own numbers.
        achieved = float(at8["achieved_concurrency"])
        late = "root_late" in at8["client_warnings"].split(";")
        short = achieved < 8 * (1 - 0.10)
        # a client short of CPU (its busiest thread saturated, or waiting for a core)
        busiest, waited = (to_float(at8[c]) for c in ("client_busiest_pct", "client_wait_pct"))
        short_of_cpu = (busiest or 0) >= SATURATED_PCT or (waited or 0) >= STARVED_PCT
        assert (at8["client_limited"] == "True") == (short or late or short_of_cpu), at8
        if short:
            assert (
                f"achieved concurrency {achieved:.2f} of 8 streams" in at8["client_limited_reason"]
            )
        if late:
            assert "GuideLLM warned: root_late" in at8["client_limited_reason"]


@pytest.mark.parametrize("label", ["mns2", "mns8"])
def test_roofline_bounds_the_measured_decode_and_energy_is_measured_or_says_why(e2e_sweep, label):
    from tunebench.energy.rapl import package_zones

    config = e2e_sweep.config(label)
    roofline = config["roofline"]
    # vLLM-CPU serves the float32 checkpoint in bfloat16: the weights it reads per step
    assert config["effective"]["dtype"] == "bfloat16"
    assert 6e6 < roofline["weight_bytes"] < 7e6, roofline
    assert roofline["bandwidth_gbs"] > 1 and "measured" in roofline["note"], roofline
    readable = not isinstance(package_zones(), str)
    for row in e2e_sweep.rows_of(label):
        bound, pct = to_float(row["roofline_decode_tok_s"]), to_float(row["roofline_pct"])
        assert bound and float(row["output_tok_s"]) < bound, row
        assert pct is not None and 0 < pct < 100, row
        if readable:  # RAPL here: package energy over the window
            assert to_float(row["energy_j"]) and to_float(row["joules_per_output_token"]) > 0
        else:  # never 0 for unknown: empty, and the reason
            assert row["energy_j"] == "" and row["joules_per_output_token"] == ""
            assert row["energy_note"].startswith("no energy:") and "RAPL" in row["energy_note"]
