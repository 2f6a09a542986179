"""How right is a capacity search, and what does it cost? Graded against a held-out recording.

    python benchmarks/capacity_accuracy.py [--grid tests/fixtures/grid-cpu-repeats] [--seeds 100]

The grid (benchmarks/grid/grid-cpu-repeats.yaml) recorded every configuration on several
server starts (repeats) with per-request samples. Its repeats are split:
- the *played* part (default repeats 1 and 2): each search deploys one of these starts at
  random and each probe draws its requests from it, as a noisy recorded deployment does
  (tunebench/recorded/noisy.py);
- the *held-out* part (default the last repeat): the truth, the capacity its requests give,
  which no search and no setting ever saw.

With `--truth RUN...` the truth is instead a far longer measurement of the grid's
configurations on the machine that recorded it (benchmarks/grid/record_truth.py: server
starts of their own, windows of ~300 requests at rates 10% apart around the knee; several
long starts of one configuration are pooled), and every repeat of the grid is played;
`--synthetic` grades against a queueing law's own capacity.

Settings (the search's noise model, tolerance and probe budget) are chosen with
`--choose`, which grades candidates against the played part's own pooled truth: the
held-out repeat plays no part in that choice.

Every strategy is charged what it really pays, from the recording's own timestamps: one
deployment (stop, start, warm-up, load generator set-up) and per probe its window plus the
measured overhead of a load point. It stops by its own rule; its answer is graded:
within +-10% of the held-out truth (a truth that is a bound, "below the lowest recorded
rate" or "at least the highest", is met by an answer on the right side of it).

A grid recorded with the machine watch carries its flags: a search that drew a probe from a
window flagged "machine speed changed" is one tunebench would mark "machine drifted during the
search", and the searches not flagged (the answers of record) are graded alone beside the
flagged share; with `--truth`, a long start with a flagged window is set aside.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.grid.truths import (  # noqa: E402
    WITHIN,
    analytic_ceiling,
    analytic_truths,
    ceiling_by_config,
    long_truths,
    speed_by_start,
)
from tunebench.points import trust  # noqa: E402
from tunebench.points.slo import slo_from_items  # noqa: E402
from tunebench.recorded.noisy import (  # noqa: E402
    RECORDED_DRIFT,
    GridConfig,
    GridCosts,
    RecordedGrid,
    RecordedStart,
    Truth,
    held_out_capacity,
    run_spread,
)
from tunebench.testing.queueing import (  # noqa: E402
    make_queueing_grid,
    sharp_knee_grid,
)
from tunebench.tune.recorded import SearchCost, SearchRules, noisy_probe, search_noisy  # noqa: E402

NOISE_LEVELS = (0.0, 0.05, 0.20)  # extra log-normal noise on top of the recording's own


@dataclass
class Outcome:
    answer: float | None
    cost: SearchCost
    interval: tuple[float, float | None] | None = None
    converged: bool | None = None  # None: the strategy has no notion of converging
    # a probe drew on a window the recording flagged "machine speed changed": tunebench
    # would have marked this search "machine drifted during the search"
    drifted: bool = False


Strategy = Callable[[RecordedStart, dict, np.random.Generator, float, float | None], Outcome]


def tunebench_search(rules: SearchRules) -> Strategy:
    def run(start, slo, rng, extra, warm_rate):
        played = search_noisy(
            start, slo, warm_rate or 1.0, warm_rate is not None, rules, COSTS, rng, extra
        )
        search = played.search
        return Outcome(
            search.capacity, played.cost, search.interval, search.converged, bool(played.drifted)
        )

    return run


def previous_search(window_s: float) -> Strategy:
    """The search before this round: every probe taken at its word, fixed windows, the
    highest passing rate as the answer."""

    def run(start, slo, rng, extra, warm_rate):
        rules = SearchRules(
            window_s=window_s, noise=0.0, sized_windows=False, max_probes=8, max_rate=TOP_RATE
        )
        played = search_noisy(
            start, slo, warm_rate or 1.0, warm_rate is not None, rules, COSTS, rng, extra
        )
        return Outcome(played.search.proven, played.cost, drifted=bool(played.drifted))

    return run


def fixed_rates(rates: list[float], window_s: float, top_down: bool = False) -> Strategy:
    """Probe fixed rates; the answer is the highest rate that met the SLO below the first
    miss (bottom-up), or the first rate that met it (top-down, auto_tune.sh's way)."""

    def run(start, slo, rng, extra, warm_rate):
        cost = SearchCost(deployments=1, seconds=COSTS.deployment_s)
        answer, drifted = None, False
        for rate in sorted(rates, reverse=top_down):
            row = noisy_probe(start, rate, window_s, slo, rng, extra)
            cost.probes += 1
            cost.seconds += window_s + COSTS.point_overhead_s
            drifted = drifted or bool(row.get(RECORDED_DRIFT))
            met = trust.flag(row["slo_met"]) and not trust.is_client_limited(row)
            if top_down and met:
                return Outcome(rate, cost, drifted=drifted)
            if not top_down:
                if not met:
                    break
                answer = rate
        return Outcome(answer, cost, drifted=drifted)

    return run


COSTS = GridCosts(60.0, 2.0)  # replaced by the recording's own in main()
TOP_RATE: float | None = None  # the recording's top rate, in main()


SHAPES = {"sharp-knee": sharp_knee_grid}


# The seed of `grade`'s generator (which start each search deploys, and its probes' draws):
# one set of seeds every figure was measured on; capacity_second_sim.py --grade-seed draws
# another, which no rule was chosen on.
GRADE_SEED = 12345


def grade(
    configs: list[GridConfig],
    truths: dict[str, Truth],
    slo: dict,
    strategy: Strategy,
    repeats: list[int],
    seeds: int,
    extra: float,
    warm: bool,
) -> dict[str, float]:
    rng = np.random.default_rng(GRADE_SEED)
    right, errors, probes, minutes, covered, load = [], [], [], [], [], []
    measurable, capped, signed, unconverged = [], [], [], 0
    flagged = []  # per search: tunebench would have marked it "machine drifted"
    # the searches it did not flag, graded alone (the answers of record)
    kept_right, kept_measurable, kept_signed = [], [], []
    for _seed in range(seeds):
        previous = None
        for config in configs:
            truth = truths[config.label]
            start = config.deploy(repeats, rng)
            outcome = strategy(start, slo, rng, extra, previous)
            own = held_out_capacity(config, [start.repeat], slo)  # this deployment's own
            if outcome.interval and own and extra == 0 and own.kind == "exact":
                low, high = outcome.interval
                covered.append(low <= own.rate <= (high if high is not None else np.inf))
            if warm and outcome.answer:
                previous = outcome.answer
            hit = truth.within(outcome.answer, WITHIN)
            right.append(hit)
            (measurable if truth.kind == "exact" else capped).append(hit)
            error = truth.error(outcome.answer)
            if error is not None and error == error:  # not NaN
                errors.append(abs(error))
                signed.append(error)
            flagged.append(outcome.drifted)
            if not outcome.drifted:
                kept_right.append(hit)
                if truth.kind == "exact":
                    kept_measurable.append(hit)
                    if error is not None and error == error:
                        kept_signed.append(error)
            unconverged += outcome.converged is False
            probes.append(outcome.cost.probes)
            minutes.append(outcome.cost.seconds / 60)
            # probe-seconds: the load windows and their points' overhead, no deployment
            load.append(outcome.cost.seconds - outcome.cost.deployments * COSTS.deployment_s)
    nan = float("nan")
    return {
        "flagged": float(np.mean(flagged)) if flagged else nan,
        "kept_right": float(np.mean(kept_right)) if kept_right else nan,
        "kept_measurable": float(np.mean(kept_measurable)) if kept_measurable else nan,
        "kept_signed": statistics.median(kept_signed) if kept_signed else nan,
        "covered": float(np.mean(covered)) if covered else float("nan"),
        "right": float(np.mean(right)),
        "measurable": float(np.mean(measurable)) if measurable else float("nan"),
        "capped": float(np.mean(capped)) if capped else float("nan"),
        "signed": statistics.median(signed) if signed else float("nan"),
        "unconverged": unconverged / len(right) if right else float("nan"),
        "error": statistics.median(errors) if errors else float("nan"),
        "probes": statistics.median(probes),
        "probes_p90": float(np.percentile(probes, 90)),
        "minutes": statistics.median(minutes),
        "probe_seconds": statistics.median(load),
        "probe_seconds_total": float(np.sum(load)),
    }


def print_row(label: str, result: dict[str, float]) -> None:
    # no exact truth, no error to take a median of: every truth is a bound
    error = "  n/a" if result["error"] != result["error"] else f"{result['error']:5.1%}"
    print(
        f"  {label:<44} within 10%: {result['right']:6.1%}   median |error| "
        f"{error}   probes median {result['probes']:.0f} (p90 "
        f"{result['probes_p90']:.0f})   {result['minutes']:.1f} GPU-min"
    )
    if result["measurable"] != result["measurable"] and result["capped"] == result["capped"]:
        print(
            f"  {'':<44} measurable capacity: none (every truth is a bound); answers on the "
            f"bound's side (10% slack): {result['capped']:6.1%}; unconverged "
            f"{result['unconverged']:.0%}"
        )
    elif result["measurable"] == result["measurable"]:
        print(
            f"  {'':<44} measurable capacity: within 10% {result['measurable']:6.1%}, median "
            f"signed error {result['signed']:+.1%}; truth only a bound (beyond the rates "
            f"measured): {result['capped']:6.1%}; unconverged {result['unconverged']:.0%}"
        )
    if result["flagged"] > 0:
        kept = result["kept_right"]
        measurable = result["kept_measurable"]
        print(
            f"  {'':<44} flagged (machine drifted during the search): {result['flagged']:6.1%}; "
            "the searches not flagged: within 10% "
            + ("  n/a" if kept != kept else f"{kept:6.1%}")
            + (
                ""
                if measurable != measurable
                else f", measurable {measurable:6.1%} (median signed error "
                f"{result['kept_signed']:+.1%})"
            )
        )
    if result["covered"] == result["covered"]:  # not NaN
        print(
            f"  {'':<44} its interval holds the deployment's own capacity "
            f"{result['covered']:.1%} of the time (no probability is stated: not calibrated)"
        )


def probe_noise(configs, truths, slo, repeats, rules: SearchRules) -> float:
    """The measured sd of one probe's log SLO ratio at each configuration's capacity,
    over probes of one start (so the between-start spread is not in it), pooled."""
    from tunebench.points.capacity import probe_seconds
    from tunebench.points.slo import highest_quantile

    rng = np.random.default_rng(7)
    squares, dof = 0.0, 0
    for config in configs:
        truth = truths[config.label]
        if truth.kind != "exact":
            continue
        for repeat in repeats:
            if repeat not in config.starts:
                continue
            seconds = probe_seconds(
                truth.rate, rules.window_s, highest_quantile(slo), rules.sample_margin
            )
            logs = []
            for _ in range(60):
                row = noisy_probe(config.starts[repeat], truth.rate, seconds, slo, rng)
                if row.get("slo_ratio"):
                    logs.append(np.log(row["slo_ratio"]))
            if len(logs) > 2:
                squares += float(np.var(logs, ddof=1)) * (len(logs) - 1)
                dof += len(logs) - 1
    return float(np.sqrt(squares / dof)) if dof else float("nan")


def main() -> None:
    global COSTS, TOP_RATE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=REPO / "tests/fixtures/grid-cpu-repeats")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument(
        "--played",
        "--replay",  # its old name
        default=None,
        help="repeats the search deploys (the played part), e.g. 1,2",
    )
    parser.add_argument("--held-out", default=None, help="repeats held out as truth, e.g. 3")
    parser.add_argument(
        "--choose", action="store_true", help="grade candidate settings on the played part"
    )
    parser.add_argument("--window", type=float, default=10.0, help="a probe's base window, s")
    parser.add_argument(
        "--synthetic",
        choices=sorted(SHAPES),
        help="grade on a grid recorded from a queueing law (tunebench/testing/queueing.py) "
        "against its analytic capacities, instead of a recorded grid's held-out repeat",
    )
    parser.add_argument(
        "--truth",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="grade against these runs instead of a held-out repeat: a far longer "
        "measurement of the grid's configurations on the machine that recorded it "
        "(benchmarks/grid/record_truth.py); every repeat of --grid is then played",
    )
    parser.add_argument(
        "--slo",
        action="append",
        metavar="METRIC.PCT=LIMIT",
        help="SLO instead of the recorded one, e.g. ttft_ms.p90=30 (repeatable); the truth "
        "is recomputed from the held-out requests",
    )
    args = parser.parse_args()
    began = time.monotonic()
    law = None
    if args.synthetic:
        law = SHAPES[args.synthetic]()
        args.grid = make_queueing_grid(Path(tempfile.mkdtemp()), law, args.synthetic).path
    grid = RecordedGrid(args.grid)
    COSTS = grid.costs()
    slo = slo_from_items(args.slo) if args.slo else grid.slo
    if law is not None or args.truth:  # the truth is not in the grid: every start is played
        played, held = grid.repeats, []
    else:
        played = [int(r) for r in args.played.split(",")] if args.played else grid.repeats[:-1]
        held = [int(r) for r in args.held_out.split(",")] if args.held_out else grid.repeats[-1:]
    if set(played) & set(held):
        sys.exit("--played and --held-out must not share a repeat")
    configs = [c for c in grid.configs if any(r in c.starts for r in played)]
    truth_repeats = played if args.choose else held
    brackets: dict[str, str] = {}  # with --truth: what each truth rests on
    if law is not None:
        truths = analytic_truths(law)
    elif args.truth:
        truths, brackets = long_truths(args.truth, configs, slo)
    else:
        truths = {c.label: held_out_capacity(c, truth_repeats, slo) for c in configs}
    configs = [c for c in configs if truths.get(c.label) is not None]
    print(
        f"grid: {args.grid} ({len(configs)} configurations), SLO {slo}; played repeats "
        f"{played}, "
        + (
            f"truth: the law's capacity ({args.synthetic}, tunebench/testing/queueing.py)"
            if law is not None
            else "truth: the long measurement " + ", ".join(str(t) for t in args.truth)
            if args.truth
            else f"truth from repeats {truth_repeats}"
            + (" (the played part itself: choosing settings)" if args.choose else " (held out)")
        )
    )
    print(
        f"measured costs: a deployment {COSTS.deployment_s:.0f} s, a load point's overhead "
        f"{COSTS.point_overhead_s:.1f} s beyond its window"
    )
    for config in configs:
        truth = truths[config.label]
        rests_on = f"   {brackets[config.label]}" if config.label in brackets else ""
        print(f"  truth {config.label:<16} {truth.kind:<8} {truth.rate:.3g} req/s{rests_on}")
    top = max(w.target for c in configs for s in c.starts.values() for w in s.windows)
    # the recording drove its top rate and no more: the client's known limit (max_rate)
    base = SearchRules(window_s=args.window, max_rate=top)
    TOP_RATE = top
    if args.truth:
        print(
            "machine speed by start (ms per output token at the two lowest rates; lower is faster):"
        )
        for config in configs:
            own = [config.starts[r] for r in played if r in config.starts]
            print(f"  {config.label:<22} played starts {speed_by_start(own)}")
    spread = run_spread(configs, played, slo)
    noise = probe_noise(configs, truths, slo, played, base)
    print(
        f"measured noise: one probe's log SLO ratio sd {noise:.3f} (window sized for "
        f"{base.sample_margin:g} x the requests the percentile needs, one start); capacity "
        f"between starts sd {spread:.3f} (log, repeats {played})"
    )
    by_config = {} if law is not None else ceiling_by_config(configs, truths, slo, played)
    limit = (
        analytic_ceiling(law, truths, played)
        if law is not None
        else float(np.mean(list(by_config.values())))
    )
    print(
        f"ceiling: answering each deployed start's own capacity exactly would be within "
        f"10% of the truth in {limit:.1%} of searches"
    )
    if by_config:
        exact = [c.label for c in configs if truths[c.label].kind == "exact"]
        if exact:
            print(
                "  where the truth is measurable: "
                + ", ".join(f"{label} {by_config[label]:.0%}" for label in exact)
            )

    if args.choose:
        print(f"\ncandidate settings, graded on the played part ({args.seeds} seeds, cold):")
        for margin in (1.25, 2.5, 4.0):
            for bracketing in sorted({1.25, 2.5, margin}):
                if bracketing > margin:
                    continue
                for noise_model in (0.0, 0.10, 0.20):
                    rules = replace(
                        base, noise=noise_model, sample_margin=margin, bracketing_margin=bracketing
                    )
                    result = grade(
                        configs, truths, slo, tunebench_search(rules), played, args.seeds, 0, False
                    )
                    print_row(
                        f"margin {margin} (bracketing {bracketing}) noise {noise_model}", result
                    )
        print(f"\n({time.monotonic() - began:.0f} s)")
        return

    recorded_rates = sorted(
        {w.target for c in configs for s in c.starts.values() for w in s.windows}
    )
    strategies: list[tuple[str, Strategy, bool]] = [
        ("tunebench search, cold (1 req/s)", tunebench_search(base), False),
        ("tunebench search, warm (previous capacity)", tunebench_search(base), True),
        ("previous search (no noise model), cold", previous_search(args.window), False),
        (
            "auto_tune.sh: top rate, -1 req/s per step",
            fixed_rates(list(np.arange(np.ceil(top), 0.5, -1.0)), args.window, top_down=True),
            False,
        ),
        (
            "GuideLLM sweep-style: 10 even rates",
            fixed_rates(list(np.linspace(top / 10, top, 10)), args.window),
            False,
        ),
        (
            f"fixed grid: the {len(recorded_rates)} recorded rates",
            fixed_rates(recorded_rates, args.window),
            False,
        ),
    ]
    print(f"\nsettings: {base}")
    for extra in NOISE_LEVELS:
        label = "the recording's own noise" if extra == 0 else f"+{extra:.0%} extra noise"
        print(f"\n{label} ({args.seeds} seeds x {len(configs)} configurations):")
        for name, strategy, warm in strategies:
            print_row(name, grade(configs, truths, slo, strategy, played, args.seeds, extra, warm))
    print(f"\n({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
