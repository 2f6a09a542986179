"""A replayed point's requests in `show` and the report: the lengths sent against the
trace's, and the arrivals, from the point's own per-request samples.

The run is built from the shipped trace cuts by the code a sweep fits them with
(tunebench/testing/replay_runs.py); the expected numbers are computed here from the trace
slice and from requests/<config>.csv with the csv module, not from the code under test."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from tests.conftest import invoke
from tunebench.analysis.figure_kit import figure_bytes
from tunebench.analysis.frames import load_run
from tunebench.analysis.replay_samples import length_histogram, replay_samples
from tunebench.analysis.trace_plots import draw_arrivals, draw_lengths, replay_figures
from tunebench.report.html import write_report
from tunebench.testing import make_demo_like_run
from tunebench.testing.plot_layout import layout_problems, page_images, read_layout
from tunebench.testing.replay_runs import AZURE, MOONCAKE, fitted_slice, make_replay_run

NARROW = {"COLUMNS": "100"}


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory):
    return make_replay_run(tmp_path_factory.mktemp("replay"))


def stored_requests(store, config_id: str, point_id: str) -> list[dict[str, float]]:
    with open(store.layout.requests(config_id), newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["point_id"] == point_id]
    return [{k: float(v) for k, v in r.items() if v not in ("", point_id)} for r in rows]


def p50_p95_max(values: list[int]) -> str:
    # numpy's default percentile: linear between the closest ranks
    p50, p95 = np.percentile(values, [50, 95])
    return f"{p50:.0f}/{p95:.0f}/{max(values):.0f}"


def table_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("│").split("│")]
        for line in text.splitlines()
        if line.startswith("│")
    ]


def point_samples(store, config_id: str, point_id: str):
    samples = replay_samples(store.path, load_run(store.path))
    mine = samples[(samples["config_id"] == config_id) & (samples["point_id"] == point_id)]
    assert not mine.empty
    return mine


def series(layout: dict, label: str, panel: int) -> dict:
    (found,) = [s for s in layout["series"] if s["label"] == label and s["axes"] == panel]
    return found


def test_show_sums_up_lengths_and_lag_of_each_replayed_point_in_100_columns(replay_run):
    result = invoke("show", str(replay_run.path), env=NARROW)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    replayed = result.stdout.split("trace replay: request lengths and arrivals", 1)[1]
    rows = table_rows(replayed)
    assert len(rows) == 2 * 2 * 3  # a sent and a trace line per point, 2 configs x 3 points
    points = {(r["config_id"], r["point_id"]): r for r in replay_run.rows}
    for sent, trace in zip(rows[::2], rows[1::2]):
        config, point = sent[0].split()[0], sent[1]
        assert (sent[2], trace[2]) == ("sent", "trace")
        fitted = fitted_slice(AZURE if "azure" in point else MOONCAKE)
        prompts = [r.prompt_tokens for r in fitted.requests]
        outputs = [r.output_tokens for r in fitted.requests]
        # every request was counted as asked: sent and trace lengths are the slice's
        for row in (sent, trace):
            assert row[3:5] == [p50_p95_max(prompts), p50_p95_max(outputs)], (point, row)
        stored = points[(config, point)]
        lag = f"{float(stored['arrival_lag_p50_ms']):.1f}/{float(stored['arrival_lag_p95_ms']):.1f}"
        assert sent[5:7] == [lag, "0.0%"]
        assert trace[5:7] == ["", ""]


def test_late_requests_show_as_their_share(tmp_path):
    store = make_replay_run(tmp_path, traces=(AZURE,), late_every=10)
    result = invoke("show", str(store.path), env=NARROW)
    rows = table_rows(result.stdout.split("trace replay", 1)[1])
    # 59 requests per point, every tenth 120 ms late: 5 of 59
    assert [r[6] for r in rows[::2]] == [f"{5 / 59:.1%}"] * 4
    samples = point_samples(store, "c1", "replay-azure-1")
    assert sorted(samples["lag_ms"].round(3))[-5:] == [120.0] * 5


def test_a_run_without_replay_shows_and_reports_as_before(tmp_path):
    store = make_demo_like_run(tmp_path)
    result = invoke("show", str(store.path), env=NARROW)
    assert "trace replay" not in result.stdout
    assert re.search(r"│ 4 streams +│", result.stdout) and "│ 4 req/s " in result.stdout
    page = write_report(store.path).read_text()
    assert 'id="replay"' not in page and "Request lengths" not in page


@pytest.mark.parametrize("what", ["prompt", "output"])
def test_length_histograms_count_every_request_and_draw_the_counts(replay_run, what):
    samples = point_samples(replay_run, "c1", "replay-mooncake-2")
    histogram = length_histogram(samples, what)
    for source in ("sent", "trace"):
        part = histogram[histogram["source"] == source]
        assert part["count"].sum() == len(samples) == 217
    # the bins are the same for both, and hold each request's own length
    requests = stored_requests(replay_run, "c1", "replay-mooncake-2")
    column = f"trace_{what}_tokens"
    for row in histogram[histogram["source"] == "trace"].itertuples():
        inside = sum(row.left <= r[column] < row.right for r in requests)
        assert row.count == inside
    layout = read_layout(figure_bytes(draw_lengths(samples, "lengths")))
    assert layout_problems(layout, "lengths") == []
    panel = 0 if what == "prompt" else 1
    assert layout["axes"][panel]["xlabel"] == f"{what} tokens per request"
    trace = histogram[histogram["source"] == "trace"]
    drawn = series(layout, "trace, as asked", panel)["data"]
    assert [y for _, y in drawn] == list(trace["count"])
    assert [x for x, _ in drawn] == list(trace["centre"].round(4))
    # a faithful replay: the server's counts are drawn on top, hollow, and equal
    sent = series(layout, "sent, as the server counted", panel)
    assert not sent["filled"] and sent["data"] == drawn


def test_arrival_figure_reads_clean_and_counts_every_request_once(replay_run):
    samples = point_samples(replay_run, "c2", "replay-azure-2")
    layout = read_layout(figure_bytes(draw_arrivals(samples, "arrivals")))
    assert layout_problems(layout, "arrivals") == []
    assert [a["ylabel"] for a in layout["axes"]] == ["requests/s", "lag (ms)"]
    (legend,) = layout["legends"]
    assert legend["box"][0] > max(a["box"][2] for a in layout["axes"])  # beside the data
    scheduled = series(layout, "scheduled (the trace at its speed)", 0)["data"]
    sent = series(layout, "sent", 0)["data"]
    width = scheduled[1][0] - scheduled[0][0]
    assert width == 1.0  # 15 s at 2x: one-second bins
    assert round(sum(y for _, y in scheduled) * width) == 59
    assert round(sum(y for _, y in sent) * width) == 59
    # the requests due in each second: the trace's own times at twice its pace
    times = [r.time / 2 for r in fitted_slice(AZURE).requests]
    for middle, rate in scheduled:
        due = sum(middle - width / 2 <= t - times[0] < middle + width / 2 for t in times)
        assert rate * width == due, middle
    # one marker per request: its lag, at its due time
    requests = sorted(
        stored_requests(replay_run, "c2", "replay-azure-2"), key=lambda r: r["scheduled_time"]
    )
    first = requests[0]["scheduled_time"]
    expected = [
        [
            round(r["scheduled_time"] - first, 4),
            round((r["start_time"] - r["scheduled_time"]) * 1e3, 4),
        ]
        for r in requests
    ]
    assert series(layout, "send lag per request", 1)["data"] == expected


def test_the_report_has_a_replay_section_whose_figures_read_clean(tmp_path):
    store = make_replay_run(tmp_path, traces=(AZURE,))
    page = write_report(store.path).read_text()
    section = page.split('<h2 id="replay">Trace replay</h2>', 1)[1].split("<h2>", 1)[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", section)
    per_row = 4 + 4 + 2  # config, point, speed, requests; 2 x 2 lengths; lag, late
    rows = [cells[i : i + per_row] for i in range(0, len(cells), per_row)]
    assert [r[1:4] for r in rows] == [
        ["replay-azure-1", "1x trace", "59"],
        ["replay-azure-2", "2x trace", "59"],
    ] * 2
    prompts = [r.prompt_tokens for r in fitted_slice(AZURE).requests]
    assert {r[4] for r in rows} == {r[5] for r in rows} == {p50_p95_max(prompts)}
    images = page_images(page)
    titles = [alt for alt, _ in images]
    assert sum(t.startswith("Request lengths: ") for t in titles) == 4
    assert sum(t.startswith("Arrivals: ") for t in titles) == 4
    assert "Arrivals: c1 enable-prefix-caching=true · replay-azure-2 (2x trace)" in titles
    for alt, png in images:
        assert layout_problems(read_layout(png), alt) == []


def test_the_report_draws_at_most_its_limit_and_names_the_rest(replay_run):
    figures, left_out = replay_figures(load_run(replay_run.path), replay_run.path, limit=1)
    assert [title.split(":")[0] for title, _ in figures] == ["Request lengths", "Arrivals"]
    assert len(left_out) == 5
    assert left_out[0] == "c1 enable-prefix-caching=true · replay-azure-2 (2x trace)"
