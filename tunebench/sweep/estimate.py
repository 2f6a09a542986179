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
    per_config = kinds.kind_of(spec).start_s + LOAD_PROCESS_S
    for point in plan.points:
        seconds = point.max_seconds or (point.max_requests or 100) * 0.5
        count = (
            min(point.search.max_probes, TYPICAL_PROBES)
            if point.search
            else expected_benchmarks(point)
        )
        per_config += count * (seconds + POINT_OVERHEAD_S)
    return per_config * len(plan.configs)
