"""How cheaply does tuning find a configuration as good as the best? Graded on held-out data.

    python benchmarks/tune_efficiency.py [--grid tests/fixtures/grid-cpu-repeats] [--seeds 50]

The recorded grid (benchmarks/grid/grid-cpu-repeats.yaml: every configuration started
several times, per-request samples kept) is split by repeat, as in
benchmarks/capacity_accuracy.py: the strategies deploy the *played* part (each deployment
one recorded start, each probe requests drawn from it: tunebench/recorded/noisy.py); the
truth is the *held-out* repeat's capacity per configuration.

"As good as the best": the held-out capacities of two configurations differ by the
between-start spread (sd s of log capacity, measured on the played part) even when they
are the same, so every configuration within 1.96 x sqrt(2) x s of the best one's held-out
capacity is indistinguishable from it (the best set).

Each strategy is charged what it pays (the recording's own measured costs: a deployment,
and per probe its window plus a load point's overhead) and stops by its own rule:
- the tuner (its default sampler, the local search of tunebench/tune/local_search.py),
  Optuna's TPE and random search, each with the baseline first: `--trials`
  deployments, each a capacity search warm-started like `tunebench tune`;
- the full grid: every configuration deployed once and measured at the recorded rates with
  the recorded windows, the highest sustained rate wins (it must deploy everything to know).
Printed per strategy, median over seeds: GPU-minutes until it first deployed a
configuration of the best set, as a share of what the held-out grid cost to record; and
how often the configuration it names at its stop is in the best set, with one binomial
standard error (sqrt(p (1 - p) / seeds)).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import optuna

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.numbers import to_float  # noqa: E402
from tunebench.points import trust  # noqa: E402
from tunebench.points.slo import slo_from_items  # noqa: E402
from tunebench.points.sustained import RatePoint, sustained_capacity  # noqa: E402
from tunebench.recorded.noisy import RecordedGrid, held_out_capacity, run_spread  # noqa: E402
from tunebench.spec.models import Tune  # noqa: E402
from tunebench.testing.queueing import (  # noqa: E402
    TUNING_SHAPES,
    analytic_capacity,
    make_queueing_grid,
)
from tunebench.tune.recorded import (  # noqa: E402
    NoisyCapacityEvaluator,
    SearchRules,
    noisy_probe,
)
from tunebench.tune.storage import make_sampler  # noqa: E402
from tunebench.tune.study import Tuner  # noqa: E402

#: The batching simulation's between-start speed spread (log sd): its recording's own.
BATCHING_SPEED_SD = 0.04
#: The batching simulation's grids: its own KV cache (4096 tokens: vLLM's defaults run into it
#: and still come within 2% of the best), and one of 1024 tokens (64 blocks: ten sequences of
#: 96 tokens), where every configuration of more than 8 sequences fills the cache and slows.
BATCHING_GRIDS = {"batching": 4096, "batching-small-kv": 1024}


def batching_grid(name: str) -> tuple[dict[str, float], Path]:
    """The second simulator's grid (benchmarks/grid/second_sim.py): every configuration's
    true capacity from long simulations (cached under /tmp), and a recording of 3 starts x
    5 Poisson windows around each knee to tune on."""
    import benchmarks.grid.second_sim as second
    from tunebench.testing.batching_sim import StepCosts

    assert second.Recording.speed_sd == BATCHING_SPEED_SD
    costs = StepCosts(kv_capacity_tokens=BATCHING_GRIDS[name])
    truth = second.truths_cached(second.TRUTH_REQUESTS, costs)
    knees = {label: float(t["rate"]) for label, t in truth.items()}
    root = Path(tempfile.mkdtemp())
    store = second.make_batching_grid(root, knees, second.Recording(), name, costs)
    return knees, store.path


def space_of(grid: RecordedGrid, base: dict) -> dict:
    values: dict[str, list] = {}
    for config in grid.configs:
        for name, value in config.args.items():
            if base.get(name) != value:
                values.setdefault(name, [])
                if value not in values[name]:
                    values[name].append(value)
    return {name: {"choices": sorted(choices), "ordered": True} for name, choices in values.items()}


def held_out_cost_s(grid: RecordedGrid, repeats: list[int]) -> float:
    """What recording the held-out repeat(s) cost: every window, a load point's overhead
    each, and a deployment per configuration (the recording's own measured costs)."""
    costs = grid.costs()  # its deployment cost holds the warm-up points
    rows = [
        r
        for r in grid.rows
        if int(to_float(r.get("repeat")) or 1) in repeats and r["load_kind"] == grid.kind
    ]
    windows = sum(
        (to_float(r.get("end_time")) or 0) - (to_float(r.get("start_time")) or 0) for r in rows
    )
    deployments = len({r["config_id"] for r in rows}) * len(repeats)
    return windows + len(rows) * costs.point_overhead_s + deployments * costs.deployment_s


def run_study(grid, slo, base, sampler, seed, trials, played, best_set, rules):
    tune = Tune.model_validate(
        {"space": space_of(grid, base), "trials": trials, "seed": seed, "sampler": sampler}
    )
    study = optuna.create_study(directions=["maximize"], sampler=make_sampler(tune, seed))
    evaluator = NoisyCapacityEvaluator(grid, slo, played, rules, np.random.default_rng(seed))
    reached: list[float] = []

    def on_trial(trial, note):
        label = trial.user_attrs.get("label")
        if trial.user_attrs.get("deployed") and label in best_set and not reached:
            reached.append(evaluator.cost.seconds)

    Tuner(study, tune, base, "recorded", None, evaluator, on_trial).run()
    done = [t for t in study.trials if t.values and t.user_attrs.get("deployed")]
    pick = max(done, key=lambda t: t.values[0]).user_attrs.get("label") if done else None
    return (reached[0] if reached else None), evaluator.cost.seconds, pick


def full_grid(grid, slo, played, rules, seed):
    rng = np.random.default_rng(seed)
    costs = grid.costs()
    seconds, found = 0.0, {}
    for config in grid.configs:
        if not any(r in config.starts for r in played):
            continue
        # its recorded rates, each with its recorded window: what measuring it costs
        windows = {w.target: w.seconds for s in config.starts.values() for w in s.windows}
        start = config.deploy(played, rng)
        seconds += costs.deployment_s
        points = []
        for rate, window_s in sorted(windows.items()):
            row = noisy_probe(start, rate, window_s, slo, rng)
            seconds += window_s + costs.point_overhead_s
            points.append(
                RatePoint(
                    rate,
                    trust.flag(row["slo_met"]),
                    row.get("slo_ratio"),
                    trust.is_client_limited(row),
                )
            )
        capacity = sustained_capacity(points)
        found[config.label] = 0.0 if capacity is None or capacity.kind == "below" else capacity.rate
    pick = max(found, key=lambda label: found[label])
    return seconds, seconds, pick  # it knows its best only once it measured everything


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=REPO / "tests/fixtures/grid-cpu-repeats")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--trials", type=int, default=6, help="deployments, baseline included")
    parser.add_argument("--window", type=float, default=10.0, help="a probe's base window, s")
    parser.add_argument(
        "--slo",
        action="append",
        metavar="METRIC.PCT=LIMIT",
        help="SLO instead of the recorded one, e.g. ttft_ms.p90=30 (repeatable); the truth "
        "is recomputed from the held-out requests",
    )
    parser.add_argument(
        "--synthetic",
        choices=sorted(TUNING_SHAPES) + sorted(BATCHING_GRIDS),
        help="a grid recorded from a queueing law where vLLM's defaults are not the best "
        "(tunebench/testing/queueing.py), graded against the law's capacities; 'batching', "
        "'batching-small-kv': the continuous-batching simulation of "
        "benchmarks/capacity_second_sim.py, graded against its long simulations",
    )
    parser.add_argument(
        "--close",
        type=float,
        default=0.05,
        help="a pick within this share of the best configuration's true capacity counts as "
        "close (printed beside the best set)",
    )
    parser.add_argument(
        "--sampler",
        action="append",
        choices=("local", "tpe", "random"),
        help="which samplers to run (default: all three)",
    )
    args = parser.parse_args()
    began = time.monotonic()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    law = None
    batching: dict[str, float] | None = None
    if args.synthetic in BATCHING_GRIDS:
        batching, args.grid = batching_grid(args.synthetic)
    elif args.synthetic:
        law = TUNING_SHAPES[args.synthetic]()
        args.grid = make_queueing_grid(Path(tempfile.mkdtemp()), law, args.synthetic).path
    grid = RecordedGrid(args.grid)
    slo = slo_from_items(args.slo) if args.slo else grid.slo
    played, held = grid.repeats[:-1], grid.repeats[-1:]
    if law is not None or batching is not None:  # a simulated truth: every start may be deployed
        played = grid.repeats
    configs = [c for c in grid.configs if any(r in c.starts for r in played)]
    truths = {}
    for config in configs:
        if batching is not None:
            truths[config.label] = batching[config.label]
            continue
        if law is not None:
            truths[config.label] = analytic_capacity(
                next(q for q in law.configs if q.label == config.label), law
            )
            continue
        truth = held_out_capacity(config, held, slo)
        truths[config.label] = 0.0 if truth is None or truth.kind == "below" else truth.rate
    if batching is not None:
        spread = BATCHING_SPEED_SD
    else:
        spread = law.spread if law is not None else run_spread(configs, played, slo)
    band = 1.96 * math.sqrt(2) * spread
    best_label = max(truths, key=lambda label: truths[label])
    best = truths[best_label]
    best_set = {
        label for label, rate in truths.items() if rate > 0 and math.log(best / rate) <= band
    }
    base = next((c.args for c in configs if c.label == "defaults"), {})
    grid_cost = held_out_cost_s(grid, held)
    top = max(w.target for c in configs for s in c.starts.values() for w in s.windows)
    rules = SearchRules(window_s=args.window, max_rate=top)  # the recording's client limit
    print(f"grid: {args.grid} ({len(configs)} configurations), SLO {slo}")
    where = (
        f"the law's ({args.synthetic})"
        if law is not None
        else f"long simulations ({args.synthetic})"
        if batching is not None
        else f"held-out (repeat {held})"
    )
    print(
        f"truth {where}: best {best_label} {best:.3g} req/s; defaults "
        f"{truths.get('defaults', float('nan')) / best:.0%} of it; between-start "
        f"spread sd {spread:.3f} (log) -> best set within {band:.1%} (log): "
        f"{', '.join(sorted(best_set))}"
    )
    for label in sorted(truths, key=lambda label: -truths[label]):
        print(f"  {label:<16} {truths[label]:.3g} req/s")
    print(
        f"held-out grid cost: {grid_cost / 60:.1f} GPU-min (every configuration once, its "
        f"recorded windows, measured deployment and point overheads)"
    )
    print(
        f"\n{args.seeds} seeds; tuner and random search stop after {args.trials} deployments; "
        f"settings: {rules}"
    )
    strategies = (
        (
            "tuner (local search, baseline first)",
            lambda seed: run_study(
                grid, slo, base, "local", seed, args.trials, played, best_set, rules
            ),
        ),
        (
            "TPE (baseline first)",
            lambda seed: run_study(
                grid, slo, base, "tpe", seed, args.trials, played, best_set, rules
            ),
        ),
        (
            "random search (baseline first)",
            lambda seed: run_study(
                grid, slo, base, "random", seed, args.trials, played, best_set, rules
            ),
        ),
        (
            "full grid (recorded rates)",
            lambda seed: full_grid(grid, slo, played, rules, seed),
        ),
    )
    chosen = set(args.sampler or ["local", "tpe", "random"]) | {"grid"}
    for (name, run), key in zip(strategies, ("local", "tpe", "random", "grid")):
        if key not in chosen:
            continue
        reach, spent, right, close, regret = [], [], [], [], []
        for seed in range(args.seeds):
            first, total, pick = run(seed)
            reach.append(first / grid_cost if first is not None else float("inf"))
            spent.append(total / grid_cost)
            right.append(pick in best_set)
            # what the pick's true capacity gives up against the best one's
            lost = 1.0 - truths.get(pick, 0.0) / best if pick is not None else 1.0
            regret.append(lost)
            close.append(lost <= args.close)
        found = [r for r in reach if r != float("inf")]
        share, near = float(np.mean(right)), float(np.mean(close))
        print(
            f"  {name:<36} first best-set deployment at {statistics.median(reach):6.1%} of the "
            f"grid's GPU-min (median; never in {len(reach) - len(found)}/{len(reach)}); "
            f"spent {statistics.median(spent):6.1%}; its pick in the best set "
            f"{share:6.1%} (binomial SE {math.sqrt(share * (1 - share) / len(right)):.1%}), "
            f"within {args.close:.0%} of the best {near:6.1%} "
            f"(SE {math.sqrt(near * (1 - near) / len(close)):.1%}); the pick's capacity "
            f"below the best's: median {statistics.median(regret):.1%}"
        )
    print(f"\n({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
