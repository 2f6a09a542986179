"""A capacity search over replay speed (`kind: capacity, arrival: replay`): the sweep file,
the plan, the probes (replays of the whole slice at a chosen speed) and the search's answer
against a server whose limit is known, and bad input as one line naming the key and the fix."""

from __future__ import annotations

import pytest

from tests.unit.test_spec_errors import assert_one_line_error, run_in_process
from tests.unit.test_trace import trace_spec
from tunebench.runner.probing import CapacityProbing

SEARCH = "- {kind: capacity, arrival: replay, start_rate: 1, max_rate: 16, tolerance: 0.05}"
SLO = "slo: {ttft_ms: {p95: 500}}\n"


def _search_spec(tmp_path, profile: str = SEARCH, slo: str = SLO):
    path = trace_spec(tmp_path, "- {kind: replay, speed: [1, 2]}", profile)
    path.write_text(path.read_text() + slo)
    return path


def _plan(path):
    from tunebench import assemble
    from tunebench.spec.loading import load_spec

    return assemble.plan(load_spec(path), path)


def test_the_search_is_one_point_that_carries_its_trace(tmp_path):
    (point,) = _plan(_search_spec(tmp_path)).points
    assert (point.point_id, point.kind, point.target) == ("capacity", "capacity", None)
    assert point.search.arrival == "replay" and point.search.start_rate == 1.0
    assert point.trace is not None and point.trace.requests == 2
    assert point.max_seconds is None  # a probe plays the whole slice


def test_a_probe_replays_the_slice_at_the_speed_chosen(tmp_path):
    (point,) = _plan(_search_spec(tmp_path)).points
    probe = point.probe(3, 2.5)
    assert (probe.point_id, probe.kind, probe.target) == ("capacity-3", "replay", 2.5)
    assert probe.trace == point.trace and probe.search is None
    assert probe.max_seconds is None and probe.max_requests is None and probe.warmup is None


def test_a_probe_is_cut_at_max_seconds_when_the_profile_sets_it(tmp_path):
    path = _search_spec(
        tmp_path, SEARCH.replace("arrival: replay", "arrival: replay, max_seconds: 7")
    )
    (point,) = _plan(path).points
    probing = CapacityProbing(point, None, {"ttft_ms": {"p95": 500}})
    (probe,) = probing.next_points()
    # not lengthened for the percentile as a poisson probe would be (p95: 72 requests)
    assert probe.kind == "replay" and probe.max_seconds == 7.0


def _row(speed: float, limit: float) -> dict:
    """A server that meets the SLO up to `limit` x the trace's pace: TTFT p95 grows like
    queueing delay, 1 / (1 - load), and is exactly the limit at `limit`."""
    load = speed / (limit * 2)  # half utilised at the limit
    ratio = (1 / (1 - load)) / 2 if load < 1 else 10.0  # 1 at speed == limit
    return {"slo_met": ratio <= 1, "slo_ratio": ratio, "valid": True}


@pytest.mark.parametrize("limit", [0.7, 3.0, 9.5])
def test_the_search_finds_the_highest_speed_that_meets_the_slo(tmp_path, limit):
    path = _search_spec(tmp_path, SEARCH.replace("tolerance: 0.05", "tolerance: 0.05, noise: 0"))
    (point,) = _plan(path).points
    probing = CapacityProbing(point, None, {"ttft_ms": {"p95": 500}})
    speeds = []
    while probes := probing.next_points():
        (probe,) = probes
        assert probe.kind == "replay" and probe.trace == point.trace
        speeds.append(probe.target)
        probing.observe(probe.point_id, _row(probe.target, limit))
    summary = probing.summary()
    assert summary["arrival"] == "replay" and summary["converged"], (speeds, summary)
    assert summary["sample_margin"] is None  # the slice is the window
    # the speed where the measured ratio reaches 1 is `limit`; within the tolerance
    assert summary["rate"] == pytest.approx(limit, rel=0.05), speeds
    assert summary["upper"] > summary["rate"]


def test_a_late_replay_is_no_capacity(tmp_path):
    """A probe the client sent late (client-limited) proves nothing when it passed: the
    answer is then 'at least' the speed below it."""
    path = _search_spec(tmp_path, SEARCH.replace("tolerance: 0.05", "tolerance: 0.05, noise: 0"))
    (point,) = _plan(path).points
    probing = CapacityProbing(point, None, {"ttft_ms": {"p95": 500}})
    while probes := probing.next_points():
        (probe,) = probes
        row = _row(probe.target, limit=100.0)  # the server would carry far more
        if probe.target >= 4:
            row["client_limited"] = True  # replayed late: the client's limit, not the server's
        probing.observe(probe.point_id, row)
    summary = probing.summary()
    assert summary["client_bound"] and summary["rate"] < 4


@pytest.mark.parametrize(
    "profile, slo, fragment",
    [
        (
            SEARCH.replace("start_rate: 1", "start_rate: 1, sample_margin: 4"),
            SLO,
            "sample_margin sizes poisson/constant probes; a replay probe plays its whole slice",
        ),
        (
            SEARCH.replace("start_rate: 1", "start_rate: 1, speed: 2"),
            SLO,
            "kind capacity chooses its own speeds; use start_rate and max_rate",
        ),
        (
            SEARCH.replace("start_rate: 1", "start_rate: 1, warmup: 2"),
            SLO,
            "max_requests, warmup and cooldown do not apply",
        ),
        (
            "- {kind: capacity, arrival: poisson, max_seconds: 5}",
            SLO,
            "load.data kind trace is played by kind replay profiles; use {kind: replay, "
            "speed: 1} (or {kind: capacity, arrival: replay})",
        ),
        (SEARCH, "", "kind capacity needs an slo section"),
    ],
)
def test_bad_search_over_speed_is_one_line_naming_the_key(tmp_path, capsys, profile, slo, fragment):
    path = _search_spec(tmp_path, profile, slo)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))


def test_a_search_over_speed_needs_a_trace(tmp_path, capsys):
    path = _search_spec(tmp_path)
    text = path.read_text().replace(
        "{kind: trace, path: a.csv, requests: 2}",
        "{kind: synthetic, prompt_tokens: 8, output_tokens: 8}",
    )
    path.write_text(text)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(
        result, path, ("kind capacity with arrival replay plays a trace: set load.data",)
    )


def test_the_dry_run_estimates_the_search_at_its_start_speed(tmp_path, capsys):
    result = run_in_process(capsys, "sweep", str(_search_spec(tmp_path)), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "capacity" in result.stdout
