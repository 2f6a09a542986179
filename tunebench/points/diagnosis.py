"""Why a configuration is slow: ranked findings from the numbers every point already holds.

Each rule of `RULES` reads a point's row (client and server columns: queue depth and time,
running requests, KV-cache usage, preemptions, prefill and decode time, speculative
acceptance, the client verdict) and the configuration's limits (max-num-seqs,
max-num-batched-tokens), and either stays silent or returns a finding: what limits the
point, the numbers that show it, and which argument to turn which way. The rules and their
thresholds are this table and `THRESHOLDS`; docs/diagnosis.md lists them in words.

Order: a client-bound point is said first (its numbers describe the load generator, so the
server rules are not asked); then the rules by `rank` (a cause before its symptom: a full KV
cache or the max-num-seqs cap before "requests queue"), then by strength. A configuration's
findings are its points' findings, each once, with the point where it was strongest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from tunebench.numbers import to_float
from tunebench.points import trust
from tunebench.points.machine import is_drift

# The numbers the rules compare against (documented in docs/diagnosis.md).
THRESHOLDS = {
    # requests waiting in the server on average (Little's law: queue time / window): below
    # this, queueing is noise at the scrape's resolution
    "queue_depth": 0.5,
    # KV-cache usage at its peak that counts as full
    "kv_full": 0.90,
    # scheduler steps a prompt needs (prompt / max-num-batched-tokens) from which chunked
    # prefill limits: each chunk costs about one engine step of every running request
    "prefill_steps": 4,
    # speculative decoding: accepted share of drafted tokens below which drafting costs more
    # than it saves
    "spec_acceptance": 0.30,
}


@dataclass(frozen=True)
class Facts:
    """What a rule reads: one point's row and its configuration's limits."""

    row: dict[str, Any]
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    kv_capacity_tokens: int | None = None
    client_cpus: str | None = None  # the spec's load.client_cpus: the client's own cores

    def number(self, column: str) -> float | None:
        value = to_float(self.row.get(column))
        return None if value is None or math.isnan(value) else value


@dataclass(frozen=True)
class Finding:
    rule: str
    cause: str  # what limits the point, with its evidence (the numbers)
    suggestion: str  # which argument, which way
    strength: float  # how far past the threshold (for ranking within a rule)


@dataclass(frozen=True)
class Rule:
    id: str
    rank: int
    reads: str  # the columns and limits it reads (for the docs and `explain`)
    judge: Callable[[Facts], Finding | None]


def _client_bound(f: Facts) -> Finding | None:
    if not trust.flag(f.row.get("client_limited")):
        return None
    reason = str(f.row.get("client_limited_reason") or "client-limited")
    if f.client_cpus:  # it has cores of its own already: they are too few for this load
        advice = (
            f"the client already has cores of its own (load.client_cpus {f.client_cpus!r}): "
            "give it more of them, drive fewer streams, or use load.driver vllm-bench (a "
            "lighter client)"
        )
    else:
        advice = (
            "give the client cores of its own (load.client_cpus with deployment.cpus), or "
            "use load.driver vllm-bench"
        )
    return Finding(
        "client-bound",
        f"the load generator held this point back ({reason}): its latencies and "
        "throughput describe the client, not the server",
        advice + "; load.driver cross-check tells which side is bound",
        1.0,
    )


def _queue(f: Facts) -> float | None:
    depth = f.number("queue_depth_mean")
    return depth if depth is not None else f.number("waiting_mean")


def _machine_drift(f: Facts) -> Finding | None:
    moved = [r for r in trust.unverified_reasons(f.row) if is_drift(r)]
    if not moved:
        return None
    return Finding(
        "machine-drift",
        f"{moved[0]}: the point's figures mix two speeds of the machine, so they describe "
        "neither configuration limit",
        "measure again where the machine holds its speed (tunebench check-machine); give the "
        "server and the load generator cores of their own; with repeats, compare sees the spread",
        1.0,
    )


def _kv_limited(f: Facts) -> Finding | None:
    preemptions = f.number("preemptions") or 0
    peak, queue = f.number("kv_usage_max"), _queue(f) or 0
    full = peak is not None and peak >= THRESHOLDS["kv_full"]
    prompt = f.number("prompt_tokens_mean")
    if peak is not None and prompt and f.kv_capacity_tokens:
        # the next waiting request's prompt no longer fits in what is left
        full = full or (1 - peak) * f.kv_capacity_tokens < prompt
    if preemptions <= 0 and not (full and queue >= THRESHOLDS["queue_depth"]):
        return None
    running = f.number("running_max")
    return Finding(
        "kv-limited",
        f"the KV cache ran full: {_pct(peak)} used at peak, {preemptions:g} preemptions, "
        f"{queue:.1f} requests waiting on average"
        + (f" while {running:g} ran" if running is not None else ""),
        "give the KV cache more room (gpu-memory-utilization, or the CPU KV space), shorten "
        "max-model-len, use kv-cache-dtype fp8 where the device supports it, or lower "
        "max-num-seqs so that running requests fit",
        preemptions + queue,
    )


def _scheduler_limited(f: Facts) -> Finding | None:
    queue, running, cap = _queue(f), f.number("running_max"), f.max_num_seqs
    if queue is None or queue < THRESHOLDS["queue_depth"] or running is None or cap is None:
        return None
    if running < cap:
        return None
    peak = f.number("kv_usage_max")
    if peak is not None and peak >= THRESHOLDS["kv_full"]:
        return None  # the KV cache is full too: kv-limited says it
    return Finding(
        "scheduler-limited",
        f"requests wait ({queue:.1f} on average, {_ms(f.number('queue_time_mean_s'))} each) "
        f"while the KV cache is {_pct(peak)} full: {running:g} run, the max-num-seqs cap "
        f"({cap})",
        f"raise max-num-seqs (e.g. to {max(2 * cap, cap + 1)}): the KV cache has room for more",
        queue / cap,
    )


def _prefill_limited(f: Facts) -> Finding | None:
    prompt, budget = f.number("prompt_tokens_mean"), f.max_num_batched_tokens
    prefill, step = f.number("prefill_time_mean_s"), f.number("itl_p50_ms")
    if prompt is None or budget is None or prefill is None or step is None:
        return None
    steps = math.ceil(prompt / budget)
    # the prefill really spans its chunks: at least half an engine step (ITL) per chunk
    if steps < THRESHOLDS["prefill_steps"] or prefill * 1000 < 0.5 * steps * step:
        return None
    # each of those steps also carries the running requests' decodes and waits its turn,
    # so a prefill step is slower than a decode step (ITL): say both, not a product
    return Finding(
        "prefill-limited",
        f"each prompt of {prompt:.0f} tokens is prefilled in {steps} scheduler steps of "
        f"max-num-batched-tokens {budget}: {_ms(prefill)} of prefill per request, "
        f"{_ms(prefill / steps)} per step (a decode step takes {step:.1f} ms), before its "
        f"first token (TTFT p50 {_ms((f.number('ttft_p50_ms') or 0) / 1000)})",
        f"raise max-num-batched-tokens to at least the prompt length ({math.ceil(prompt)}; "
        "more also batches prompts together)",
        prefill * 1000,
    )


def _spec_waste(f: Facts) -> Finding | None:
    rate = f.number("spec_acceptance_rate")
    if rate is None or rate >= THRESHOLDS["spec_acceptance"]:
        return None
    return Finding(
        "speculation-wasted",
        f"speculative decoding accepts {rate:.0%} of the drafted tokens: drafting and "
        "verifying them costs more than they save",
        "lower num_speculative_tokens in speculative-config, try another method (a "
        "draft model or EAGLE where available), or turn it off",
        THRESHOLDS["spec_acceptance"] - rate,
    )


def _queueing(f: Facts) -> Finding | None:
    queue = _queue(f)
    if queue is None or queue < THRESHOLDS["queue_depth"]:
        return None
    return Finding(
        "over-capacity",
        f"requests queue in the server ({queue:.1f} waiting on average, "
        f"{_ms(f.number('queue_time_mean_s'))} each) with no engine limit reached: the load "
        "is beyond what this configuration serves",
        "lower the load or add replicas; if latency matters more than throughput, a lower "
        "max-num-seqs trades queueing for faster steps",
        queue,
    )


RULES: tuple[Rule, ...] = (
    Rule("client-bound", 0, "client_limited, client_limited_reason", _client_bound),
    Rule("machine-drift", 0, "unverified_reason (machine speed changed)", _machine_drift),
    Rule(
        "kv-limited",
        1,
        "preemptions, kv_usage_max, queue_depth_mean, prompt_tokens_mean; KV capacity",
        _kv_limited,
    ),
    Rule(
        "scheduler-limited",
        2,
        "queue_depth_mean, running_max, kv_usage_max; max-num-seqs",
        _scheduler_limited,
    ),
    Rule(
        "prefill-limited",
        3,
        "prompt_tokens_mean, prefill_time_mean_s, itl_p50_ms, ttft_p50_ms; max-num-batched-tokens",
        _prefill_limited,
    ),
    Rule("speculation-wasted", 4, "spec_acceptance_rate", _spec_waste),
    # last: queueing is the symptom of every limit above; said alone only when none applies
    Rule("over-capacity", 9, "queue_depth_mean, queue_time_mean_s", _queueing),
)


def _pct(value: float | None) -> str:
    return "?%" if value is None else f"{value:.0%}"


def _ms(seconds: float | None) -> str:
    return "? ms" if seconds is None else f"{seconds * 1000:.0f} ms"


def _limit(args: dict[str, Any], effective: dict[str, Any], name: str) -> int | None:
    """A scheduler limit from the configuration's args, else what the server reported."""
    underscored = name.replace("-", "_")
    for source in (args, effective, effective.get("non_default_args") or {}):
        value = to_float(source.get(name, source.get(underscored)))
        if value is not None and not math.isnan(value):
            return int(value)
    return None


def client_cores(spec: dict[str, Any] | None) -> str | None:
    """The load generator's own CPUs as the run's spec gives them (load.client_cpus)."""
    load = (spec or {}).get("load") or {}
    cpus = load.get("client_cpus") if isinstance(load, dict) else None
    return str(cpus) if cpus not in (None, "") else None


def facts_for(row: dict[str, Any], config: dict[str, Any], client_cpus: str | None = None) -> Facts:
    args, effective = config.get("args") or {}, config.get("effective") or {}
    capacity = to_float(effective.get("kv_capacity_tokens"))
    return Facts(
        row,
        _limit(args, effective, "max-num-seqs"),
        _limit(args, effective, "max-num-batched-tokens"),
        int(capacity) if capacity and not math.isnan(capacity) else None,
        client_cpus,
    )


def diagnose_point(facts: Facts) -> list[Finding]:
    """A point's findings, ranked; none for a healthy point."""
    client = _client_bound(facts)
    if client is not None:
        return [client]  # the server's columns describe what the client let through
    moved = _machine_drift(facts)
    if moved is not None:
        return [moved]  # two speeds of the machine: no limit of the configuration shows
    found = []
    for rule in RULES:
        finding = rule.judge(facts)
        if finding is not None:
            found.append((rule.rank, -finding.strength, finding))
    if any(rank < 9 for rank, _, _ in found):  # a cause explains the queue: no symptom line
        found = [f for f in found if f[0] < 9]
    return [finding for _, _, finding in sorted(found, key=lambda f: (f[0], f[1]))]


@dataclass(frozen=True)
class ConfigFinding:
    config_id: str
    label: str
    rule: str
    cause: str
    suggestion: str
    points: tuple[str, ...]  # where it fired, each point once (repeats share an id)


def diagnose_run(
    rows: list[dict[str, Any]], configs: list[dict[str, Any]], client_cpus: str | None = None
) -> list[ConfigFinding]:
    """Every configuration's findings, ranked within it (valid points only); `client_cpus`:
    the load generator's own cores (`client_cores` of the run's spec), if it had any."""
    out: list[ConfigFinding] = []
    for config in configs:
        mine = [r for r in rows if r.get("config_id") == config["config_id"] and trust.is_valid(r)]
        by_rule: dict[str, list[tuple[Finding, str]]] = {}
        for row in mine:
            for finding in diagnose_point(facts_for(row, config, client_cpus)):
                by_rule.setdefault(finding.rule, []).append((finding, str(row.get("point_id"))))
        ranks = {rule.id: rule.rank for rule in RULES}
        for rule_id in sorted(by_rule, key=lambda r: ranks[r]):
            hits = by_rule[rule_id]
            strongest = max(hits, key=lambda h: h[0].strength)[0]
            out.append(
                ConfigFinding(
                    config["config_id"],
                    str(config.get("label") or ""),
                    rule_id,
                    strongest.cause,
                    strongest.suggestion,
                    tuple(dict.fromkeys(point for _, point in hits)),
                )
            )
    return out


# Columns only the server's /metrics fill: a configuration none of whose valid points has
# one was never seen from the server side (an imported run, a scrape that failed).
_SERVER_EVIDENCE = ("kv_usage_max", "running_max", "waiting_max", "queue_depth_mean")
CANNOT_DIAGNOSE = "cannot-diagnose"


def blind_spots(rows: list[dict[str, Any]], configs: list[dict[str, Any]]) -> dict[str, str]:
    """config_id -> why it cannot be diagnosed (fail closed: no finding is not "healthy"
    when the rules had nothing to read): no valid point, or no server metrics on any."""
    out: dict[str, str] = {}
    for config in configs:
        mine = [r for r in rows if r.get("config_id") == config["config_id"] and trust.is_valid(r)]
        if not mine:
            out[config["config_id"]] = "no valid measured point to read"
        elif not any(to_float(r.get(c)) is not None for r in mine for c in _SERVER_EVIDENCE):
            out[config["config_id"]] = (
                "no server metrics (an imported run, or /metrics was not scraped): only the "
                "client side was seen"
            )
    return out


# The arg each cause points at, and which way (a tuner's next trial: tune/hints.py).
HINT_DIRECTIONS: dict[str, dict[str, str]] = {
    "scheduler-limited": {"max-num-seqs": "up"},
    "kv-limited": {"max-num-seqs": "down", "max-model-len": "down"},
    "prefill-limited": {"max-num-batched-tokens": "up"},
}


def hint_rules(findings: list[ConfigFinding], config_id: str) -> dict[str, tuple[str, str]]:
    """arg -> (direction, the finding's rule) for a configuration, strongest cause first."""
    out: dict[str, tuple[str, str]] = {}
    for finding in findings:
        if finding.config_id == config_id:
            for arg, way in HINT_DIRECTIONS.get(finding.rule, {}).items():
                out.setdefault(arg, (way, finding.rule))
    return out


def hints(findings: list[ConfigFinding], config_id: str) -> dict[str, str]:
    """arg -> direction suggested by a configuration's findings (for a tuner or a person):
    e.g. {"max-num-seqs": "up"}."""
    return {arg: way for arg, (way, _) in hint_rules(findings, config_id).items()}
