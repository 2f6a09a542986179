"""Grading the capacity search on a recorded grid with its truths (benchmarks/
capacity_second_sim.py): the benches (the second simulator played and live, the queueing
law, the recorded CPU grid), live probes on the simulator, capacity_accuracy's grade and
its printed line, each deployed start's own capacity, and what a larger budget buys.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

import benchmarks.capacity_accuracy as accuracy
import benchmarks.grid.truths as truth_rules
import tunebench.points.capacity as capacity_module
import tunebench.tune.recorded as tune_recorded
from benchmarks.grid.search_variants import swapped
from benchmarks.grid.second_sim import (
    CACHE,
    QUANTILE,
    SLO_MS,
    Recording,
    grid_engines,
    make_batching_grid,
    start_seed,
    true_capacity,
)
from tunebench.points import client_limit
from tunebench.points.capacity import MAX_WINDOW_FACTOR
from tunebench.points.slo import evaluate
from tunebench.recorded.noisy import (
    GridConfig,
    RecordedGrid,
    RecordedStart,
    Truth,
    held_out_capacity,
)
from tunebench.testing.batching_sim import Engine, poisson_arrivals, serve, start_speed
from tunebench.testing.queueing import make_queueing_grid, sharp_knee_grid
from tunebench.tune.recorded import SearchRules

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Bench:
    """A recorded grid with its truths, ready for capacity_accuracy's `grade`; `engines`
    (the second simulator only): each recorded start's engine, for live probes."""

    name: str
    grid: RecordedGrid
    configs: list[GridConfig]
    truths: dict[str, Truth]
    played: list[int]
    ceiling: float
    top: float
    engines: dict[tuple[str, int], Engine] = field(default_factory=dict)

    def use(self) -> None:
        """capacity_accuracy's strategies read the grid's costs and top rate as globals."""
        accuracy.COSTS = self.grid.costs()
        accuracy.TOP_RATE = self.top

    def rules(self, **changes: Any) -> SearchRules:
        # as capacity_accuracy.main: a 10 s base window, the recording's top rate the
        # client's known limit
        return SearchRules(window_s=10.0, max_rate=self.top, **changes)


def second_bench(truth: dict[str, dict[str, Any]], played: list[int], rec: Recording) -> Bench:
    knees = {label: t["rate"] for label, t in truth.items()}
    store = make_batching_grid(Path(tempfile.mkdtemp()), knees, rec)
    grid = RecordedGrid(store.path)
    truths = {c.label: Truth(knees[c.label], "exact") for c in grid.configs}
    bench = _bench("second simulator (batching DES), played", grid, truths, played)
    bench.engines = {
        (label, r): engine.with_speed(start_speed(start_seed(label, r), rec.speed_sd))
        for label, _, engine in grid_engines()
        for r in range(1, rec.repeats + 1)
    }
    return bench


def queueing_bench() -> Bench:
    law = sharp_knee_grid()
    grid = RecordedGrid(make_queueing_grid(Path(tempfile.mkdtemp()), law, "sharp-knee").path)
    truths = truth_rules.analytic_truths(law)
    bench = _bench("queueing law (sharp-knee), played", grid, truths, grid.repeats)
    bench.ceiling = truth_rules.analytic_ceiling(law, truths, grid.repeats)
    return bench


def recorded_bench() -> Bench:
    """The recorded CPU grid capacity_accuracy.py grades on by default: its last repeat
    held out as the truth, the others played."""
    grid = RecordedGrid(REPO / "tests/fixtures/grid-cpu-repeats")
    played, held = grid.repeats[:-1], grid.repeats[-1:]
    truths = {c.label: held_out_capacity(c, held, grid.slo) for c in grid.configs}
    found = {label: t for label, t in truths.items() if t is not None}
    return _bench("recorded CPU grid, held-out repeat", grid, found, played)


def _bench(name: str, grid: RecordedGrid, truths: dict[str, Truth], played: list[int]) -> Bench:
    configs = [c for c in grid.configs if any(r in c.starts for r in played)]
    configs = [c for c in configs if c.label in truths]
    top = max(w.target for c in configs for s in c.starts.values() for w in s.windows)
    ceiling = truth_rules.ceiling(configs, truths, grid.slo, played)
    return Bench(name, grid, configs, truths, played, ceiling, top)


def live_bench(second: Bench, count: int, rec: Recording) -> Bench:
    """The same configurations and starts, but each probe runs the simulator itself at its
    rate for its window (`LiveProbes`): no recorded windows, no interpolation between them.
    Its ceiling: how often a start's own long-run capacity (its speed factor) is within
    10% of the configuration's truth."""
    own = start_truths_cached(count, second.engines)
    shares = [
        np.mean(
            [
                second.truths[c.label].within(own[f"{c.label}|{r}"], truth_rules.WITHIN)
                for r in second.played
            ]
        )
        for c in second.configs
    ]
    return replace(
        second, name="second simulator (batching DES), live probes", ceiling=float(np.mean(shares))
    )


def start_truths_cached(count: int, engines: dict[tuple[str, int], Engine]) -> dict[str, float]:
    """Each start's own long-run capacity (its engine at its speed), cached like the truth."""
    key = json.dumps(
        [count, SLO_MS, QUANTILE, sorted((f"{k}", asdict(e)) for k, e in engines.items())],
        default=str,
    )
    path = CACHE / f"starts-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        return json.loads(path.read_text())
    out = {f"{label}|{r}": true_capacity(e, count)[0] for (label, r), e in engines.items()}
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return out


class LiveProbes:
    """A probe as a live server would answer it: the deployed start's engine simulated at
    the probe's rate for its window, after the recording's warm-up (requests arriving in
    the warm-up are dropped, as the recording drops them); swapped in for
    tunebench.tune.recorded's `noisy_probe` while a live grade runs."""

    def __init__(self, bench: Bench, rec: Recording):
        self.rec = rec
        self.by_start = {
            id(c.starts[r]): bench.engines[(c.label, r)] for c in bench.configs for r in c.starts
        }

    def __call__(
        self,
        start: RecordedStart,
        rate: float,
        seconds: float,
        slo: dict,
        rng: np.random.Generator,
        extra: float = 0.0,  # the played recording's extra noise: a live server has its own
        kind: str = "poisson",
    ) -> dict[str, Any]:
        engine = self.by_start[id(start)]
        warmup_s = self.rec.warmup_requests / rate
        seed = int(rng.integers(2**32))
        arrivals = poisson_arrivals(rate, int(rate * (warmup_s + seconds) * 1.5) + 50, seed)
        arrivals = arrivals[arrivals < warmup_s + seconds]
        served = serve(engine, arrivals).tail(int(np.searchsorted(arrivals, warmup_s)))
        row: dict[str, Any] = {"load_kind": kind, "target": rate, "duration_s": seconds}
        row.update(requests_ok=len(served.arrival), requests_failed=0, requests_incomplete=0)
        row["achieved_rps"] = len(served.arrival) / seconds
        if len(served.arrival):
            ttft = served.ttft_ms
            row["ttft_mean_ms"] = float(ttft.mean())
            for p in (50, 90, 95, 99):
                row[f"ttft_p{p}_ms"] = float(np.percentile(ttft, p))
        row.update(evaluate(row, [], slo))
        row.update(client_limit.verdict(row))
        return row


def grade(
    bench: Bench, strategy: accuracy.Strategy, seeds: int, warm: bool = False
) -> dict[str, float]:
    bench.use()
    return accuracy.grade(
        bench.configs, bench.truths, bench.grid.slo, strategy, bench.played, seeds, 0.0, warm
    )


def print_grade(label: str, result: dict[str, float], bench: Bench) -> None:
    print(
        f"  {label:<30} within 10%: {result['right']:6.1%} (measurable "
        f"{result['measurable']:6.1%}; ceiling {bench.ceiling:6.1%})   median signed error "
        f"{result['signed']:+6.1%}   converged {1 - result['unconverged']:5.1%}   probes "
        f"median {result['probes']:.0f} (p90 {result['probes_p90']:.0f})   probe-seconds "
        f"median {result['probe_seconds']:.0f} (sum {result['probe_seconds_total'] / 3600:.1f} h)"
    )


def own_capacity(bench: Bench, live: bool, count: int) -> dict[tuple[str, int], float]:
    """What a perfect search of each deployed start would answer: on the played recording,
    the start's own windows' crossing (the played server has nothing else); live, the
    start's own long-run capacity (from `count`-request simulations)."""
    if live:
        starts = start_truths_cached(count, bench.engines)
        return {(c.label, r): starts[f"{c.label}|{r}"] for c in bench.configs for r in c.starts}
    slo = bench.grid.slo
    out = {}
    for c in bench.configs:
        for r in c.starts:
            found = held_out_capacity(c, [r], slo)
            if found is not None:
                out[(c.label, r)] = found.rate
    return out


class BracketSides:
    """A strategy that keeps, per search, where its answer and its bracket lie against the
    deployed start's own long-run capacity. The answer against it is the search's own
    error, without the start's speed factor (which no search of that start can see: the
    ceiling). A passing end above it read a lucky window (the busy periods missed it), a
    missing end below it an unlucky one: symmetric noise makes the two about as common; the
    over-estimate is made of the first outnumbering the second."""

    def __init__(
        self, strategy: accuracy.Strategy, bench: Bench, own: dict[tuple[str, int], float]
    ):
        self.strategy = strategy
        self.own = {id(c.starts[r]): own[(c.label, r)] for c in bench.configs for r in c.starts}
        self.above: list[bool] = []
        self.below: list[bool] = []
        self.errors: list[float] = []  # answer / own - 1; nan: no answer

    def __call__(self, start: RecordedStart, *args: Any) -> accuracy.Outcome:
        outcome = self.strategy(start, *args)
        own = self.own[id(start)]
        self.errors.append(outcome.answer / own - 1 if outcome.answer else float("nan"))
        if outcome.interval:
            low, high = outcome.interval
            self.above.append(low > own)
            self.below.append(high is not None and high < own)
        return outcome

    def against_own(self) -> str:
        errors = np.asarray(self.errors)
        return (
            f"against the deployed start's own capacity: within 10% "
            f"{np.mean(np.abs(errors) <= truth_rules.WITHIN):6.1%}, within 5% "
            f"{np.mean(np.abs(errors) <= 0.05):6.1%}, median signed error "
            f"{np.nanmedian(errors):+6.1%}"
        )

    def describe(self) -> str:
        return (
            f"bracket vs the start's own capacity: passing end above it {np.mean(self.above):.0%}"
            f", missing end below it {np.mean(self.below):.0%} ({len(self.above)} searches)"
        )


# --budgets: what more probes and longer windows buy on the batching server, live. The
# last two also lift the window's cap (MAX_WINDOW_FACTOR x the 10-s base window) to 40.
BUDGETS: tuple[tuple[str, dict[str, Any], int], ...] = (
    ("today (margin 4, 8 probes)", {}, MAX_WINDOW_FACTOR),
    ("margin 16, 12 probes", {"sample_margin": 16.0, "max_probes": 12}, MAX_WINDOW_FACTOR),
    ("margin 32, 12 probes, cap 400 s", {"sample_margin": 32.0, "max_probes": 12}, 40),
    ("margin 64, 16 probes, cap 400 s", {"sample_margin": 64.0, "max_probes": 16}, 40),
)


def budgets(live: Bench, rec: Recording, seeds: int, own: dict[tuple[str, int], float]) -> None:
    print(
        f"\nwhat a larger budget buys, live probes ({seeds} seeds; the ceiling, a perfect "
        f"reading of each deployed start: {live.ceiling:.1%}):"
    )
    for name, changes, cap in BUDGETS:
        print(name)
        strategy = accuracy.tunebench_search(live.rules(**changes))
        with swapped(tune_recorded, "noisy_probe", LiveProbes(live, rec)):
            with swapped(capacity_module, "MAX_WINDOW_FACTOR", cap):
                for warm in (False, True):
                    sides = BracketSides(strategy, live, own)
                    result = grade(live, sides, seeds, warm)
                    print_grade(f"DES live, {'warm' if warm else 'cold'}", result, live)
                    print(f"  {'':<30} {sides.against_own()}")
