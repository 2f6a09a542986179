"""The metrics `compare` knows: per-request percentiles, rates and the error rate, each with
the column it reads and the method its interval needs (analysis/compare.py)."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.errors import UsageError


@dataclass(frozen=True)
class CompareMetric:
    name: str
    label: str
    column: str  # in points.csv (or computed, for error_rate)
    kind: str  # quantile | rate | proportion
    sample: str | None = None  # per-request column, for quantile metrics
    quantile: float | None = None
    higher_is_better: bool = False
    amount: str | None = None  # rate metrics: "tokens" | "requests"


def _q(name: str, label: str, column: str, sample: str, q: float) -> CompareMetric:
    return CompareMetric(name, label, column, "quantile", sample, q)


METRICS: dict[str, CompareMetric] = {
    m.name: m
    for m in (
        _q("ttft_p50", "TTFT p50 ms", "ttft_p50_ms", "ttft_ms", 0.50),
        _q("ttft_p95", "TTFT p95 ms", "ttft_p95_ms", "ttft_ms", 0.95),
        _q("ttft_p99", "TTFT p99 ms", "ttft_p99_ms", "ttft_ms", 0.99),
        _q("itl_p50", "ITL p50 ms", "itl_p50_ms", "itl_ms", 0.50),
        _q("itl_p95", "ITL p95 ms", "itl_p95_ms", "itl_ms", 0.95),
        _q("tpot_p50", "TPOT p50 ms", "tpot_p50_ms", "tpot_ms", 0.50),
        _q("e2e_p50", "e2e p50 s", "e2e_p50_s", "e2e_s", 0.50),
        _q("e2e_p95", "e2e p95 s", "e2e_p95_s", "e2e_s", 0.95),
        CompareMetric(
            "output_tok_s",
            "output tok/s",
            "output_tok_s",
            "rate",
            higher_is_better=True,
            amount="tokens",
        ),
        CompareMetric(
            "achieved_rps",
            "achieved req/s",
            "achieved_rps",
            "rate",
            higher_is_better=True,
            amount="requests",
        ),
        CompareMetric("error_rate", "error rate %", "error_rate", "proportion"),
    )
}
DEFAULT_METRICS = (
    "ttft_p50",
    "ttft_p95",
    "itl_p50",
    "itl_p95",
    "e2e_p95",
    "output_tok_s",
    "achieved_rps",
    "error_rate",
)


def resolve_metrics(names: list[str] | None) -> list[CompareMetric]:
    if not names:
        return [METRICS[n] for n in DEFAULT_METRICS]
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise UsageError(f"--metric {unknown[0]!r} is unknown; use one of {', '.join(METRICS)}")
    return [METRICS[n] for n in names]
