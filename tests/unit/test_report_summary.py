"""The report a user reads first: the summary table per configuration, and the quality
table's "vs" cell; whole request counts where a recorded run interpolates."""

from __future__ import annotations

import csv
import html
import shutil

import pytest

from tests.conftest import FIXTURES
from tunebench.report.formats import readable
from tunebench.report.html import report_context, write_report
from tunebench.testing import make_demo_like_run, make_synthetic_run
from tunebench.testing.runs import DEMO_SHAPE


def by_config(context: dict) -> dict[str, dict]:
    return {row["config"].split()[0]: row for row in context["overview"]}


def edit_points(store, change) -> None:
    """Rewrite points.csv with `change(row)` applied to every row (a test's own damage)."""
    with open(store.layout.points, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        change(row)
    with open(store.layout.points, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_summary_names_capacity_best_point_and_the_best_configuration(tmp_path):
    store = make_demo_like_run(tmp_path)
    context = report_context(store.path)
    rows = by_config(context)
    # both held the SLO at 4 req/s, the only rate probed: a lower bound, not a capacity
    for config_id in ("c1", "c2"):
        assert rows[config_id]["capacity"].startswith(">= 4 req/s (not reached); ")
    # c1 missed the SLO at 8 streams (TTFT p95 618 ms > 500): its best point is 4 streams
    assert DEMO_SHAPE["max-num-seqs=2"]["concurrent-8"][1] > 500
    assert rows["c1"]["point"].startswith("concurrent-4: ")
    assert rows["c2"]["point"].startswith("concurrent-8: ")
    assert "541 out tok/s" in rows["c2"]["point"]  # the shape's output tok/s
    assert rows["c2"]["best"] and rows["c2"]["tied"] and rows["c1"]["tied"]
    assert rows["c1"]["untrusted"] == rows["c2"]["untrusted"] == "none"
    page = write_report(store.path).read_text()
    # the summary comes first, before the headline and the points
    assert page.index('<h2 id="summary">') < page.index('<h2 id="best">')
    assert page.index('<h2 id="best">') < page.index("<h2>Points</h2>")
    assert html.escape(">= 4 req/s (not reached)") in page


def test_summary_lists_points_not_to_trust(tmp_path):
    store = make_demo_like_run(tmp_path)

    def damage(row):
        if (row["config_id"], row["point_id"]) == ("c1", "concurrent-8"):
            row["valid"], row["invalid_reason"] = "False", "args not in effect: max-num-seqs"
        if (row["config_id"], row["point_id"]) == ("c2", "concurrent-4"):
            row["client_limited"], row["client_limited_reason"] = "True", "root_late"

    edit_points(store, damage)
    rows = by_config(report_context(store.path))
    assert rows["c1"]["untrusted"] == "invalid: concurrent-8"
    assert rows["c2"]["untrusted"] == "client-limited: concurrent-4"


def test_summary_says_why_there_is_no_capacity(tmp_path):
    # no SLO at all
    plain = make_synthetic_run(tmp_path / "plain", configs=1)
    assert by_config(report_context(plain.path))["c1"]["capacity"] == "no SLO set"
    # an SLO, but only concurrent points
    shape = {
        label: {k: v for k, v in points.items() if k.startswith("concurrent")}
        for label, points in DEMO_SHAPE.items()
    }
    streams = make_demo_like_run(tmp_path / "streams", shape=shape)
    rows = by_config(report_context(streams.path))
    assert rows["c1"]["capacity"] == "not probed: no fixed-rate or capacity point"
    # a capacity search that found no rate meeting the SLO
    streams.update_config("c2", capacity={"rate": None, "probes": 3, "probe_rates": [1, 0.5]})
    rows = by_config(report_context(streams.path))
    assert rows["c2"]["capacity"] == "not reached: no rate tried met the SLO"


def test_quality_verdict_in_the_summary_and_no_nan_for_the_reference(tmp_path):
    store = make_demo_like_run(tmp_path, quality={"prompts": "default"})
    (store.path / "quality").mkdir()
    # recorded answers: c5 of quality-cpu, the planted repetition penalty, fails the gate
    shutil.copy(FIXTURES / "quality-cpu" / "c1.jsonl", store.path / "quality" / "c1.jsonl")
    shutil.copy(FIXTURES / "quality-cpu" / "c5.jsonl", store.path / "quality" / "c2.jsonl")
    context = report_context(store.path)
    rows = by_config(context)
    assert (rows["c1"]["quality"], rows["c2"]["quality"]) == ("reference", "fail")
    assert [q["vs"] for q in context["quality"]] == ["(reference)", "c1"]
    # a configuration that answers wrong is never best, and the headline says why
    assert context["best"]["config_id"] == "c1"
    assert "not considered, quality gate: c2" in context["best_text"]
    page = write_report(store.path).read_text()
    assert ">nan<" not in page.lower()


def test_console_quality_table_has_no_nan(tmp_path):
    from tests.conftest import invoke

    store = make_demo_like_run(tmp_path, quality={"prompts": "default"})
    (store.path / "quality").mkdir()
    shutil.copy(FIXTURES / "quality-cpu" / "c1.jsonl", store.path / "quality" / "c1.jsonl")
    shutil.copy(FIXTURES / "quality-cpu" / "c2.jsonl", store.path / "quality" / "c2.jsonl")
    shown = invoke("show", store.path.name, "--root", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    # the quality table names configurations by show's short labels (c1 mns=2)
    line = next(x for x in shown.stdout.splitlines() if "(reference)" in x and "│" in x)
    assert "c1 mns=2" in line
    assert "(reference)" in line and "nan" not in shown.stdout.lower()


def test_a_recorded_run_stores_whole_request_counts():
    from tunebench.recorded.model import RecordedConfig

    recorded = RecordedConfig(
        "c1",
        "c1",
        {},
        "complete",
        None,
        {},
        rows=[
            {"load_kind": "poisson", "target": "1", "requests_ok": "10", "requests_failed": "0",
             "achieved_rps": "1.0", "ttft_p50_ms": "50"},
            {"load_kind": "poisson", "target": "4", "requests_ok": "40", "requests_failed": "1",
             "achieved_rps": "4.0", "ttft_p50_ms": "80"},
        ],
    )  # fmt: skip
    # a third of the way from 10 to 40 requests is 20 whole requests; 1/3 of a failure is 0
    row = recorded.point_at("poisson", 2.0)
    assert (row["requests_ok"], row["requests_failed"]) == (20, 0)
    assert all(isinstance(row[c], int) for c in ("requests_ok", "requests_failed"))
    # 2.5 req/s: 25 requests, half a failure rounds to a whole number too
    row = recorded.point_at("poisson", 2.5)
    assert row["requests_ok"] == 25 and row["requests_failed"] in (0, 1)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1359.4, "1359"),
        (1000.0, "1000"),
        (999.6, "1000"),
        (2.874, "2.87"),
        (48.04, "48"),
        (None, "-"),
    ],
)
def test_a_summary_figure_never_reads_as_an_exponent_from_a_thousand_up(value, shown):
    # three significant digits below 1000, a whole number from there on
    assert readable(value) == shown


def stored_rate(store, config_id: str, point_id: str) -> str:
    with open(store.layout.points, newline="") as handle:
        for row in csv.DictReader(handle):
            if (row["config_id"], row["point_id"]) == (config_id, point_id):
                return readable(float(row["achieved_rps"]))
    raise KeyError((config_id, point_id))


def test_a_capacity_from_fixed_rates_names_the_concurrent_point_that_held_more(tmp_path):
    # c1 misses at 4 req/s, the only fixed rate; its concurrent-4 point held the SLO
    shape = {label: dict(points) for label, points in DEMO_SHAPE.items()}
    shape["max-num-seqs=2"]["poisson-4"] = (300.0, 700.0, 128.0)
    store = make_demo_like_run(tmp_path, shape=shape)
    context = report_context(store.path)
    rows = by_config(context)
    c1 = stored_rate(store, "c1", "concurrent-4")
    assert rows["c1"]["capacity"] == (
        "not reached: missed at 4 req/s, the lowest rate tested; counts fixed-rate points "
        f"only: concurrent-4 held {c1} req/s within the SLO, a rate the server set (its "
        "streams wait for answers), not one it was offered"
    )
    c2 = stored_rate(store, "c2", "concurrent-8")
    assert rows["c2"]["capacity"].startswith(
        f">= 4 req/s (not reached); counts fixed-rate points only: concurrent-8 held {c2} req/s"
    )
    # the best is ranked by that capacity, its best point by goodput: the page says why the
    # two name different rates
    assert context["best"]["rule"] == "slo-capacity" and rows["c2"]["best"]
    assert rows["c2"]["point"].startswith(f"concurrent-8: {c2} req/s")
    page = " ".join(write_report(store.path).read_text().split())
    assert "the highest fixed request rate that held it, rule slo-capacity" in page
    assert "so the two can name different rates" in page
