"""Plots that compare: curves against the offered load in load order, one panel per load
kind, configurations told apart by colour and marker, legends outside the data; and the
compare page with the gate's verdict per point."""

from __future__ import annotations

import copy
import re

import matplotlib

matplotlib.use("Agg")

from tests.conftest import invoke  # noqa: E402
from tunebench.analysis.figure_kit import styles  # noqa: E402
from tunebench.analysis.frames import load_run  # noqa: E402
from tunebench.analysis.load_curves import comparing_figures, load_curves  # noqa: E402
from tunebench.analysis.plots import draw_pareto, pareto_data  # noqa: E402
from tunebench.testing import make_demo_like_run  # noqa: E402
from tunebench.testing.runs import DEMO_SHAPE  # noqa: E402


def fold_back_shape() -> dict:
    """max-num-seqs=8 achieves less output at 8 streams than at 4 (as the demo's 17.85
    then 16.85 req/s): sorted by what was achieved, its curve would fold back."""
    shape = copy.deepcopy(DEMO_SHAPE)
    shape["max-num-seqs=8"]["concurrent-4"] = (70.0, 100.0, 571.0)
    return shape


def test_curves_follow_the_offered_load_not_the_achieved_throughput(tmp_path):
    store = make_demo_like_run(tmp_path, shape=fold_back_shape())
    curves = load_curves(load_run(store.path))
    line = curves[
        (curves["config_label"] == "max-num-seqs=8") & (curves["load_kind"] == "concurrent")
    ]
    assert list(line["target"]) == [1.0, 4.0, 8.0]  # load order
    assert list(line["output_tok_s"]) == [150.0, 571.0, 541.0]  # the shape, falling back
    assert list(line["order"]) == [0, 1, 2]
    # the poisson point is its own curve, never joined to the concurrent ones
    assert set(curves["load_kind"]) == {"concurrent", "poisson"}


def test_every_configuration_has_its_own_colour_and_marker():
    labels = [f"c{i}" for i in range(30)]
    found = styles(labels)
    assert len(set(found.values())) == 30
    first_ten = [found[label] for label in labels[:10]]
    assert len({c for c, _ in first_ten}) == 10 and len({m for _, m in first_ten}) == 8


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_panels_per_load_kind_legend_outside_every_series_drawn(tmp_path):
    store = make_demo_like_run(tmp_path, shape=fold_back_shape())
    points = load_run(store.path)
    figures = dict(comparing_figures(points))
    assert set(figures) == {
        "Output throughput vs offered load",
        "TTFT vs offered load",
        "TTFT p95 vs achieved throughput, in load order",
        "ITL vs offered load",
    }
    for title, fig in [*figures.items(), ("pareto", draw_pareto(pareto_data(points)))]:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        axes = fig.axes
        if title != "pareto":
            assert [ax.get_title() for ax in axes] == ["concurrent load", "poisson load"], title
        assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in axes)
        legend = fig.legends[0].get_window_extent(renderer)
        for ax in axes:
            assert not overlaps(legend, ax.get_window_extent(renderer)), title
        texts = [t.get_text() for t in fig.legends[0].get_texts()]
        assert {"max-num-seqs=2", "max-num-seqs=8"} <= set(texts), title
        if title == "pareto":
            continue
        # each configuration drawn in each panel, in its own colour and marker
        for ax in axes:
            drawn = {
                (line.get_label(), line.get_color(), line.get_marker())
                for line in ax.get_lines()
                if not line.get_label().startswith("_")
            }
            assert {label for label, _, _ in drawn} == {"max-num-seqs=2", "max-num-seqs=8"}
            assert len({(c, m) for _, c, m in drawn}) == 2
    # the achieved-throughput plot joins the points in load order: x goes back at 8 streams
    ax = figures["TTFT p95 vs achieved throughput, in load order"].axes[0]
    line = next(x for x in ax.get_lines() if x.get_label() == "max-num-seqs=8")
    assert list(line.get_xdata()) == [150.0, 571.0, 541.0]


def test_compare_html_shows_both_runs_and_the_gate_per_point(tmp_path):
    make_demo_like_run(tmp_path, name="base")
    worse = copy.deepcopy(DEMO_SHAPE)
    worse["max-num-seqs=8"]["concurrent-8"] = (160.0, 400.0, 400.0)  # TTFT p95 114 -> 400
    make_demo_like_run(tmp_path, name="new", shape=worse)
    out = tmp_path / "out.html"
    result = invoke(
        "compare", "base", "new", "--root", str(tmp_path), "--fail-on-regression", "5",
        "--html", str(out), "-m", "ttft_p95", "-m", "output_tok_s",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the gate failed: a regression
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 4
    assert "gate: regression" in page
    # the per-point table: the regressed point and metric carry the gate's verdict
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page)
    failed = [r for r in rows if r.endswith("<td>regression</td>")]
    assert len(failed) == 1
    assert "concurrent 8 · max-num-seqs=8" in failed[0] and "TTFT p95 ms" in failed[0]
    unchanged = [r for r in rows if "concurrent 1 · max-num-seqs=2" in r]
    assert unchanged and all("no significant change" in r for r in unchanged)


def test_crossovers_only_for_the_metrics_asked_and_naming_both_sides(tmp_path):
    # TTFT p50 of max-num-seqs=8 lies below =2 at 1 stream and above it at 8 streams: the
    # curves cross; ITL is flat and equal on both
    shape = copy.deepcopy(DEMO_SHAPE)
    shape["max-num-seqs=2"]["concurrent-1"] = (90.0, 120.0, 150.0)
    shape["max-num-seqs=8"]["concurrent-8"] = (400.0, 480.0, 541.0)
    store = make_demo_like_run(tmp_path, shape=shape)
    asked = invoke(
        "compare", store.path.name, "--root", str(tmp_path), "--by", "max-num-seqs",
        "-m", "ttft_p50",
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    lines = [x for x in asked.stdout.splitlines() if x.startswith("crossover:")]
    assert lines and all("ttft_p50_ms" in x for x in lines)
    assert "max-num-seqs=2 vs max-num-seqs=8" in lines[0]
    other = invoke(
        "compare", store.path.name, "--root", str(tmp_path), "--by", "max-num-seqs",
        "-m", "output_tok_s",
    )  # fmt: skip
    assert other.returncode == 0, other.stderr
    assert "crossover" not in other.stdout
