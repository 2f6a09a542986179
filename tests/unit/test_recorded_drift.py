"""A recorded grid's machine flags, played: a probe drawn from a window the recording flagged
"machine speed changed" says so, a search that read one is a flagged search (what a live
search on that moving machine would be marked), and a long truth start that moved is set
aside (benchmarks/capacity_accuracy.py grades the answers of record on the rest); and the
steep grid recorded with the machine watch on this workplace's VM, read as it was."""

from __future__ import annotations

import numpy as np

from benchmarks.grid.truths import ceiling_by_config, long_truths
from tests.conftest import FIXTURES
from tunebench.recorded.noisy import RECORDED_DRIFT, RecordedGrid, held_out_capacity
from tunebench.testing.runs import make_repeats_grid_run
from tunebench.tune.recorded import SearchRules, noisy_probe, search_noisy

SATURATION = {"slow": ({"max-num-seqs": 1}, 3.0), "fast": ({"max-num-seqs": 4}, 6.0)}
MOVED = "machine speed changed: the window's requests decoded 41% slower from t=12 s"


def _grid(root, flag: dict[tuple[str, int], list[str]]):
    """The grid, with the windows in `flag` ((config id, repeat) -> point ids) flagged."""
    store = make_repeats_grid_run(root, SATURATION, rates=(1, 2, 3, 4, 5), repeats=3)
    for (config_id, repeat), point_ids in flag.items():
        store.mark_unverified(config_id, repeat, MOVED, point_ids)
    return store.path


def test_a_probe_drawn_from_a_flagged_window_carries_its_reason(tmp_path):
    grid = RecordedGrid(_grid(tmp_path, {("c1", 1): ["poisson-3"]}))
    start = grid.configs[0].starts[1]
    assert [w.drift for w in start.windows] == [None, None, MOVED, None, None]
    rng = np.random.default_rng(0)
    # between 2 and 3 req/s, and between 3 and 4: both draw on the flagged window
    for rate in (2.5, 3.0, 3.5):
        assert noisy_probe(start, rate, 30.0, grid.slo, rng)[RECORDED_DRIFT] == MOVED
    for rate in (1.0, 1.5, 4.5):
        assert noisy_probe(start, rate, 30.0, grid.slo, rng)[RECORDED_DRIFT] is None
    # the other starts of the configuration were not flagged
    other = grid.configs[0].starts[2]
    assert noisy_probe(other, 3.0, 30.0, grid.slo, rng)[RECORDED_DRIFT] is None


def test_a_search_that_read_a_flagged_window_is_flagged_and_names_the_probe(tmp_path):
    # every window of the slow configuration's first start flagged (a sentinel that moved)
    flagged = [f"poisson-{r}" for r in (1, 2, 3, 4, 5)]
    grid = RecordedGrid(_grid(tmp_path, {("c1", 1): flagged}))
    slow = grid.configs[0]
    rng = np.random.default_rng(1)
    moved = search_noisy(slow.starts[1], grid.slo, 1.0, False, SearchRules(), grid.costs(), rng)
    assert moved.drifted and len(moved.drifted) == len(moved.search.probes)
    assert moved.drifted[0].endswith(MOVED) and "req/s: " in moved.drifted[0]
    steady = search_noisy(slow.starts[2], grid.slo, 1.0, False, SearchRules(), grid.costs(), rng)
    assert steady.drifted == [] and steady.search.probes


def test_a_long_truth_start_that_moved_is_set_aside(tmp_path, capsys):
    played = RecordedGrid(_grid(tmp_path / "played", {}))
    clean = _grid(tmp_path / "clean", {})
    truths, _ = long_truths([clean], played.configs, played.slo)
    assert truths["slow"].kind == "exact"
    # the same long starts, the first one's 3 req/s window flagged: two starts left of three
    moved = _grid(tmp_path / "moved", {("c1", 1): ["poisson-3"]})
    fewer, said = long_truths([moved], played.configs, played.slo)
    out = capsys.readouterr().out
    assert "truth slow: 1 long start(s) set aside" in out and "(2 left)" in out and MOVED in out
    assert "2 long start(s)" in said["slow"]
    assert "3 long start(s)" in long_truths([clean], played.configs, played.slo)[1]["slow"]
    assert fewer["fast"] == truths["fast"]


def test_a_configuration_whose_every_long_start_moved_is_not_graded(tmp_path):
    played = RecordedGrid(_grid(tmp_path / "played", {}))
    every = {("c1", r): ["poisson-2"] for r in (1, 2, 3)}
    truths, said = long_truths([_grid(tmp_path / "moved", every)], played.configs, played.slo)
    # no truth of record is left: not the played bound, not an error, not graded
    assert "slow" not in truths and "slow" not in said
    assert truths["fast"].kind == "exact"


WATCHED = FIXTURES / "grid-cpu-steep-watched"


def test_the_watched_steep_grid_flagged_few_played_windows_and_most_long_starts():
    # the recorded facts docs/benchmarks.md reads ("the steep grid with the machine watch")
    played = RecordedGrid(WATCHED / "played")
    windows = [w for c in played.configs for s in c.starts.values() for w in s.windows]
    flagged = [(w.row["config_label"], w.row["repeat"], w.target) for w in windows if w.drift]
    assert len(windows) == 72 and sorted(flagged) == [
        ("defaults", "1", 18.0),
        ("defaults", "2", 2.0),
    ]
    truths, said = long_truths(sorted(WATCHED.glob("truth-*")), played.configs, played.slo)
    # five of six long starts moved: one start of max-num-seqs 1 x 128 is left, none of 1 x 32
    assert "mns1-mnbt32" not in truths
    assert truths["mns1-mnbt128"].kind == "exact"
    assert 11.38 < truths["mns1-mnbt128"].rate <= 12.65
    assert "1 long start(s)" in said["mns1-mnbt128"]
    # its two played starts crossed 13% below and 10% above it: no answer of one start's own
    # capacity is within 10% of the truth (the ceiling for it is 0)
    mns1 = next(c for c in played.configs if c.label == "mns1-mnbt128")
    own = [held_out_capacity(mns1, [r], played.slo).rate for r in (1, 2)]
    assert not any(truths["mns1-mnbt128"].within(rate, 0.10) for rate in own)
    assert ceiling_by_config([mns1], truths, played.slo, [1, 2]) == {"mns1-mnbt128": 0.0}
