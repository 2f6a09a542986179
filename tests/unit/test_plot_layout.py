"""The layout each plot records in its PNG, and the checks of what a reader sees that
tests/e2e/test_report_browser.py runs over a real report: each check fails on a figure
drawn the way the issue found them (legend over the data, y = 32x for every
configuration, one series under another)."""

from __future__ import annotations

import copy

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from tunebench.analysis.figure_kit import figure_bytes  # noqa: E402
from tunebench.analysis.frames import load_run  # noqa: E402
from tunebench.analysis.load_curves import draw_curves, load_curves  # noqa: E402
from tunebench.analysis.plots import run_figures  # noqa: E402
from tunebench.report.html import write_report  # noqa: E402
from tunebench.testing import make_demo_like_run  # noqa: E402
from tunebench.testing.plot_layout import layout_problems, page_images, read_layout  # noqa: E402
from tunebench.testing.runs import DEMO_SHAPE  # noqa: E402


def test_every_report_plot_of_the_demo_shape_records_its_layout_and_reads_clean(tmp_path):
    store = make_demo_like_run(tmp_path)
    figures = run_figures(load_run(store.path), store.path)
    assert len(figures) == 5
    for title, png in figures:
        layout = read_layout(png)
        assert layout is not None, title
        assert layout_problems(layout, title) == []
        width, height = layout["size"]
        # the recorded size is the PNG's own (IHDR): the pixels are the image's pixels
        assert png[16:24] == int(width).to_bytes(4, "big") + int(height).to_bytes(4, "big")
    throughput = read_layout(figures[0][1])
    # one panel per load kind, both configurations in each, the legend right of both
    assert [a["title"] for a in throughput["axes"]] == ["concurrent load", "poisson load"]
    for index in (0, 1):
        labels = {s["label"] for s in throughput["series"] if s["axes"] == index}
        assert labels == {"max-num-seqs=2", "max-num-seqs=8"}
    (legend,) = throughput["legends"]
    assert legend["box"][0] > max(a["box"][2] for a in throughput["axes"])


def test_the_report_page_carries_the_layouts(tmp_path):
    store = make_demo_like_run(tmp_path)
    page = write_report(store.path).read_text()
    images = page_images(page)
    assert [alt for alt, _ in images][:2] == [
        "Output throughput vs offered load",
        "TTFT vs offered load",
    ]
    assert all(read_layout(png) is not None for _, png in images)


def test_a_legend_over_the_data_is_found():
    fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
    ax.set_title("inside")
    ax.plot([1, 2, 3], [1, 4, 9], marker="o", label="a")
    ax.plot([1, 2, 3], [2, 5, 8], marker="s", label="b")
    ax.legend(loc="upper left")
    problems = layout_problems(read_layout(figure_bytes(fig)))
    assert problems == ["plot: legend ['a', 'b'] overlaps the panel 'inside'"]


def test_throughput_against_achieved_requests_is_identical_by_construction(tmp_path):
    # the "Output throughput" plot: output tok/s against achieved req/s, 32 output
    # tokens per request: every configuration on y = 32x
    store = make_demo_like_run(tmp_path)
    curves = load_curves(load_run(store.path))
    fig = draw_curves(
        curves, "output_tok_s", "old", "output tokens/s", x="achieved_rps",
        xlabel="achieved req/s",
    )  # fmt: skip
    problems = layout_problems(read_layout(figure_bytes(fig)), "old")
    assert problems == [
        "old, panel 'concurrent load': series 'max-num-seqs=2' and 'max-num-seqs=8' lie on "
        "one line y = kx, identical by construction"
    ]


def test_a_series_under_another_of_its_look_is_found():
    fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
    ax.set_title("same")
    ax.plot([1, 2, 3], [1, 4, 9], color="C0", marker="o", ms=6, label="a")
    ax.plot([1, 2, 3], [1, 4, 9], color="C0", marker="o", ms=6, label="b")
    ax.plot([1, 2], [50, 60], color="C1", marker="s", label="off the axes")
    ax.set_ylim(0, 10)
    problems = layout_problems(read_layout(figure_bytes(fig)))
    assert problems == [
        "plot, panel 'same': series 'off the axes' has no marker inside",
        "plot, panel 'same': series 'a' and 'b' look alike",
        "plot, panel 'same': series 'a' and 'b': the first is hidden under the second",
    ]


def test_an_image_without_a_layout_is_a_problem():
    assert layout_problems(None, "foreign") == ["foreign: no layout recorded"]


def test_a_single_rate_keeps_its_top_marker_whole(tmp_path):
    # the demo's poisson panel: one rate, 134 vs 128 tok/s; autoscaling pads by the spread
    # of the two (6 tok/s), so the panel ended at the higher marker and cut it in half
    shape = copy.deepcopy(DEMO_SHAPE)
    shape["max-num-seqs=2"]["poisson-4"] = (100.0, 406.0, 134.0)
    store = make_demo_like_run(tmp_path, shape=shape)
    curves = load_curves(load_run(store.path))
    fig = draw_curves(curves, "output_tok_s", "t", "output tokens/s")
    assert layout_problems(read_layout(figure_bytes(fig)), "now") == []
    old = draw_curves(curves, "output_tok_s", "t", "output tokens/s")
    for ax in old.axes:  # the axes as they were drawn before: no headroom, clipped
        ax.relim()
        ax.autoscale()
        ax.set_ylim(bottom=0)
        for line in ax.get_lines():
            line.set_clip_on(True)
    assert layout_problems(read_layout(figure_bytes(old)), "old") == [
        "old, panel 'poisson load': series 'max-num-seqs=2' has 1 marker(s) cut by the panel's edge"
    ]


def test_a_marker_on_the_axis_at_zero_is_drawn_whole(tmp_path):
    # the demo's TTFT at 1 stream: 15 ms on an axis to 1400 ms sits on the panel's bottom
    shape = copy.deepcopy(DEMO_SHAPE)
    shape["max-num-seqs=2"]["concurrent-1"] = (3.0, 5.0, 150.0)
    shape["max-num-seqs=2"]["concurrent-8"] = (1100.0, 1400.0, 406.0)
    store = make_demo_like_run(tmp_path, shape=shape)
    curves = load_curves(load_run(store.path))
    fig = draw_curves(curves, "ttft_p50_ms", "t", "ms", band="ttft_p95_ms")
    layout = read_layout(figure_bytes(fig))
    low = next(s for s in layout["series"] if s["label"] == "max-num-seqs=2" and s["axes"] == 0)
    bottom = layout["axes"][0]["box"][3]
    assert bottom - low["pixels"][0][1] < low["radius"] - 1  # on the edge
    assert low["clipped"] is False and layout_problems(layout) == []
    for line in fig.axes[0].get_lines():
        line.set_clip_on(True)
    assert layout_problems(read_layout(figure_bytes(fig)), "clipped") == [
        "clipped, panel 'concurrent load': series 'max-num-seqs=2' has 1 marker(s) cut by the "
        "panel's edge"
    ]
