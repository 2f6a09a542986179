"""How right is the capacity search on a second, independent server law? A batching DES.

    python benchmarks/capacity_second_sim.py [--seeds 20] [--truth-requests 20000]
        [--diagnose SEEDS] [--fixes] [--queueing-seeds 20] [--budgets] [--grade-seed N]

benchmarks/capacity_accuracy.py --synthetic grades the search on the queueing law it was
tuned on (tunebench/testing/queueing.py). This grades it on a law it never saw: the
continuous-batching simulation of tunebench/testing/batching_sim.py, over max-num-seqs
{1, 2, 4, 8, 16} x max-num-batched-tokens {32, 64, 128, 512} and vLLM's defaults.

- The truth: each configuration's capacity at the SLO (TTFT p90 <= 150 ms) at its nominal
  speed, from long simulations (`--truth-requests`, 20,000 by default) on a fine grid of
  rates around the knee, the crossing interpolated between the two rates around it
  (cached under /tmp, so a rerun is fast; `--truth-requests 4000` for a quick run).
- The recording: 3 server starts per configuration (each with its own log-normal speed
  factor, sd 4%), each with 5 Poisson windows at 0.5-1.6 x the truth, ~60 requests each
  after a warm-up, written in the run format a noisy recorded deployment reads
  (tunebench/recorded/noisy.py); the search plays repeats 1 and 2 (`--played`), graded
  by capacity_accuracy.py's own `grade` and benchmarks/grid/truths.py's `ceiling` (imported,
  not copied).
- Live probes: the same starts, but each probe runs the simulator at its own rate for its
  own window: what the search would meet on such a server, without the recording's
  windows in between (the played recording can be no better than them: its ceiling).
  Each start runs at its own speed, so its own long-run capacity lies more than 10% from
  the configuration's truth in about one search of ten: the live ceiling. Live rows also
  grade each answer against the deployed start's own capacity: the search's own error.
- The search is graded as it is (chord in log ratio, narrowing windows that grow as the
  bracket narrows) and as it was before (`PreviousSearch`: the chord in 1/ratio, narrowing
  windows of the sample margin throughout), each with its cost: probe-seconds per search
  (load windows and their points' overhead, no deployment; the median, and the sum over
  all searches).
- `--diagnose SEEDS`: where today's answers come from (probes, requests per probe, the
  p90s read, the bracket and its interpolation, the noise model), against the truth and
  against the deployed start's own capacity.
- `--budgets`: the live search with longer windows and more probes (BUDGETS): what a
  larger budget buys, against the truth and against the deployed start's own capacity.
- `--fixes`: variants of the search (subclasses of CapacitySearch or other settings,
  swapped in here only), each graded on this simulator, played and live, on the
  queueing law's grid (`--synthetic sharp-knee` of capacity_accuracy.py) and on the
  recorded CPU grid (tests/fixtures/grid-cpu-repeats, its last repeat held out).

The parts live in benchmarks/grid/: second_sim.py (the grid, its truth and its recording),
second_sim_grading.py (the benches, live probes, grading, BUDGETS) and
second_sim_diagnosis.py (--diagnose).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import benchmarks.capacity_accuracy as accuracy  # noqa: E402
import tunebench.tune.recorded as tune_recorded  # noqa: E402
from benchmarks.grid.search_variants import (  # noqa: E402
    FIXES,
    PreviousSearch,
    swapped,
    variant,
)
from benchmarks.grid.second_sim import SLO, Recording, truths_cached  # noqa: E402
from benchmarks.grid.second_sim_diagnosis import (  # noqa: E402
    probe_bias,
    trace,
    window_length,
    window_reading,
)
from benchmarks.grid.second_sim_grading import (  # noqa: E402
    BracketSides,
    LiveProbes,
    budgets,
    grade,
    live_bench,
    own_capacity,
    print_grade,
    queueing_bench,
    recorded_bench,
    second_bench,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth-requests", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--played",
        "--replay",
        default="1,2",
        help="the starts the search plays (--replay: its old name)",
    )
    parser.add_argument("--window-requests", type=int, default=Recording.window_requests)
    parser.add_argument("--warmup-requests", type=int, default=Recording.warmup_requests)
    parser.add_argument(
        "--diagnose", type=int, default=0, metavar="SEEDS", help="trace today's search"
    )
    parser.add_argument(
        "--fixes", action="store_true", help="grade the candidate fixes on both simulators"
    )
    parser.add_argument(
        "--fix",
        action="append",
        choices=sorted(FIXES),
        metavar="NAME",
        help="grade only this candidate fix (repeatable; implies --fixes): " + "; ".join(FIXES),
    )
    parser.add_argument("--queueing-seeds", type=int, default=20)
    parser.add_argument(
        "--grade-seed",
        type=int,
        default=accuracy.GRADE_SEED,
        help="seed of the searches' draws (starts deployed, probe windows): another set of "
        "seeds than the one every rule was chosen on",
    )
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="grade the live search with longer windows and more probes (BUDGETS)",
    )
    args = parser.parse_args()
    accuracy.GRADE_SEED = args.grade_seed
    began = time.monotonic()
    truth = truths_cached(args.truth_requests)
    played = [int(r) for r in args.played.split(",")]
    rec = Recording(window_requests=args.window_requests, warmup_requests=args.warmup_requests)
    second = second_bench(truth, played, rec)
    print(f"{second.name}: {len(second.configs)} configurations, SLO {SLO}, played {played}")
    searches = {
        "today's search": accuracy.tunebench_search(second.rules()),
        "the search before": variant(second.rules(), PreviousSearch),
    }
    for name, strategy in searches.items():
        print_grade(f"{name}, cold", grade(second, strategy, args.seeds), second)
        print_grade(f"{name}, warm", grade(second, strategy, args.seeds, True), second)
    live = live_bench(second, args.truth_requests, rec)
    own_live = own_capacity(live, True, args.truth_requests)
    with swapped(tune_recorded, "noisy_probe", LiveProbes(live, rec)):
        print(f"{live.name}:")
        for name, strategy in searches.items():
            for warm in (False, True):
                kept = BracketSides(strategy, live, own_live)
                result = grade(live, kept, args.seeds, warm)
                print_grade(f"{name}, {'warm' if warm else 'cold'}", result, live)
                print(f"  {'':<30} {kept.against_own()}")
    if args.diagnose:
        print("\nwhy: the recording")
        window_reading(truth, rec, args.truth_requests)
        print(f"\nwhy: today's search on the played recording ({args.diagnose} seeds)")
        own = own_capacity(second, False, args.truth_requests)
        print("    " + probe_bias(second, own))
        trace(second, args.diagnose, own, True)
        print(f"\nwhy: today's search, live probes ({args.diagnose} seeds)")
        own = own_capacity(live, True, args.truth_requests)
        with swapped(tune_recorded, "noisy_probe", LiveProbes(live, rec)):
            print("    " + probe_bias(live, own))
            window_length(live, own)
            trace(live, args.diagnose, own, True)
    if args.budgets:
        budgets(live, rec, args.seeds, own_live)
    if args.fixes or args.fix:
        queueing = queueing_bench()
        benches = (
            (second, args.seeds, tune_recorded.noisy_probe, "DES played"),
            (live, args.seeds, LiveProbes(live, rec), "DES live"),
            (queueing, args.queueing_seeds, tune_recorded.noisy_probe, "queueing played"),
            (recorded_bench(), args.queueing_seeds, tune_recorded.noisy_probe, "recorded CPU grid"),
        )
        print(
            f"\ncandidate fixes on both simulators ({args.seeds} seeds on the DES, "
            f"{args.queueing_seeds} on the queueing law; cold: from 1 req/s, warm: from the "
            "previous configuration's answer):"
        )
        for name, (search, changes) in FIXES.items():
            if args.fix and name not in args.fix:
                continue
            print(name)
            for bench, seeds, probe, short in benches:
                strategy = variant(bench.rules(**changes), search)
                with swapped(tune_recorded, "noisy_probe", probe):
                    for warm in (False, True):
                        sides = BracketSides(strategy, bench, own_live) if bench is live else None
                        result = grade(bench, sides or strategy, seeds, warm)
                        print_grade(f"{short}, {'warm' if warm else 'cold'}", result, bench)
                        if sides is not None:
                            print(f"  {'':<30} {sides.against_own()}")
                            print(f"  {'':<30} {sides.describe()}")
    print(f"({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
