"""Session SLOs (`slo: {session_e2e_s: {...}, turn_ttft_ms: {...}}`): values by hand from
per-request samples and from a stored row, the worst turn named, a point without sessions
failed closed (never passed, no goodput), and bad sweep files as one line."""

from __future__ import annotations

import pytest

from tests.conftest import spec_file
from tests.unit.test_spec_errors import assert_one_line_error, run_in_process
from tunebench.points.capacity import CapacitySearch
from tunebench.points.row import PointId, build_row
from tunebench.points.slo import evaluate, highest_quantile, thresholds_of


def _turn(session: str, turn: int, start: float, seconds: float, ttft: float) -> dict:
    return {
        "session": session,
        "turn": turn,
        "start_time": start,
        "end_time": start + seconds,
        "ttft_ms": ttft,
        "e2e_s": seconds,
    }


def _sessions() -> list[dict]:
    """3 sessions of 2 turns: a lasts 100-104 s (4 s), b 100-106 (6 s), c only started."""
    return [
        _turn("a", 1, 100.0, 1.0, 10.0),
        _turn("a", 2, 102.0, 2.0, 30.0),
        _turn("b", 1, 100.0, 1.0, 20.0),
        _turn("b", 2, 104.0, 2.0, 50.0),
        _turn("c", 1, 105.0, 1.0, 40.0),
    ]


ROW = {"session_turns": 2, "requests_ok": 5, "requests_failed": 0, "achieved_rps": 1.0}


def test_session_e2e_by_hand():
    # complete sessions: a 4 s, b 6 s -> p50 5 s, p95 4 + 0.95 x 2 = 5.9 s; c is cut
    met = evaluate(ROW, _sessions(), {"session_e2e_s": {"p50": 5.5}})
    assert met["slo_met"] is True and met["slo_ratio"] == pytest.approx(5 / 5.5)
    missed = evaluate(ROW, _sessions(), {"session_e2e_s": {"p95": 5.0}})
    assert missed["slo_met"] is False
    assert missed["slo_violations"] == "session_e2e_s p95 <= 5: 5.9"
    assert missed["slo_ratio"] == pytest.approx(5.9 / 5.0)


def test_turn_ttft_names_the_worst_turn():
    # turn 1: TTFTs 10, 20, 40 -> p50 20; turn 2: 30, 50 -> p50 40 (the worst)
    out = evaluate(ROW, _sessions(), {"turn_ttft_ms": {"p50": 35}})
    assert out["slo_met"] is False
    assert out["slo_violations"] == "turn_ttft_ms p50 <= 35: 40 (turn 2)"
    assert out["slo_ratio"] == pytest.approx(40 / 35)
    assert evaluate(ROW, _sessions(), {"turn_ttft_ms": {"p50": 45}})["slo_met"] is True


def test_goodput_counts_requests_turn_limits_on_each_session_limits_on_none():
    # turn_ttft_ms 45 holds each request's TTFT; session_e2e_s judges sessions, not requests
    out = evaluate(ROW, _sessions(), {"turn_ttft_ms": {"p50": 45}, "session_e2e_s": {"p50": 9}})
    assert out["goodput_fraction"] == pytest.approx(4 / 5)  # 10, 30, 20, 40 of 50 ms
    assert out["goodput_rps"] == pytest.approx(0.8)


@pytest.mark.parametrize("key", ["session_e2e_s", "turn_ttft_ms"])
def test_a_point_without_sessions_fails_closed(key):
    plain = [{"ttft_ms": 5.0, "e2e_s": 0.1, "start_time": 1.0, "end_time": 1.1}] * 20
    row = {"requests_ok": 20, "requests_failed": 0, "achieved_rps": 2.0, "ttft_p95_ms": 5.0}
    out = evaluate(row, plain, {key: {"p95": 1e9}})
    assert out["slo_met"] is False
    assert out["slo_violations"] == f"{key} p95 <= 1e+09: not checked: no sessions in this point"
    assert out["slo_ratio"] is None  # nothing measured: no margin to interpolate on
    assert out["goodput_rps"] is None and out["goodput_fraction"] is None
    # beside a request limit that passes: still missed, the passing limit's ratio kept
    both = evaluate(row, plain, {"ttft_ms": {"p95": 10}, key: {"p50": 1e9}})
    assert both["slo_met"] is False and both["slo_ratio"] == pytest.approx(0.5)


def test_sessions_that_never_finish_are_not_measured():
    started = [s for s in _sessions() if s["turn"] == 1]
    out = evaluate(ROW, started, {"session_e2e_s": {"p50": 100}})
    assert out["slo_met"] is False
    assert out["slo_violations"] == (
        "session_e2e_s p50 <= 100: not measured: no session ran all 2 turns in the window "
        "(3 sessions started)"
    )


def test_a_stored_row_is_judged_by_its_session_columns():
    """Recorded runs (the recorded deployment, tune/recorded.py) judge rows again without
    their samples."""
    row = {
        **ROW,
        "session_e2e_p50_s": 5.0,
        "session_e2e_p95_s": 5.9,
        "turn1_ttft_p95_ms": 39.0,
        "turn2_ttft_p95_ms": 49.0,
    }
    out = evaluate(row, [], {"session_e2e_s": {"p95": 6}, "turn_ttft_ms": {"p95": 45}})
    assert out["slo_violations"] == "turn_ttft_ms p95 <= 45: 49 (turn 2)"
    # no stored column for p90: not measured, never passed
    p90 = evaluate(row, [], {"session_e2e_s": {"p90": 60}})
    assert p90["slo_met"] is False and "not measured" in p90["slo_violations"]
    no_sessions = {"requests_ok": 5, "requests_failed": 0}
    assert (
        "no sessions in this point"
        in (evaluate(no_sessions, [], {"session_e2e_s": {"p50": 60}})["slo_violations"])
    )


def test_session_limits_do_not_size_request_windows():
    slo = {"ttft_ms": {"p90": 100}, "session_e2e_s": {"p99": 10}, "turn_ttft_ms": {"p99": 5}}
    assert highest_quantile(slo) == 0.9
    assert highest_quantile({"session_e2e_s": {"p99": 10}}) is None
    assert [t.label for t in thresholds_of(slo)][1:] == [
        "session_e2e_s p99 <= 10",
        "turn_ttft_ms p99 <= 5",
    ]


def test_the_verdict_reaches_the_row_and_a_capacity_search():
    samples = _sessions()
    client = {"target": 1.0, **ROW}
    row = build_row(
        PointId("r", "c1", "base", "poisson-1", "poisson"),
        {},
        client,
        samples,
        {"server_samples": 3},
        slo_spec={"session_e2e_s": {"p95": 5.0}},
    ).csv_cells()
    assert row["slo_met"] is False and row["slo_violations"] == "session_e2e_s p95 <= 5: 5.9"
    search = CapacitySearch(start_rate=1.0)
    search.tell(1.0, row["slo_met"], False, row["slo_ratio"])
    assert search.next_rate() < 1.0  # missed: the search goes lower


# -- the sweep file -----------------------------------------------------------------------

SPEC = """
name: s
model: builtin:tiny-llama-random
deployment: {kind: local}
server:
  args: {max-model-len: 512}
load:
  data: {kind: sessions, turns: 4, think_time_s: 0.5, prompt_tokens: 48, output_tokens: 24}
  profiles:
    - {kind: concurrent, streams: 2, max_seconds: 20}
slo: {session_e2e_s: {p95: 10}, turn_ttft_ms: {p95: 500}}
"""


def test_a_session_slo_plans(tmp_path, capsys):
    result = run_in_process(capsys, "sweep", str(spec_file(tmp_path, SPEC)), "--dry-run")
    assert result.returncode == 0, result.stderr


def test_a_session_slo_can_drive_a_capacity_search(tmp_path, capsys):
    path = spec_file(
        tmp_path,
        SPEC,
        "{kind: concurrent, streams: 2, max_seconds: 20}",
        "{kind: capacity, max_seconds: 30}",
    )
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        (
            "session_e2e_s: {p95: 10}",
            "session_e2e_ms: {p95: 10000}",
            "slo.session_e2e_ms: unknown key; allowed here: ttft_ms, itl_ms, tpot_ms, e2e_s, "
            "session_e2e_s, turn_ttft_ms, max_error_rate",
        ),
        (
            "turn_ttft_ms: {p95: 500}",
            "turn_ttft_ms: {p96: 500}",
            "slo.turn_ttft_ms.p96: 'p96' is not allowed as a key here",
        ),
        ("session_e2e_s: {p95: 10}", "session_e2e_s: {p95: 0}", "slo.session_e2e_s.p95: "),
        (
            "data: {kind: sessions, turns: 4, think_time_s: 0.5, prompt_tokens: 48, "
            "output_tokens: 24}",
            "data: {kind: synthetic, prompt_tokens: 48, output_tokens: 24}",
            "slo.session_e2e_s: load.data kind synthetic has no sessions; use load.data kind "
            "sessions or drop the key",
        ),
    ],
)
def test_a_bad_session_slo_is_one_line_naming_the_key(tmp_path, capsys, old, new, fragment):
    path = spec_file(tmp_path, SPEC, old, new)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))
