"""How efficiently do the capacity search and the tuner find the answer? Measured by replay.

    python benchmarks/tune_efficiency.py [--grid tests/fixtures/grid-cpu] [--seeds 20]

Replays a recorded grid (every configuration measured at several poisson rates on the
CPU server: benchmarks/grid/grid-cpu.yaml) and prints:

1. Capacity search: probes (load points) until the search has proven a rate within 5% of
   the configuration's true capacity (the replay's exact SLO crossing), from a cold start
   (1 req/s) and a warm start (the previous configuration's capacity); beside it the
   auto_tune.sh way (from the highest rate down by 1 req/s until the SLO holds).
2. Tuning: deployments until a configuration within 5% of the grid's best capacity was
   deployed, median over seeds, for the tuner (TPE, baseline first), random search
   (baseline first) and the full grid (file order; it needs every deployment to know).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.replay.model import RecordedRun, true_capacity  # noqa: E402
from tunebench.spec.models import Tune  # noqa: E402
from tunebench.tune.replay import ReplayCapacityEvaluator, replay_probe, search_capacity  # noqa: E402
from tunebench.tune.study import Tuner  # noqa: E402

TOLERANCE = 0.05


def probes_to_within(search, truth: float) -> int | None:
    """Probes until the proven capacity (highest passing rate) is >= (1 - 5%) x truth."""
    best = 0.0
    for count, probe in enumerate(search.probes, start=1):
        if probe.slo_met and not probe.client_limited and probe.rate <= truth * 1.0001:
            best = max(best, probe.rate)
        if best >= (1 - TOLERANCE) * truth:
            return count
    return None


def auto_tune_probes(config, slo: dict, top: float) -> tuple[int, float | None]:
    """vLLM's auto_tune.sh: start at `top` req/s and lower by 1 until the SLO holds."""
    rate, count = top, 0
    while rate >= 1:
        count += 1
        row = replay_probe(config, "poisson", rate, slo)
        if row["slo_met"] and not row["client_limited"]:
            return count, rate
        rate -= 1
    return count, None


def space_of(recorded: RecordedRun) -> dict:
    values: dict[str, list] = {}
    for config in recorded.configs:
        for name, value in config.args.items():
            if name != "max-model-len":
                values.setdefault(name, [])
                if value not in values[name]:
                    values[name].append(value)
    return {name: {"choices": sorted(choices), "ordered": True} for name, choices in values.items()}


def tuner_deployments(
    recorded: RecordedRun,
    slo: dict,
    base_args: dict,
    sampler: str,
    seed: int,
    target: float,
    budget: int,
) -> tuple[int | None, int]:
    """Deployments (baseline included) until one within 5% of `target`; and probes used."""
    tune = Tune.model_validate(
        {"space": space_of(recorded), "trials": budget, "seed": seed, "sampler": sampler}
    )
    study = optuna.create_study(directions=["maximize"], sampler=open_study_sampler(tune))
    evaluator = ReplayCapacityEvaluator(recorded, slo)
    reached: list[int] = []

    def on_trial(trial, note):
        if (
            trial.user_attrs.get("deployed")
            and trial.values
            and trial.values[0] >= (1 - TOLERANCE) * target
            and not reached
        ):
            reached.append(
                sum(1 for t in study.get_trials(deepcopy=False) if t.user_attrs.get("deployed"))
            )

    Tuner(study, tune, base_args, "replay", None, evaluator, on_trial).run()
    return (reached[0] if reached else None), evaluator.probes


def open_study_sampler(tune: Tune):
    if tune.sampler == "random":
        return optuna.samplers.RandomSampler(seed=tune.seed)
    return optuna.samplers.TPESampler(seed=tune.seed, n_startup_trials=tune.startup_trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=REPO / "tests/fixtures/grid-cpu")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--slo",
        action="append",
        metavar="METRIC.PCT=LIMIT",
        help="SLO instead of the recorded one, e.g. ttft_ms.p90=300 (repeatable)",
    )
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    recorded = RecordedRun(args.grid)
    slo = recorded.slo
    if args.slo:
        slo = {}
        for item in args.slo:
            key, limit = item.split("=")
            metric, percentile = key.split(".")
            slo.setdefault(metric, {})[percentile] = float(limit)
    complete = [c for c in recorded.configs if c.status == "complete" and c.rows]
    base_args = next((c.args for c in recorded.configs if c.label == "defaults"), {})
    truths = {c.label: true_capacity(c, slo) or 0.0 for c in complete}
    grid = [c for c in complete if c.label != "defaults"]
    best_label = max((c.label for c in grid), key=lambda label: truths[label])
    best = truths[best_label]
    top = max(float(r["target"]) for c in complete for r in c.rows)
    print(f"grid: {args.grid} ({len(grid)} configurations + defaults), SLO {slo}")
    print(
        f"true capacity (replay): best {best_label} {best:.3f} req/s; "
        f"defaults {truths.get('defaults', 0):.3f} req/s; "
        f"{sum(1 for c in grid if truths[c.label] >= (1 - TOLERANCE) * best)} configurations "
        f"within 5% of the best"
    )

    # 1. capacity search
    cold, warm, auto, final_ok = [], [], [], 0
    previous = None
    for config in complete:
        truth = truths[config.label]
        if truth <= 0:
            continue
        c = search_capacity(config, slo, 1.0, False)
        cold.append(probes_to_within(c, truth))
        final_ok += (1 - TOLERANCE) * truth <= (c.capacity or 0) <= truth * 1.0001
        if previous:
            w = search_capacity(config, slo, previous, True)
            warm.append(probes_to_within(w, truth))
        previous = c.capacity or previous
        auto.append(auto_tune_probes(config, slo, math.ceil(top))[0])

    def describe(counts):
        found = [n for n in counts if n is not None]
        return (
            f"median {statistics.median(found):.1f}, max {max(found)}, "
            f"within 6: {sum(1 for n in found if n <= 6)}/{len(counts)}"
        )

    print("\ncapacity search: load points until within 5% of the true capacity")
    print(f"  warm start (previous capacity)   {describe(warm)}")
    print(f"  cold start (1 req/s)             {describe(cold)}")
    print(f"  auto_tune.sh (top rate, -1/step) {describe(auto)}  (1 req/s steps: not 5%)")
    print(f"  final answers within [0.95, 1.0] x truth: {final_ok}/{len(cold)}")

    # 2. tuning
    print(
        f"\ntuning: deployments until a configuration within 5% of the best "
        f"(median over {args.seeds} seeds; grid size {len(grid)}, 30% = {0.3 * len(grid):.1f})"
    )
    for sampler, label in (
        ("tpe", "tuner (TPE, baseline first)"),
        ("random", "random search (baseline first)"),
    ):
        counts, probes = [], []
        for seed in range(args.seeds):
            count, used = tuner_deployments(
                recorded, slo, base_args, sampler, seed, best, len(grid) + 1
            )
            counts.append(count if count is not None else len(grid) + 1)
            probes.append(used)
        share = statistics.median(counts) / len(grid)
        print(
            f"  {label:<32} median {statistics.median(counts):.1f} deployments "
            f"({share:.0%} of the grid), worst {max(counts)}; "
            f"load points median {statistics.median(probes):.0f}"
        )
    order = [c.label for c in grid]
    first = next(
        i for i, label in enumerate(order, start=1) if truths[label] >= (1 - TOLERANCE) * best
    )
    points = sum(1 for c in grid for r in c.rows if r["load_kind"] == "poisson")
    print(
        f"  {'full grid (file order)':<32} within 5% at deployment {first}; all {len(grid)} "
        f"needed to know; load points {points} (fixed rates, capacity only to their spacing)"
    )


if __name__ == "__main__":
    main()
