"""A "best" that says what it rests on: ties, the figure that decides them, lower bounds.

Expected values are read off the stored points (points.csv) or set by the test's own shape,
never computed by the code under test.
"""

from __future__ import annotations

import csv
import html
import json

import pytest

from tests.conftest import invoke
from tunebench.analysis.best import best_config, compact, headline
from tunebench.report.text import describe_capacity, describe_trial_value
from tunebench.testing import make_demo_like_run, make_synthetic_run
from tunebench.testing.runs import DEMO_SHAPE


def stored(store, config_id: str, point_id: str, column: str) -> float:
    with open(store.layout.points, newline="") as handle:
        for row in csv.DictReader(handle):
            if (row["config_id"], row["point_id"]) == (config_id, point_id):
                return float(row[column])
    raise KeyError((config_id, point_id))


def test_the_demo_tie_is_named_with_the_figure_that_decides_it(tmp_path):
    """Issue 33's demo: both configurations met the SLO at 4 req/s, the only rate probed;
    at 8 streams max-num-seqs=8 has a far lower TTFT p95."""
    store = make_demo_like_run(tmp_path)
    ratio = stored(store, "c1", "concurrent-8", "ttft_p95_ms") / stored(
        store, "c2", "concurrent-8", "ttft_p95_ms"
    )
    assert f"{ratio:.2g}" == "5.4"  # the shape: 618 ms against 114 ms
    best = best_config(store.path)
    assert best["config_id"] == "c2" and best["label"] == "max-num-seqs=8"
    assert best["value"] == 4.0 and best["lower_bound"]
    assert best["tie"]["configs"] == ["c1", "c2"]
    assert headline(best).startswith(
        "tie at >= 4 req/s, the highest rate tested, between c1 max-num-seqs=2 and "
        "c2 max-num-seqs=8; at 8 streams max-num-seqs=8 has 5.4x lower TTFT p95: probe "
        "higher rates or add a capacity profile to decide. Named best by that figure: "
        "c2 max-num-seqs=8, capacity at the SLO >= 4 req/s (not reached)"
    )
    # the pipeline result carries the same facts
    data = json.loads(compact(best))
    assert data["config_id"] == "c2" and data["tie"]["decider"].startswith("at 8 streams")


def test_a_configuration_that_missed_where_the_other_held_is_no_tie(tmp_path):
    shape = {
        "max-num-seqs=2": {**DEMO_SHAPE["max-num-seqs=2"], "poisson-4": (300.0, 650.0, 120.0)},
        "max-num-seqs=8": DEMO_SHAPE["max-num-seqs=8"],
    }
    store = make_demo_like_run(tmp_path, shape=shape)
    assert stored(store, "c1", "poisson-4", "ttft_p95_ms") > 500  # c1 missed the SLO
    best = best_config(store.path)
    assert best["config_id"] == "c2" and "tie" not in best
    assert headline(best) == (
        "c2 max-num-seqs=8: capacity at the SLO >= 4 req/s (not reached): the SLO held at the "
        "highest rate tested (rule slo-capacity)"
    )


def rate_shape(*p95s: tuple[float, ...]) -> dict:
    """Poisson points at 2, 4 and 6 req/s with these TTFT p95s, one tuple per
    configuration (labels max-num-seqs=4, 16, 32)."""
    labels = ["max-num-seqs=4", "max-num-seqs=16", "max-num-seqs=32"]
    return {
        label: {
            f"poisson-{rate}": (p95 / 2, p95, 32.0 * rate) for rate, p95 in zip((2, 4, 6), values)
        }
        for label, values in zip(labels, p95s)
    }


def test_capacities_inside_one_measured_bracket_are_a_tie(tmp_path):
    # both held 4 req/s and missed 6 (SLO 500 ms): their interpolated capacities differ,
    # but no rate measured lies between them
    store = make_demo_like_run(tmp_path, shape=rate_shape((100, 300, 700), (100, 450, 600)))
    best = best_config(store.path)
    assert best["tie"]["configs"] == ["c1", "c2"]
    assert best["tie"]["on"].startswith(
        "tie on capacity between c1 max-num-seqs=4 and c2 max-num-seqs=16 ("
    )
    assert "each held 4 req/s and no rate measured separates them" in best["tie"]["on"]
    assert best["tie"]["hint"] == (
        "probe rates inside the bracket or add a capacity profile to decide"
    )
    assert "lower_bound" not in best
    # the figure that separates them: 300 against 450 ms at 4 req/s is c1's
    assert best["config_id"] == "c1"
    assert best["tie"]["decider"].startswith("at 4 req/s max-num-seqs=4 has ")


def test_capacities_in_different_brackets_are_no_tie(tmp_path):
    # c1 held 4 req/s; c2 missed at 4 already: c1 is better, whatever the interpolation
    store = make_demo_like_run(tmp_path, shape=rate_shape((100, 300, 700), (300, 600, 900)))
    best = best_config(store.path)
    assert best["config_id"] == "c1" and "tie" not in best


def test_a_capacity_search_that_never_missed_is_a_lower_bound(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2)
    store.update_config(
        "c1",
        capacity={"rate": 4.5, "probes": 12, "upper": None, "converged": False, "capped": False},
    )
    store.update_config("c2", capacity={"rate": 2.0, "probes": 5, "upper": 2.1, "converged": True})
    best = best_config(store.path)
    assert best["config_id"] == "c1" and best["converged"] is False and "tie" not in best
    assert ">= 4.5 req/s (not reached)" in headline(best)
    assert "search not converged" in headline(best)
    assert describe_capacity(store.manifest.configs[0].capacity).startswith(
        "capacity: >= 4.5 req/s (not reached) at SLO"
    )


def test_two_searches_capped_at_max_rate_tie(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2)
    for config_id in ("c1", "c2"):
        store.update_config(
            config_id,
            capacity={"rate": 8.0, "probes": 4, "upper": None, "converged": False, "capped": True},
        )
    best = best_config(store.path)
    assert best["tie"]["configs"] == ["c1", "c2"]
    assert best["tie"]["hint"] == "raise the search's max_rate to decide"
    assert best["tie"]["on"].startswith("tie at >= 8 req/s (the SLO held at the search's max_rate)")
    assert describe_capacity(store.manifest.configs[0].capacity) == (
        "capacity: >= 8 req/s (not reached) at SLO: the SLO held at the search's max_rate, 4 probes"
    )


def test_a_tune_best_from_an_unconverged_search_says_so(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2)
    best_trial = {
        "trial": 3,
        "config_id": "c2",
        "values": [4.5],
        "args": {"max-num-seqs": 4},
        "capacity": {"rate": 4.5, "converged": False, "capped": False, "upper": None},
    }
    (store.path / "tune-result.json").write_text(
        json.dumps(
            {"objective": "capacity", "objective_names": ["capacity_rps"], "best": best_trial}
        )
    )
    best = best_config(store.path)
    assert best["lower_bound"] and best["converged"] is False
    assert "capacity at the SLO >= 4.5 req/s (not reached)" in headline(best)
    text = describe_trial_value(["capacity_rps"], best_trial)
    assert text.startswith("capacity_rps >= 4.5 req/s (not reached)")
    assert text.endswith("search not converged: raise max_probes")


def test_results_show_and_the_report_print_the_same_best(tmp_path):
    from tunebench.report.html import write_report

    store = make_demo_like_run(tmp_path)
    expected = headline(best_config(store.path))
    results = invoke("results", store.path.name, "--root", str(tmp_path))
    assert results.returncode == 0, results.stderr
    assert f"best: {expected}\n" in results.stdout
    shown = invoke("show", store.path.name, "--root", str(tmp_path), env={"COLUMNS": "2000"})
    assert shown.returncode == 0, shown.stderr
    assert f"best: {expected}\n" in shown.stdout
    page = write_report(store.path).read_text()
    assert html.escape(expected) in page
    # the headline comes before the points table
    assert page.index(html.escape(expected)) < page.index("<h2>Points</h2>")


@pytest.mark.parametrize("capped", [True, False])
def test_describe_capacity_bracketed_or_bounded(capped):
    summary = {
        "rate": 4.0,
        "probes": 5,
        "probe_rates": [1, 2, 4, 8, 6],
        "upper": None if capped else 6.0,
        "converged": not capped,
        "capped": capped,
    }
    text = describe_capacity(summary)
    if capped:
        assert text.startswith("capacity: >= 4 req/s (not reached) at SLO")
    else:
        assert text == "capacity: 4 req/s at SLO (missed at 6), 5 probes"
