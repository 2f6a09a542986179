"""Plots are tested through their data; rendering only has to produce PNGs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tunebench.analysis.compare import Comparison, Side
from tunebench.analysis.frames import load_run
from tunebench.analysis.overlay import overlay_data, write_overlay
from tunebench.analysis.plots import (
    ITL_METRICS,
    LATENCY_METRICS,
    LINE,
    SERIES,
    concurrency_data,
    pareto_data,
    pareto_front,
    run_figures,
    throughput_data,
    timeseries_data,
    versus_data,
)
from tunebench.report.html import report_context
from tunebench.testing import make_synthetic_run


def test_versus_and_concurrency_data(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 2, 4, 8))
    points = load_run(store.path)
    data = versus_data(points, LATENCY_METRICS)
    assert set(data["metric"]) == {"TTFT p50", "TTFT p95"}
    assert len(data) == 2 * 4 * 2
    for _, group in data.groupby(["config_label", "metric"]):
        assert list(group["achieved_rps"]) == sorted(group["achieved_rps"])
    workshop = concurrency_data(points)
    p50 = workshop[
        (workshop["metric"] == "TTFT p50") & (workshop["config_label"] == "max-num-seqs=2")
    ]
    assert list(p50["streams"]) == [1, 2, 4, 8]
    assert p50["value"].is_monotonic_increasing  # queueing beyond max-num-seqs


def with_poisson(points: pd.DataFrame) -> pd.DataFrame:
    """`points` plus a poisson point beside each concurrent one: achieved rates interleave
    with the concurrent ones, latencies are lower (an open-loop load at the same rate)."""
    poisson = points.copy()
    poisson["load_kind"] = "poisson"
    poisson["achieved_rps"] = points["achieved_rps"] * 1.1
    poisson["target"] = poisson["achieved_rps"].round(2)
    poisson["point_id"] = "poisson-" + poisson["target"].astype(str)
    for column in ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms"):
        poisson[column] = points[column] * 0.5
    return pd.concat([points, poisson], ignore_index=True)


def assert_lines_are_single_kind_and_sorted(data: pd.DataFrame, x: str) -> None:
    for key, line in data.groupby(list(LINE)):
        assert line["load_kind"].nunique() == 1, key
        assert line["config_label"].nunique() == 1, key
        assert line[x].is_monotonic_increasing, key


def test_concurrent_and_poisson_points_of_one_config_are_separate_lines(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 2, 4, 8))
    points = with_poisson(load_run(store.path))
    # What used to be one line per configuration mixes the two kinds, alternating along x.
    one_config = points[points["config_id"] == "c1"].sort_values("achieved_rps")
    assert list(one_config["load_kind"][:2]) == ["concurrent", "poisson"]
    for metrics in (LATENCY_METRICS, ITL_METRICS, {"output_tok_s": "output tok/s"}):
        data = versus_data(points, metrics)
        assert_lines_are_single_kind_and_sorted(data, "achieved_rps")
        assert data.groupby(list(LINE)).ngroups == 2 * 2 * len(metrics)  # configs x kinds
        assert set(data[SERIES]) == {
            f"max-num-seqs={seqs} · {kind}" for seqs in (2, 4) for kind in ("concurrent", "poisson")
        }
        assert (data[SERIES] == data["config_label"] + " · " + data["load_kind"]).all()
        assert len(data) == len(points) * len(metrics)  # every point on exactly one line
    assert_lines_are_single_kind_and_sorted(throughput_data(points), "achieved_rps")
    # The concurrency chart only has concurrent points: one line per configuration.
    workshop = concurrency_data(points)
    assert set(workshop["load_kind"]) == {"concurrent"}
    assert (workshop[SERIES] == workshop["config_label"]).all()
    assert_lines_are_single_kind_and_sorted(workshop, "streams")
    figures = dict(run_figures(points, store.path))
    assert figures["TTFT vs offered load"][:4] == b"\x89PNG"


def test_one_kind_of_load_keeps_the_configuration_as_the_series(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 4))
    data = versus_data(load_run(store.path), LATENCY_METRICS)
    assert (data[SERIES] == data["config_label"]).all()
    empty = versus_data(load_run(store.path), {"no_such_metric": "x"})
    assert empty.empty and SERIES in empty


def test_overlay_lines_are_per_side_and_kind(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 4))
    points = with_poisson(load_run(store.path))
    sides = [
        Side("before", points[points["config_id"] == "c1"], pd.DataFrame()),
        Side("after", points, pd.DataFrame()),
    ]
    result = Comparison(pd.DataFrame(), {}, [], "before", ("max-num-seqs",), sides)
    data = versus_data(overlay_data(result), LATENCY_METRICS)
    assert_lines_are_single_kind_and_sorted(data, "achieved_rps")
    assert set(data[SERIES]) == {
        "before · concurrent",
        "before · poisson",
        "after · max-num-seqs=2 · concurrent",
        "after · max-num-seqs=2 · poisson",
        "after · max-num-seqs=4 · concurrent",
        "after · max-num-seqs=4 · poisson",
    }
    html = write_overlay(result, tmp_path / "overlay.html").read_text()
    # throughput, TTFT and ITL against the offered load, TTFT against the throughput
    assert html.count("data:image/png;base64,") == 4


def test_pareto_front():
    tok = np.array([100, 200, 300, 250, 150.0])
    ttft = np.array([50, 60, 200, 300, 40.0])
    assert list(pareto_front(tok, ttft)) == [False, True, True, False, True]
    frame = pd.DataFrame(
        {
            "config_label": "a",
            "point_id": list("vwxyz"),
            "output_tok_s": tok,
            "ttft_p95_ms": ttft,
            "valid": [True, True, True, True, False],
        }
    )
    data = pareto_data(frame)
    assert list(data["point_id"]) == list("vwxy")  # invalid points are left out
    assert list(data["on_front"]) == [True, True, True, False]


def test_timeseries_marks_point_windows(tmp_path):
    store = make_synthetic_run(tmp_path, configs=1, streams=(1, 4))
    points = load_run(store.path)
    data = timeseries_data(Path(store.path), points, "c1")
    assert set(data["series"]) == {"kv_usage_pct", "running", "waiting"}
    assert set(data["point_id"].dropna()) == {"concurrent-1", "concurrent-4"}
    running = data[(data["series"] == "running") & (data["point_id"] == "concurrent-4")]
    assert (running["value"] == 2).all()  # min(streams 4, max-num-seqs 2)
    assert data["seconds"].min() == 0


def test_figures_render_as_png(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 4))
    figures = run_figures(load_run(store.path), store.path)
    titles = [t for t, _ in figures]
    assert titles[:5] == [
        "Output throughput vs offered load",
        "TTFT vs offered load",
        "TTFT p95 vs achieved throughput, in load order",
        "ITL vs offered load",
        "Latency-throughput Pareto",
    ]
    assert sum(t.startswith("Server time series") for t in titles) == 2
    assert all(png[:8] == b"\x89PNG\r\n\x1a\n" for _, png in figures)


def test_report_context(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 2, 4, 8), slowdown={1: 0.6})
    context = report_context(store.path)
    assert len(context["rows"]) == 8 and len(context["configs"]) == 2
    assert len(context["figures"]) == 7
    assert context["m"]["status"] == "complete"


def test_notebook_api(tmp_path):
    import tunebench

    store = make_synthetic_run(tmp_path, "nb", configs=2, streams=(1, 4), requests_per_point=50)
    points = tunebench.load_run("nb", root=tmp_path)
    assert len(points) == 4 and points["ttft_p50_ms"].dtype == float and points["valid"].all()
    requests = tunebench.load_requests(store.path, config_id="c2", point_id="concurrent-4")
    assert len(requests) == 50 and set(requests["config_id"]) == {"c2"}
    result = tunebench.compare(["nb"], by="max-num-seqs", root=tmp_path, metrics=["ttft_p50"])
    assert list(result.rows.columns[:5]) == [
        "baseline",
        "candidate",
        "point",
        "load_kind",
        "target",
    ]
    assert len(result.rows) == 2
