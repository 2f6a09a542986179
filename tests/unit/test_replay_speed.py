"""A replay point's offered load is a speed of its trace, "2x trace", wherever a load is
printed: `show`, the report's tables, `results`, compare, progress lines, the dry run's
plan, a capacity search over speed, and the offered-load plots (a panel per trace, x the
speed). A number followed by "req/s" is an achieved or a request rate, never a replay's."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pandas as pd
import pytest
from rich.console import Console

from tests.conftest import invoke
from tunebench.analysis.best import best_config, headline
from tunebench.analysis.crossovers import crossovers_between
from tunebench.analysis.figure_kit import figure_bytes
from tunebench.analysis.frames import load_run
from tunebench.analysis.load_curves import draw_curves, load_curves
from tunebench.analysis.sides import LOAD_KEY, Side
from tunebench.points.offered import SPEED_AXIS, offered_load, speed_text, trace_name
from tunebench.report.compare import crossover_text
from tunebench.report.html import config_summary, write_report
from tunebench.report.live import ConsoleReporter, load_limit, load_target
from tunebench.report.tables import sweep_plan
from tunebench.report.text import describe_capacity
from tunebench.spec.plan import LoadPoint
from tunebench.testing.plot_layout import layout_problems, read_layout
from tunebench.testing.replay_runs import AZURE, make_replay_run

NARROW = {"COLUMNS": "100"}
# a number then "req/s": how a rate is printed; a replay's speed must never read like one
RATE = re.compile(r"\d(\.\d+)? req/s")
# A search over replay speed as runner/probing.py summarises it (speeds, not req/s)
SPEED_SEARCH = {
    "rate": 13.1,
    "arrival": "replay",
    "probes": 6,
    "probe_rates": [2, 4, 8, 10.4, 20.8, 15.5],
    "upper": 15.5,
    "interval": [10.4, 15.5],
    "converged": False,
    "capped": False,
    "client_bound": False,
}


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory):
    return make_replay_run(tmp_path_factory.mktemp("speed"))


def test_the_spelling():
    assert speed_text(2) == "2x trace" and speed_text(0.5) == "0.5x trace"
    assert offered_load("replay", 2.0) == "2x trace"
    # every other kind as `show` has always printed it
    assert offered_load("concurrent", 1) == "1 stream"
    assert offered_load("concurrent", 4) == "4 streams"
    assert offered_load("poisson", 1.5) == "1.5 req/s"
    assert offered_load("batch", 200) == "200 records"
    assert offered_load("synchronous", None) == "-"


def test_show_and_the_report_table_print_the_speed(replay_run):
    result = invoke("show", str(replay_run.path), env=NARROW)
    assert result.returncode == 0, result.stderr
    points = result.stdout.split("trace replay", 1)[0]
    loads = [row.split("│")[3].strip() for row in points.splitlines() if row.startswith("│")]
    assert loads == ["1x trace", "2x trace", "2x trace"] * 2
    assert not RATE.search(result.stdout), result.stdout
    page = write_report(replay_run.path).read_text()
    points_table = page.split("<h2>Points</h2>", 1)[1].split("</table>", 1)[0]
    targets = re.findall(
        r'<td class="l">[^<]*</td>\s*<td class="l">replay-[^<]*</td>\s*<td[^>]*>([^<]*)</td>',
        points_table,
    )
    assert targets == ["1x trace", "2x trace", "2x trace"] * 2
    assert not RATE.search(re.sub(r"<[^>]+>", " ", points_table))


def test_a_capacity_search_over_speed_reads_as_a_speed(tmp_path):
    store = make_replay_run(tmp_path, traces=(AZURE,))
    store.update_config("c1", capacity=SPEED_SEARCH)
    store.update_config("c2", capacity={**SPEED_SEARCH, "rate": 4.0, "upper": None})
    c1, c2 = (c.capacity for c in store.manifest.configs)
    assert describe_capacity(c1) == (
        "capacity: 13.1x trace at SLO (missed at 15.5x trace), not converged: raise "
        "max_probes, 6 probes"
    )
    assert describe_capacity(c2).startswith("capacity: >= 4x trace (not reached) at SLO")
    assert describe_capacity({**SPEED_SEARCH, "rate": None}) == (
        "capacity: no rate met the SLO (6 probes, lowest tried 2x trace)"
    )
    best = best_config(store.path)
    assert best["config_id"] == "c1" and best["arrival"] == "replay"
    assert "capacity at the SLO 13.1x trace" in headline(best)
    summary = config_summary(load_run(store.path), store.manifest, [], [], best)
    assert [row["capacity"] for row in summary] == ["13.1x trace", ">= 4x trace (not reached)"]
    for command in ("show", "results"):
        result = invoke(command, str(store.path), env=NARROW)
        assert result.returncode == 0, result.stderr
        assert "13.1x trace" in result.stdout
        assert not RATE.search(result.stdout), (command, result.stdout)
    page = write_report(store.path).read_text()
    capacity = page.split("<h2>Capacity at SLO</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>13.1x trace</td>" in capacity and "<td>15.5x trace</td>" in capacity
    assert not RATE.search(re.sub(r"<[^>]+>", " ", capacity))


def test_progress_lines_and_the_plan_name_the_speed():
    probe = LoadPoint("capacity-2", "replay", 2.5, None, None, None)
    assert (load_target(probe), load_limit(probe)) == (" at 2.5x trace", "the whole slice")
    fixed = LoadPoint("replay-azure-2", "replay", 2.0, 20.0, None, None)
    assert (load_target(fixed), load_limit(fixed)) == (" at 2x trace", "20 s")
    rate = LoadPoint("poisson-4", "poisson", 4.0, 30.0, None, None)
    assert (load_target(rate), load_limit(rate)) == (" target 4", "30 s")  # as before
    console = Console(width=200, record=True, force_terminal=False)
    reporter = ConsoleReporter(console)
    reporter.point_done(None, {"point_id": "capacity-2", "load_kind": "replay", "target": 2.5,
                               "achieved_rps": 4.2, "valid": "True"})  # fmt: skip
    line = console.export_text()
    assert line.startswith("  capacity-2       2.5x trace achieved 4.20 req/s,"), line
    spec = SimpleNamespace(name="t", deployment=SimpleNamespace(kind="local"), quality=None)
    plan = SimpleNamespace(configs=[], points=[fixed, rate], repeats=1)
    console = Console(width=200, record=True, force_terminal=False)
    console.print(sweep_plan(spec, plan, 60))
    text = console.export_text()
    assert "target (streams, req/s or speed)" in text
    assert re.search(r"replay-azure-2 +│ replay +│ 2x trace ", text), text
    assert re.search(r"poisson-4 +│ poisson +│ 4 ", text), text


def test_compare_keeps_each_trace_and_speed_apart(tmp_path):
    make_replay_run(tmp_path, name="base")
    make_replay_run(tmp_path, name="new", seed=1)
    result = invoke("compare", "base", "new", "--root", str(tmp_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    # the azure and mooncake points at 2x are two loads, never pooled into one
    assert sorted({r["point"] for r in rows} - {"all points"}) == [
        "azure 1x trace",
        "azure 2x trace",
        "mooncake 2x trace",
    ]
    table = invoke("compare", "base", "new", "--root", str(tmp_path), env=NARROW).stdout
    assert "│ mooncake 2x trace · prefix=true " in table
    assert not RATE.search(table.split("┃ point", 1)[1]), table


def test_crossovers_of_replays_lie_on_one_trace_at_a_speed():
    def side(name: str, azure: tuple[float, float], mooncake: float) -> Side:
        points = pd.DataFrame(
            {
                "config_label": ["c"] * 3,
                "point_id": ["replay-azure-1", "replay-azure-2", "replay-mooncake-2"],
                "load_kind": ["replay"] * 3,
                "target": [1.0, 2.0, 2.0],
                "ttft_p50_ms": [*azure, mooncake],
            }
        )
        return Side(name, points, pd.DataFrame())

    # A is better at 1x and worse at 2x of the azure trace: d = 10 then -20, crossing at 4/3
    found = crossovers_between([side("A", (10, 50), 500), side("B", (20, 30), 10)], LOAD_KEY)
    (crossing,) = [x for x in found if x["metric"] == "ttft_p50_ms"]
    assert crossing["trace"] == "azure" and crossing["target"] == pytest.approx(1.333, abs=1e-3)
    assert crossover_text(crossing) == (
        "ttft_p50_ms (replay azure): A vs B cross at ≈ 1.33x trace (no interval: A has no "
        "per-request samples at target 1); lower below: A, above: B"
    )


def test_offered_load_plots_have_a_speed_panel_per_trace(replay_run):
    curves = load_curves(load_run(replay_run.path))
    fig = draw_curves(curves, "ttft_p50_ms", "TTFT", "ms", band="ttft_p95_ms")
    layout = read_layout(figure_bytes(fig))
    assert layout_problems(layout, "TTFT") == []
    assert [a["title"] for a in layout["axes"]] == ["replay azure load", "replay mooncake load"]
    assert {a["xlabel"] for a in layout["axes"]} == {SPEED_AXIS}
    for index, speeds in ((0, [1.0, 2.0]), (1, [2.0])):
        drawn = [s for s in layout["series"] if s["axes"] == index]
        assert {s["label"] for s in drawn} == {
            "enable-prefix-caching=true",
            "enable-prefix-caching=false",
        }
        for series in drawn:
            assert [x for x, _ in series["data"]] == speeds


@pytest.mark.parametrize(
    ("point_id", "trace"),
    [
        ("replay-azure-2", "azure"),
        ("replay-my-trace-1.5", "my-trace"),
        # a cross-checked side's id carries its driver after "@"; both sides name one trace
        ("replay-azure-2@vllm-bench", "azure"),
        ("replay-azure-2@guidellm", "azure"),
        ("capacity-3", None),
    ],
)
def test_a_replay_points_trace_is_read_from_its_id_with_or_without_its_driver(point_id, trace):
    assert trace_name(point_id) == trace
