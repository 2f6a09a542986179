"""Re-validate a study's winner: is its lead real, or did the search pick a lucky run?

A study measures each configuration once, so its best trial is the one whose single run
came out highest, and part of that lead can be luck (the winner's curse). After the study,
the best, the runner-up and the baseline are deployed again `repeats` times each, in
alternated order (best, runner-up, baseline, best, ...: a drift of the machine hits all
alike), and each run measures the objective afresh (a capacity search warm-started at the
configuration's own tuned value). The study's own measurements are left out: they chose
the winner, so they are biased towards it.

The gain of the best over each other contender is judged by `compare`, a function of the
two sides' repeated values (the caller passes Welch's t on the logs,
analysis/stats.py `repeats_change`); an interval that includes no change makes the pair
a tie, and a winner whose lead over the runner-up is a tie is reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import optuna

from tunebench.spec.plan import ServerConfig
from tunebench.tune import space as search_space
from tunebench.tune.claims import BASELINE_ATTR
from tunebench.tune.study import TrialOutcome

COMPLETE = optuna.trial.TrialState.COMPLETE


class ChangeLike(Protocol):
    """What `compare` returns: B/A - 1 and its interval (None when not available)."""

    change: float | None
    low: float | None
    high: float | None
    method: str


Compare = Callable[[list[float], list[float]], ChangeLike]


@dataclass
class Contender:
    role: str  # best | runner-up | baseline
    trial: int
    config_id: str
    label: str
    args: dict[str, Any]
    tuned: float  # the study's own value (not used in the verdict)
    values: list[float] = field(default_factory=list)  # the re-validation runs
    failures: list[str] = field(default_factory=list)


def contenders(study: optuna.Study) -> list[Contender]:
    """Best, runner-up (by the first objective) and baseline among deployed complete trials;
    fewer when the study has fewer distinct ones."""
    done = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state == COMPLETE and t.user_attrs.get("deployed") and t.values
    ]
    ranked = sorted(done, key=lambda t: t.values[0], reverse=True)
    chosen: list[tuple[str, optuna.trial.FrozenTrial]] = []
    if ranked:
        chosen.append(("best", ranked[0]))
    if len(ranked) > 1:
        runner = next((t for t in ranked[1:] if not t.user_attrs.get(BASELINE_ATTR)), ranked[1])
        chosen.append(("runner-up", runner))
    baseline = next((t for t in done if t.user_attrs.get(BASELINE_ATTR)), None)
    if baseline is not None and all(t.number != baseline.number for _, t in chosen):
        chosen.append(("baseline", baseline))
    return [
        Contender(
            role,
            t.number,
            str(t.user_attrs.get("config_id") or f"t{t.number}"),
            search_space.label(dict(t.user_attrs.get("param_values") or {})),
            dict(t.user_attrs.get("args") or {}),
            float(t.values[0]),
        )
        for role, t in chosen
    ]


def run_revalidation(
    entries: list[Contender],
    repeats: int,
    measure: Callable[[ServerConfig, Contender], TrialOutcome],
    model: str,
    tokenizer: str | None,
) -> None:
    """Deploy each contender `repeats` times, alternating; fills `values`/`failures`."""
    for repeat in range(1, repeats + 1):
        for entry in entries:
            config = ServerConfig(
                config_id=f"{entry.config_id}-check{repeat}",
                label=f"{entry.role} (trial {entry.trial}) check {repeat}",
                model=model,
                tokenizer=tokenizer,
                args=entry.args,
                varied={"trial": entry.trial, "check": repeat},
            )
            outcome = measure(config, entry)
            if outcome.values and outcome.values[0] is not None:
                entry.values.append(float(outcome.values[0]))
            else:
                entry.failures.append(outcome.reason or "no value measured")


def judge(entries: list[Contender], compare: Compare) -> dict[str, Any]:
    """The re-validation's summary: each contender's values, and the best's gain over each
    other one with its interval; `verdict` "confirmed" or "tie" (the best's lead over the
    runner-up does not hold), or "inconclusive" without enough runs."""
    best = next((e for e in entries if e.role == "best"), None)
    out: dict[str, Any] = {
        "contenders": [
            {
                "role": e.role,
                "trial": e.trial,
                "label": e.label,
                "tuned": e.tuned,
                "values": e.values,
                "failures": e.failures,
            }
            for e in entries
        ],
        "gains": [],
    }
    if best is None:
        out["verdict"] = "inconclusive"
        out["verdict_text"] = "no completed trial to re-validate"
        return out
    for other in entries:
        if other is best:
            continue
        change = compare(other.values, best.values)
        available = change.low is not None and change.high is not None
        out["gains"].append(
            {
                "over": other.role,
                "trial": other.trial,
                "gain": change.change,
                "low": change.low,
                "high": change.high,
                "method": change.method,
                "holds": bool(available and change.low is not None and change.low > 0),
                "available": available,
            }
        )
    runner = next((g for g in out["gains"] if g["over"] == "runner-up"), None)
    second = next((e for e in entries if e.role == "runner-up"), None)
    same = {*best.values, *(second.values if second else [])}
    if runner is not None and runner["available"] and len(same) == 1:
        # every run of both gave one value: both sit at a cap (max_rate) or the measure
        # cannot vary; there is no lead to confirm, and no spread to put an interval on
        out["verdict"] = "tie"
        out["verdict_text"] = (
            f"tie: every re-run of the best and the runner-up gave {same.pop():.4g} (both at "
            "max_rate, or a measure that does not vary): no lead to show"
        )
        return out
    if runner is None or not runner["available"]:
        out["verdict"] = "inconclusive"
        out["verdict_text"] = (
            "inconclusive: the best needs 2 or more successful runs beside another contender's"
        )
    elif runner["holds"]:
        out["verdict"] = "confirmed"
        out["verdict_text"] = (
            f"confirmed: trial {best.trial} beats the runner-up by {runner['gain']:+.1%} "
            f"[{runner['low']:+.1%}, {runner['high']:+.1%}]"
        )
    else:
        out["verdict"] = "tie"
        out["verdict_text"] = (
            f"tie: trial {best.trial}'s lead over the runner-up (trial {runner['trial']}) does "
            f"not hold: {runner['gain']:+.1%} [{runner['low']:+.1%}, {runner['high']:+.1%}]"
        )
    return out
