"""How long a sweep will take, for --dry-run: server starts plus every point's budget."""

from __future__ import annotations

from tunebench import kinds
from tunebench.load.guidellm import expected_benchmarks
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import Plan

# Rough costs measured on a 2-core CPU box (docs/benchmarks.md).
LOAD_PROCESS_S = 15.0  # a GuideLLM worker's start per configuration
POINT_OVERHEAD_S = 3.0
TYPICAL_PROBES = 5  # a capacity search's probes, warm or cold (benchmarks/tune_efficiency.py)


def estimate_seconds(spec: SweepSpec, plan: Plan) -> float:
    """Every configuration, every repeat: a server start, a load process, its points (a
    capacity search only in the first repeat, as sweep/run.py plans it)."""
    start = kinds.kind_of(spec).start_s + LOAD_PROCESS_S
    total = 0.0
    for repeat in range(1, plan.repeats + 1):
        per_config = start
        for point in plan.points:
            if point.search and repeat > 1:
                continue
            seconds = point.max_seconds or (point.max_requests or 100) * 0.5
            count = (
                min(point.search.max_probes, TYPICAL_PROBES)
                if point.search
                else expected_benchmarks(point)
            )
            per_config += count * (seconds + POINT_OVERHEAD_S)
        total += per_config * len(plan.configs)
    return total
