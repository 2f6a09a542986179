"""SLO evaluation, goodput, and the client-bottleneck rule."""

from __future__ import annotations

import pytest

from tests.unit.test_spec_errors import GOOD
from tunebench.points.client_limit import verdict
from tunebench.points.slo import evaluate, thresholds_of

SLO = {"ttft_ms": {"p95": 500}, "itl_ms": {"p50": 20}, "max_error_rate": 0.05}


def _samples(ttfts, itl=10.0):
    return [{"ttft_ms": t, "itl_ms": itl, "e2e_s": 0.5} for t in ttfts]


def test_thresholds():
    assert [t.label for t in thresholds_of(SLO)] == ["ttft_ms p95 <= 500", "itl_ms p50 <= 20"]
    assert thresholds_of(None) == []


def test_slo_met_and_goodput():
    row = {
        "ttft_p95_ms": 450.0,
        "itl_p50_ms": 12.0,
        "requests_ok": 100,
        "requests_failed": 2,
        "duration_s": 10.0,
        "achieved_rps": 10.0,
    }
    samples = _samples([100] * 90 + [600] * 10)
    out = evaluate(row, samples, SLO)
    assert out["slo_met"] is True and out["slo_violations"] == ""
    assert out["goodput_rps"] == pytest.approx(9.0)  # 90% of the 10 req/s met every threshold
    assert out["goodput_fraction"] == pytest.approx(0.9)
    assert out["slo_ratio"] == pytest.approx(0.9)  # max(450/500, 12/20)


def test_slo_violations_are_named():
    row = {
        "ttft_p95_ms": 800.0,
        "itl_p50_ms": 25.0,
        "requests_ok": 90,
        "requests_failed": 10,
        "duration_s": 10.0,
    }
    out = evaluate(row, _samples([800] * 5, itl=25.0), SLO)
    assert out["slo_met"] is False
    assert out["slo_violations"] == (
        "ttft_ms p95 <= 500: 800; itl_ms p50 <= 20: 25; error rate 0.1 > 0.05"
    )
    assert out["goodput_rps"] == 0
    assert out["slo_ratio"] == pytest.approx(1.6)  # 800/500 is the worst


def test_percentile_from_samples_when_the_column_is_missing():
    row = {"requests_ok": 100, "requests_failed": 0, "duration_s": 10.0}
    assert evaluate(row, _samples([1] * 50), {"ttft_ms": {"p90": 95}})["goodput_rps"] == 5.0
    out = evaluate(row, _samples(list(range(1, 101))), {"ttft_ms": {"p90": 95}})
    assert out["slo_met"] is True
    assert (
        evaluate(row, _samples(list(range(1, 101))), {"ttft_ms": {"p99": 95}})["slo_met"] is False
    )


def test_no_slo_gives_empty_columns():
    assert set(evaluate({}, [], None).values()) == {None}


@pytest.mark.parametrize(
    "row,limited,reason",
    [
        (
            {"load_kind": "concurrent", "target": 8, "achieved_concurrency": 3.2},
            True,
            "achieved concurrency 3.20 of 8 streams",
        ),
        ({"load_kind": "concurrent", "target": 8, "achieved_concurrency": 7.6}, False, ""),
        (
            {"load_kind": "poisson", "target": 10, "achieved_rps": 6.0},
            True,
            "sent 6.00 of 10 req/s",
        ),
        # an overloaded server completes fewer than it was sent: not the client's fault
        (
            {
                "load_kind": "poisson",
                "target": 10,
                "achieved_rps": 6.0,
                "duration_s": 10,
                "requests_ok": 60,
                "requests_failed": 2,
                "requests_incomplete": 38,
            },
            False,
            "",
        ),
        (
            {
                "load_kind": "constant",
                "target": 10,
                "achieved_rps": 6.0,
                "duration_s": 10,
                "requests_ok": 60,
                "requests_failed": 0,
                "requests_incomplete": 5,
            },
            True,
            "sent 6.50 of 10 req/s",
        ),
        ({"load_kind": "poisson", "target": 4, "achieved_rps": 4.3}, False, ""),
        (
            {
                "load_kind": "concurrent",
                "target": 1,
                "achieved_concurrency": 0.93,
                "client_warnings": "generation_delay_ttft;root_late",
            },
            True,
            "GuideLLM warned: root_late",
        ),
        ({"load_kind": "synchronous", "target": "", "achieved_concurrency": 0.9}, False, ""),
        # over-drive: the recorded grid sent 1.07-1.47x its Poisson targets
        (
            {
                "load_kind": "poisson",
                "target": 2,
                "duration_s": 60,
                "requests_ok": 170,
                "requests_failed": 0,
                "requests_incomplete": 6,
            },
            True,
            "over-driven: sent 2.93 req/s for a target of 2",
        ),
        # 36 sent of 32 expected in 8 s: inside a Poisson process's own noise (3 sd)
        (
            {
                "load_kind": "poisson",
                "target": 4,
                "duration_s": 8,
                "requests_ok": 34,
                "requests_failed": 0,
                "requests_incomplete": 2,
            },
            False,
            "",
        ),
        # the same count at a constant rate is 12.5% over: no noise to excuse it
        (
            {
                "load_kind": "constant",
                "target": 4,
                "duration_s": 8,
                "requests_ok": 34,
                "requests_failed": 0,
                "requests_incomplete": 2,
            },
            True,
            "over-driven: sent 4.50 req/s for a target of 4",
        ),
        (
            {"load_kind": "concurrent", "target": 4, "achieved_concurrency": 4.9},
            True,
            "over-driven: concurrency 4.90 for 4 streams",
        ),
        # measured on 2 cores: the demo's client, sharing them with vLLM, waited 54-76% of
        # the time it had work; one pinned next to busy processes 91%, its concurrency
        # still reading 0.90 of 1
        (
            {
                "load_kind": "concurrent",
                "target": 1,
                "achieved_concurrency": 0.9,
                "client_busiest_pct": 11.1,
                "client_wait_pct": 88.6,
            },
            True,
            "client starved: the load generator's busiest thread waited for a CPU 89% of the "
            "time it had work",
        ),
        (
            {
                "load_kind": "concurrent",
                "target": 1,
                "achieved_concurrency": 0.9,
                "client_busiest_pct": 38.1,
                "client_wait_pct": 59.7,
            },
            False,
            "",
        ),
        (
            {"load_kind": "synchronous", "client_busiest_pct": 97.0, "client_wait_pct": 2.0},
            True,
            "client saturated: its busiest thread used 97% of a core",
        ),
        # a file dataset of 30 rows at 4 streams for 10 s: every row sent in 1 s, the rest
        # of the window drained (its concurrency alone, 3.7, would have passed)
        (
            {
                "load_kind": "concurrent",
                "target": 4,
                "achieved_concurrency": 3.7,
                "requests_ok": 30,
                "requests_failed": 0,
                "requests_incomplete": 0,
                "client_warnings": "requests_exhausted",
            },
            True,
            "its dataset ran out after 30 requests: the load stopped before the point's end "
            "(give load.data more rows than the busiest point sends)",
        ),
        # a replayed trace ends when its slice does: that is its design, not a shortfall
        (
            {"load_kind": "replay", "target": 1, "client_warnings": "requests_exhausted"},
            False,
            "",
        ),
    ],
)
def test_client_limited(row, limited, reason):
    out = verdict(row)
    assert out["client_limited"] is limited and out["client_limited_reason"] == reason


def test_slo_spec_section(tmp_path, cli):
    spec = tmp_path / "slo.yaml"
    spec.write_text(
        GOOD + "slo: {ttft_ms: {p95: 500}, max_error_rate: 0.01}\nclient_tolerance: 0.2\n"
    )
    assert cli("sweep", str(spec), "--dry-run").returncode == 0
    spec.write_text(GOOD + "slo: {ttft_ms: {p97: 500}}\n")
    bad = cli("sweep", str(spec), "--dry-run")
    assert bad.returncode == 2 and "slo.ttft_ms.p97" in bad.stderr


def test_a_point_where_no_request_completed_misses_the_slo_and_says_why():
    row = {"requests_ok": 0, "requests_failed": 0, "requests_incomplete": 12, "duration_s": 5}
    result = evaluate(row, [], {"ttft_ms": {"p95": 1000}})
    assert result["slo_met"] is False and result["slo_ratio"] is None
    assert result["slo_violations"] == (
        "ttft_ms p95 <= 1000: not measured: no request completed "
        "in the window (0 failed, 12 still running at its end)"
    )


def test_an_slo_from_command_line_items():
    from tunebench.points.slo import slo_from_items

    assert slo_from_items(["ttft_ms.p90=30", "itl_ms.p50=5"]) == {
        "ttft_ms": {"p90": 30.0},
        "itl_ms": {"p50": 5.0},
    }
    with pytest.raises(ValueError, match="METRIC.PCT=LIMIT"):
        slo_from_items(["ttft.p90=30"])
