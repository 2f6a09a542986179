"""The truths a capacity search is graded against, and the best any search can score.

benchmarks/capacity_accuracy.py grades against one of: a held-out repeat of the recorded
grid (`held_out_capacity`), a queueing law's own capacity (`analytic_truths`), or a far
longer measurement on the machine that recorded the grid (`long_truths`, recorded by
benchmarks/grid/record_truth.py). The ceiling is how often an oracle answering each deployed
start's own capacity would be right: the between-start spread no search can beat.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from tunebench.numbers import to_float
from tunebench.points.slo import evaluate
from tunebench.recorded.noisy import (
    GridConfig,
    RecordedGrid,
    RecordedStart,
    Truth,
    held_out_capacity,
)
from tunebench.testing.queueing import QueueingGrid, analytic_capacity, start_factor

WITHIN = 0.10  # an answer within +-10% of the truth is right


def ceiling(configs, truths, slo, repeats: list[int]) -> float:
    """The best any strategy can score: a deployment is one of the played starts, each
    with its own capacity (between-start variability; `run_spread`); an oracle that
    answered each start's own capacity exactly would be within 10% of the held-out truth
    this often (starts weighted equally, as `GridConfig.deploy` draws them)."""
    return float(np.mean(list(ceiling_by_config(configs, truths, slo, repeats).values())))


def ceiling_by_config(configs, truths, slo, repeats: list[int]) -> dict[str, float]:
    """`ceiling` per configuration: a grid's mean hides one whose starts all miss."""
    shares = {}
    for config in configs:
        starts = [r for r in repeats if r in config.starts]
        own = [held_out_capacity(config, [r], slo) for r in starts]
        hits = [
            truths[config.label].within(None if o.kind == "below" else o.rate, WITHIN)
            for o in own
            if o is not None
        ]
        shares[config.label] = float(np.mean(hits)) if hits else 0.0
    return shares


def analytic_truths(law: QueueingGrid) -> dict[str, Truth]:
    """The law's capacity of each configuration at its nominal service rate; beyond the
    client's top rate only "at least the top rate" can be known."""
    out = {}
    for config in law.configs:
        rate = analytic_capacity(config, law)
        out[config.label] = (
            Truth(rate, "exact") if rate < law.top_rate else Truth(law.top_rate, "at-least")
        )
    return out


def analytic_ceiling(law: QueueingGrid, truths: dict[str, Truth], repeats: list[int]) -> float:
    """How often the deployed start's own capacity (the law's, at that start's service
    factor) is within 10% of the configuration's truth: the best any search can score."""
    shares = []
    for config in law.configs:
        own = [analytic_capacity(config, law, start_factor(law, config.label, r)) for r in repeats]
        shares.append(float(np.mean([truths[config.label].within(o, WITHIN) for o in own])))
    return float(np.mean(shares))


def decode_ms(start: RecordedStart) -> float | None:
    """A start's time per output token at its two lowest rates (the median of their mean
    inter-token latency): at light load a sequence is mostly decoded alone, so this is the
    speed the machine ran this start at, read from the start's own points. Two starts of
    one configuration on a steady machine give the same figure; where it differs, the
    machine's speed changed between them (and with it the capacity), not the method."""
    values = [to_float(w.row.get("itl_mean_ms")) for w in start.windows[:2]]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def speed_by_start(starts: list[RecordedStart]) -> str:
    return ", ".join(f"{ms:.2f}" if (ms := decode_ms(s)) is not None else "n/a" for s in starts)


def long_truths(
    runs: list[Path], configs: list[GridConfig], slo: dict
) -> tuple[dict[str, Truth], dict[str, str]]:
    """Each configuration's truth from a far longer measurement (benchmarks/grid/
    record_truth.py: server starts of its own, windows of ~300 requests at rates 10% apart
    around its knee, where the crossing between the two rates around it moves the answer by
    less than 5%): every long start of it in `runs` pooled, rate by rate. A configuration no
    truth run measured (its played starts never crossed the SLO: capped by the client's top
    rate, or below the lowest rate) keeps the bound its played starts pooled give. Also, per
    measured configuration, what its truth rests on: the pooled windows around it, each long
    start's own capacity, and every window's SLO ratio (a rate that passes again above the
    first miss is then in view: the truth is the sustained rule's, not a clean knee). A long
    start with a window its machine watch flagged "machine speed changed" is set aside: the
    truth rests on unflagged starts only, and a configuration with none left is not graded."""
    labels = {c.label: c for c in configs}
    long_starts: dict[str, list[RecordedStart]] = {}
    set_aside: dict[str, list[str]] = {}  # long starts recorded while the machine moved
    for run in runs:
        for config in RecordedGrid(run).configs:
            if config.label not in labels:
                continue
            for repeat in sorted(config.starts):
                start = config.starts[repeat]
                moved = next((w for w in start.windows if w.drift), None)
                if moved is None:
                    long_starts.setdefault(config.label, []).append(start)
                else:
                    set_aside.setdefault(config.label, []).append(
                        f"{run.name} start {repeat} at {moved.target:g} req/s: {moved.drift}"
                    )
    for label, why in set_aside.items():
        left = len(long_starts.get(label, []))
        print(
            f"  truth {label}: {len(why)} long start(s) set aside, flagged by the machine watch "
            f"({left} left): " + " | ".join(why)
        )
    truths: dict[str, Truth] = {}
    brackets: dict[str, str] = {}
    for label, starts in long_starts.items():
        pooled = replace(labels[label], starts={i + 1: s for i, s in enumerate(starts)})
        truth = held_out_capacity(pooled, sorted(pooled.starts), slo)
        if truth is None:
            continue
        truths[label] = truth
        requests: dict[float, int] = {}
        for start in starts:
            for window in start.windows:
                requests[window.target] = requests.get(window.target, 0) + window.requests
        below = [t for t in requests if t <= truth.rate]
        above = [t for t in requests if t > truth.rate]
        around = ([max(below)] if below else []) + ([min(above)] if above else [])
        said = " and ".join(f"{t:g} req/s ({requests[t]} requests)" for t in around)
        each = [held_out_capacity(pooled, [r], slo) for r in sorted(pooled.starts)]
        own = ", ".join(
            f"{t.rate:.3g}" if t.kind == "exact" else f"{t.kind} {t.rate:.3g}"
            for t in each
            if t is not None
        )
        ratios = " | ".join(
            ", ".join(
                f"{w.target:g}: {evaluate(w.row, [], slo)['slo_ratio']:.2f}" for w in start.windows
            )
            for start in starts
        )
        brackets[label] = (
            (f"between {said}" if truth.kind == "exact" else f"only bounded: {said}")
            + f"; {len(starts)} long start(s), each alone: {own} req/s"
            + f"; ms per output token at its lowest rates, per start: {speed_by_start(starts)}"
            + f"; SLO ratio by rate, per start: {ratios}"
        )
    for config in configs:
        if config.label in set_aside and config.label not in long_starts:
            continue  # every long start moved: no truth of record, the configuration ungraded
        if config.label not in truths:
            bound = held_out_capacity(config, sorted(config.starts), slo)
            if bound is not None and bound.kind == "exact":
                sys.exit(
                    f"--truth: no truth run measured {config.label}, whose capacity is "
                    "measurable; record it with benchmarks/grid/record_truth.py"
                )
            if bound is not None:
                truths[config.label] = bound
    return truths, brackets
