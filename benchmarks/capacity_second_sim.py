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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import benchmarks.capacity_accuracy as accuracy  # noqa: E402
import benchmarks.grid.truths as truth_rules  # noqa: E402
import tunebench.points.capacity as capacity_module  # noqa: E402
import tunebench.tune.recorded as tune_recorded  # noqa: E402
from benchmarks.grid.search_variants import (  # noqa: E402
    FIXES,
    OVERLOAD,
    PreviousSearch,
    swapped,
    variant,
)
from tunebench.points import client_limit  # noqa: E402
from tunebench.points.capacity import (  # noqa: E402
    MAX_WINDOW_FACTOR,
    CapacitySearch,
    probe_seconds,
)
from tunebench.points.columns import SERVER_COLUMNS  # noqa: E402
from tunebench.points.slo import evaluate  # noqa: E402
from tunebench.points.sustained import RatePoint, sustained_capacity  # noqa: E402
from tunebench.recorded.noisy import (  # noqa: E402
    GridConfig,
    RecordedGrid,
    RecordedStart,
    Truth,
    held_out_capacity,
)
from tunebench.store.manifest import ConfigStatus, RunKind  # noqa: E402
from tunebench.store.run import RunStore  # noqa: E402
from tunebench.testing.batching_sim import (  # noqa: E402
    Engine,
    StepCosts,
    Workload,
    poisson_arrivals,
    serve,
    simulate,
    start_speed,
)
from tunebench.testing.queueing import make_queueing_grid, sharp_knee_grid  # noqa: E402
from tunebench.tune.recorded import SearchRules  # noqa: E402

SEQS = (1, 2, 4, 8, 16)
TOKENS = (32, 64, 128, 512)
# vLLM V1's defaults for an API server on a small device; they run into the KV cache
# (256 sequences of 96 tokens do not fit 4096 tokens), which the grid's own never do.
DEFAULTS = {"max-num-seqs": 256, "max-num-batched-tokens": 2048}
SLO_MS, QUANTILE = 150.0, 0.9
SLO = {"ttft_ms": {"p90": SLO_MS}}
CACHE = Path(tempfile.gettempdir()) / "tunebench-second-sim"
TRUTH_REQUESTS = 20_000  # --truth-requests


@dataclass(frozen=True)
class Recording:
    """How the grid is recorded: rates around each configuration's truth, windows of
    ~`window_requests` after a warm-up of `warmup_requests`, on `repeats` server starts."""

    rates: int = 5
    low: float = 0.5  # x the truth
    high: float = 1.6
    window_requests: int = 60
    warmup_requests: int = 20
    repeats: int = 3
    speed_sd: float = 0.04


def grid_engines(costs: StepCosts = StepCosts()) -> list[tuple[str, dict[str, int], Engine]]:
    defaults = Engine(DEFAULTS["max-num-seqs"], DEFAULTS["max-num-batched-tokens"], costs)
    out = [("defaults", {}, defaults)]
    for seqs in SEQS:
        for tokens in TOKENS:
            args = {"max-num-seqs": seqs, "max-num-batched-tokens": tokens}
            out.append((f"mns{seqs}-mnbt{tokens}", args, Engine(seqs, tokens, costs)))
    return out


# -- the truth ------------------------------------------------------------------------------


def long_p90(engine: Engine, rate: float, count: int, seed: int) -> float:
    """TTFT p90 (ms) of one long run at `rate`, its first tenth dropped (the queue's ramp
    from empty). Every rate scales the same arrival draws (common random numbers), so the
    curve over rates is smooth and its crossing is not moved by draws."""
    served = simulate(engine, rate, count, seed)
    return float(np.quantile(served.tail(count // 10).ttft_ms, QUANTILE))


def true_capacity(engine: Engine, count: int, seed: int = 0) -> tuple[float, list[list[float]]]:
    """The highest rate whose long-run TTFT p90 meets the SLO, and the (rate, p90) it rests
    on: a coarse geometric scan (a tenth of the requests) finds the knee within 20%, then 9
    rates 2.5% apart across it at `count` requests each; the crossing is linear between the
    last rate that met it and the first that missed (a running maximum, as
    `sustained_capacity` takes it)."""
    coarse = max(count // 10, 1000)
    rate, passed = 0.25, None
    while rate < 2000 and long_p90(engine, rate, coarse, seed) <= SLO_MS:
        passed, rate = rate, rate * 1.2
    low = passed if passed is not None else rate / 4
    curve: list[list[float]] = []
    for _ in range(8):  # widen until the fine grid holds the crossing (coarse draws can miss)
        rates = np.linspace(low, rate, 9)
        values = np.maximum.accumulate([long_p90(engine, float(r), count, seed) for r in rates])
        curve = [[float(r), float(v)] for r, v in zip(rates, values)]
        if values[0] > SLO_MS:
            low, rate = low / 1.2, low
        elif values[-1] <= SLO_MS:
            low, rate = rate, rate * 1.2
        else:
            break
    else:
        raise RuntimeError(f"no crossing found for {engine}")
    i = int(np.argmax(values > SLO_MS))
    (r0, v0), (r1, v1) = curve[i - 1], curve[i]
    return r0 + (SLO_MS - v0) / (v1 - v0) * (r1 - r0), curve


def truths_cached(count: int, costs: StepCosts = StepCosts()) -> dict[str, dict[str, Any]]:
    """Every configuration's truth, computed once per simulator setting and request count."""
    engines = grid_engines(costs)
    key = json.dumps(
        [count, SLO_MS, QUANTILE, [(label, asdict(e)) for label, _, e in engines]],
        sort_keys=True,
        default=str,
    )
    path = CACHE / f"truth-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        return json.loads(path.read_text())
    out = {}
    for label, _args, engine in engines:
        began = time.monotonic()
        rate, curve = true_capacity(engine, count)
        out[label] = {"rate": rate, "curve": curve}
        print(f"  truth {label:<16} {rate:7.3f} req/s ({time.monotonic() - began:.0f} s)")
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return out


# -- the recording --------------------------------------------------------------------------


def window_rates(knee: float, rec: Recording) -> list[float]:
    return [float(r) for r in np.geomspace(rec.low * knee, rec.high * knee, rec.rates)]


def start_seed(label: str, repeat: int, salt: int = 0) -> int:
    return int.from_bytes(hashlib.sha256(f"{label}|{repeat}|{salt}".encode()).digest()[:4], "big")


def record_window(
    engine: Engine, rate: float, rec: Recording, seed: int
) -> tuple[float, list[dict[str, Any]]]:
    """One window from an empty server: Poisson arrivals for the warm-up's length, then
    for the window's (~`window_requests` at `rate`), then none (the client stops sending;
    what is in flight finishes). Returns the window's seconds and its requests."""
    warmup_s, window_s = rec.warmup_requests / rate, rec.window_requests / rate
    arrivals = poisson_arrivals(rate, int(3 * (rec.warmup_requests + rec.window_requests)), seed)
    arrivals = arrivals[arrivals < warmup_s + window_s]
    served = serve(engine, arrivals, Workload())
    skip = int(np.searchsorted(arrivals, warmup_s))
    return window_s, served.tail(skip).records(-warmup_s)


def make_batching_grid(
    root: Path,
    knees: dict[str, float],
    rec: Recording = Recording(),
    name: str = "batching",
    costs: StepCosts = StepCosts(),
) -> RunStore:
    """The grid as a recorded run (points.csv, requests/, repeats = server starts) whose
    windows sit around each configuration's truth `knees[label]`."""
    engines = [e for e in grid_engines(costs) if e[0] in knees]
    store = RunStore.create(
        Path(root),
        RunKind.SWEEP,
        name,
        spec={"name": name, "slo": SLO},
        versions={},
        host={},
        deployment_kind="synthetic",
        varied_args=sorted({k for _, args, _ in engines for k in args}),
    )
    clock = 1_800_000_000.0
    with store.running("synthetic"):
        for index, (label, args, _) in enumerate(engines, start=1):
            store.update_config(
                f"c{index}", label=label, args=args, status=ConfigStatus.COMPLETE, effective={}
            )
        for repeat in range(1, rec.repeats + 1):  # starts alternate, as a recording does
            for index, (label, args, engine) in enumerate(engines, start=1):
                clock += 60.0  # a deployment
                started = engine.with_speed(start_speed(start_seed(label, repeat), rec.speed_sd))
                for k, rate in enumerate(window_rates(knees[label], rec)):
                    seconds, requests = record_window(
                        started, rate, rec, start_seed(label, repeat, k + 1)
                    )
                    _add_window(
                        store, f"c{index}", label, args, rate, repeat, seconds, requests, clock
                    )
                    clock += seconds + 2.0  # a load point's overhead
    return store


def _add_window(
    store: RunStore,
    config_id: str,
    label: str,
    args: dict[str, int],
    rate: float,
    repeat: int,
    seconds: float,
    requests: list[dict[str, Any]],
    clock: float,
) -> None:
    for r in requests:
        r["start_time"] += clock
        r["end_time"] += clock
    point_id = f"poisson-{rate:.4g}"
    store.add_requests(config_id, point_id, requests, repeat=repeat)
    ttft = np.array([r["ttft_ms"] for r in requests])
    itl = np.array([r["itl_ms"] for r in requests])
    e2e = np.array([r["e2e_s"] for r in requests])
    store.add_point(
        {
            "run_id": store.run_id,
            "config_id": config_id,
            "config_label": label,
            "point_id": point_id,
            "load_kind": "poisson",
            "target": rate,
            "repeat": repeat,
            **args,
            "achieved_rps": len(requests) / seconds,
            "requests_ok": len(requests),
            "requests_failed": 0,
            "duration_s": seconds,
            "ttft_mean_ms": float(ttft.mean()),
            **{f"ttft_p{p}_ms": float(np.percentile(ttft, p)) for p in (50, 90, 95, 99)},
            "itl_p50_ms": float(np.median(itl)),
            "itl_mean_ms": float(itl.mean()),
            "e2e_p50_s": float(np.median(e2e)),
            "e2e_p95_s": float(np.percentile(e2e, 95)),
            "output_tok_s": len(requests) * Workload().output_tokens / seconds,
            "prompt_tokens_mean": Workload().prompt_tokens,
            "output_tokens_mean": Workload().output_tokens,
            **{c: None for c in SERVER_COLUMNS},
            "server_metrics": "absent",
            "valid": True,
            "invalid_reason": "",
            "start_time": clock,
            "end_time": clock + seconds,
        }
    )


# -- grading --------------------------------------------------------------------------------


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


# -- why it over-estimates ------------------------------------------------------------------


def own_capacity(bench: Bench, live: bool) -> dict[tuple[str, int], float]:
    """What a perfect search of each deployed start would answer: on the played recording,
    the start's own windows' crossing (the played server has nothing else); live, the
    start's own long-run capacity."""
    if live:
        starts = start_truths_cached(TRUTH_REQUESTS, bench.engines)
        return {(c.label, r): starts[f"{c.label}|{r}"] for c in bench.configs for r in c.starts}
    slo = bench.grid.slo
    out = {}
    for c in bench.configs:
        for r in c.starts:
            found = held_out_capacity(c, [r], slo)
            if found is not None:
                out[(c.label, r)] = found.rate
    return out


def trace(bench: Bench, seeds: int, own: dict[tuple[str, int], float], show: bool) -> None:
    """Today's search, probe by probe: where its answer comes from, against the truth and
    against the deployed start's own capacity (`own`)."""
    bench.use()
    rows: list[dict[str, Any]] = []
    probe = tune_recorded.noisy_probe

    def spy(*args: Any, **kwargs: Any) -> dict[str, Any]:
        rows.append(probe(*args, **kwargs))
        return rows[-1]

    rng = np.random.default_rng(accuracy.GRADE_SEED)  # as accuracy.grade draws
    found: dict[str, list[float]] = {k: [] for k in TRACE_KEYS}
    with swapped(tune_recorded, "noisy_probe", spy):
        for seed in range(seeds):
            for config in bench.configs:
                start = config.deploy(bench.played, rng)
                rows.clear()
                search = tune_recorded.search_noisy(
                    start, bench.grid.slo, 1.0, False, bench.rules(), accuracy.COSTS, rng
                ).search
                truth = bench.truths[config.label].rate
                mine = own.get((config.label, start.repeat), float("nan"))
                _collect(found, search, rows, truth, mine)
                if show and seed == 0:
                    probes = " ".join(
                        f"{r['target'] / truth:.2f}x:{r['requests_ok']}:{r['ttft_p90_ms']:.0f}"
                        + ("" if r["slo_met"] else "X")
                        for r in rows
                    )
                    answer = (search.capacity or 0.0) / truth - 1
                    print(
                        f"    {config.label:<15} answer {answer:+5.0%} (own "
                        f"{mine / truth - 1:+4.0%}) converged {search.converged!s:<5} | {probes}"
                    )
    a = {k: np.asarray(v, dtype=float) for k, v in found.items()}
    chord, converged = a["chord"] > 0, a["converged"] > 0
    versus_own = a["answer"] / a["own"]
    print(
        f"    answer / truth: median {np.nanmedian(a['answer']):.3f} = own capacity / truth "
        f"{np.nanmedian(a['own']):.3f} x answer / own {np.nanmedian(versus_own):.3f} (within "
        f"10% of own: {np.nanmean(np.abs(versus_own - 1) <= 0.1):.0%})"
    )
    print(
        f"    answers from the chord between the bracket's ends: {chord.mean():.0%} "
        f"(answer / truth {np.nanmedian(a['answer'][chord]):.3f}); converged "
        f"{converged.mean():.0%} (answer / truth {np.nanmedian(a['answer'][converged]):.3f}), "
        f"unconverged {np.nanmedian(a['answer'][~converged]):.3f}"
    )
    print(
        f"    final bracket: lower end / own {np.nanmedian(a['lower']):.2f} (its ratio "
        f"{np.nanmedian(a['lower_ratio']):.2f}; above own in {np.nanmean(a['lower'] > 1):.0%}), "
        f"upper end / own {np.nanmedian(a['upper']):.2f} (its ratio "
        f"{np.nanmedian(a['upper_ratio']):.2f}; > {OVERLOAD:g} in "
        f"{np.nanmean(a['upper_ratio'] > OVERLOAD):.0%}), width x"
        f"{np.nanmedian(a['upper'] / a['lower']):.2f}"
    )
    near = (a["probe_rate"] >= 1.0) & (a["probe_rate"] <= 1.25)
    print(
        f"    probes: median {np.median(a['probes']):.0f} per search, "
        f"{np.median(a['bracketing']):.0f} of them before the first miss; "
        f"{np.median(a['requests']):.0f} requests per probe (median); probes at 1.00-1.25x "
        f"own capacity passed {np.mean(a['probe_met'][near]):.0%} ({near.sum()} probes)"
    )


TRACE_KEYS = (
    "answer own chord converged lower upper lower_ratio upper_ratio probes bracketing "
    "requests probe_rate probe_met"
).split()


def _collect(
    found: dict[str, list[float]],
    search: CapacitySearch,
    rows: list[dict[str, Any]],
    truth: float,
    mine: float,
) -> None:
    lower, upper = search.lower, search.upper
    answer = search.capacity
    found["answer"].append((answer or 0.0) / truth)
    found["own"].append(mine / truth)
    found["chord"].append(float(answer is not None and lower is not None and answer != lower.rate))
    found["converged"].append(float(search.converged))
    found["lower"].append(lower.rate / mine if lower else np.nan)
    found["upper"].append(upper.rate / mine if upper else np.nan)
    found["lower_ratio"].append(lower.ratio if lower and lower.ratio else np.nan)
    found["upper_ratio"].append(upper.ratio if upper and upper.ratio else np.nan)
    found["probes"].append(len(search.probes))
    misses = [i for i, p in enumerate(search.probes) if not p.slo_met]
    found["bracketing"].append(misses[0] if misses else len(search.probes))
    for row in rows:
        found["requests"].append(row["requests_ok"])
        found["probe_rate"].append(row["target"] / mine)
        found["probe_met"].append(float(bool(row["slo_met"])))


def probe_bias(bench: Bench, own: dict[tuple[str, int], float], repeats: int = 40) -> str:
    """One probe's log SLO ratio at each start's own capacity, window sized as when
    narrowing: the noise model assumes it centred on 0 with sd `noise` (0.2)."""
    rng = np.random.default_rng(3)
    logs = []
    for config in bench.configs:
        for r in bench.played:
            rate = own.get((config.label, r))
            if rate is None or r not in config.starts:
                continue
            seconds = probe_seconds(rate, 10.0, QUANTILE)
            for _ in range(repeats):
                row = tune_recorded.noisy_probe(
                    config.starts[r], rate, seconds, bench.grid.slo, rng
                )
                if row.get("slo_ratio"):
                    logs.append(np.log(row["slo_ratio"]))
    values = np.asarray(logs)
    return (
        f"one probe at the start's own capacity: median ratio {np.exp(np.median(values)):.2f}, "
        f"passes {np.mean(values <= 0):.0%}, sd of log ratio {values.std():.2f} (the noise model: "
        f"centred on 1, sd {SearchRules().noise:g})"
    )


def window_reading(truth: dict[str, dict[str, Any]], rec: Recording, count: int) -> None:
    """The recording's own bias, in two parts: the five rates read from long runs (the
    interpolation rule's error alone), and from the recorded windows' length (~60
    requests after a warm-up from an empty server) at the truth itself."""
    ideal, short = [], []
    rng = np.random.default_rng(5)
    for label, _, engine in grid_engines():
        knee = truth[label]["rate"]
        points = []
        for rate in window_rates(knee, rec):
            p90 = long_p90(engine, rate, count // 4, 0)
            points.append(RatePoint(rate, p90 <= SLO_MS, p90 / SLO_MS))
        found = sustained_capacity(points)
        if found is not None and found.kind == "exact":
            ideal.append(found.rate / knee)
        for _ in range(20):
            _, requests = record_window(engine, knee, rec, int(rng.integers(2**32)))
            short.append(np.percentile([r["ttft_ms"] for r in requests], 90) / SLO_MS)
    within = np.mean(np.abs(np.asarray(ideal) - 1) <= 0.1)
    print(
        f"    the 5 recorded rates read from long runs ({count // 4} requests): crossing / truth "
        f"median {np.median(ideal):.3f}, within 10%: {within:.0%} (the 1/ratio rule between "
        f"rates {(rec.high / rec.low) ** (1 / (rec.rates - 1)):.2f}x apart is not the problem)"
    )
    print(
        f"    a recorded window ({rec.window_requests} requests after {rec.warmup_requests}) "
        f"at the truth itself: median p90 / limit {np.median(short):.2f}, passes "
        f"{np.mean(np.asarray(short) <= 1):.0%} (a long run: 1.00, 50%)"
    )


def window_length(bench: Bench, own: dict[tuple[str, int], float]) -> None:
    """Live probes at each start's own capacity, by window length: near the knee latency
    comes in busy periods (the queue's excursions) that a short window mostly misses and
    now and then catches whole, so its p90 is low more often than not, and scattered."""
    for count in (60, 144, 600, 2000):
        rng = np.random.default_rng(3)
        logs = []
        for config in bench.configs:
            for r in bench.played:
                rate = own[(config.label, r)]
                for _ in range(10):
                    row = tune_recorded.noisy_probe(
                        config.starts[r], rate, count / rate, bench.grid.slo, rng
                    )
                    logs.append(np.log(row["slo_ratio"]))
        v = np.asarray(logs)
        print(
            f"    {count:>5} requests at the start's own capacity: median ratio "
            f"{np.exp(np.median(v)):.2f}, passes {np.mean(v <= 0):.0%}, sd of log ratio "
            f"{v.std():.2f}"
        )


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
    global TRUTH_REQUESTS
    TRUTH_REQUESTS = args.truth_requests
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
    own_live = own_capacity(live, True)
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
        own = own_capacity(second, False)
        print("    " + probe_bias(second, own))
        trace(second, args.diagnose, own, True)
        print(f"\nwhy: today's search, live probes ({args.diagnose} seeds)")
        own = own_capacity(live, True)
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
