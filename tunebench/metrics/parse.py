"""Prometheus text -> a flat snapshot of the catalogue's metrics.

Parsing uses prometheus_client's parser. Series of the same metric that differ only in
labels (engine, model_name, finished_reason, ...) are combined as the catalogue says.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from tunebench.metrics.catalogue import CACHE_CONFIG_INFO, CATALOGUE


@dataclass(frozen=True)
class Snapshot:
    time: float  # epoch seconds when the scrape returned
    values: dict[str, float]  # catalogue key -> value; absent when the server lacks it
    cache_config: dict[str, str] = field(default_factory=dict)


class MetricsParseError(ValueError):
    pass


def parse_samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """All samples by sample name; raises MetricsParseError on text that is not Prometheus."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[sample.name].append((dict(sample.labels), float(sample.value)))
    except (ValueError, IndexError, TypeError) as exc:
        raise MetricsParseError(f"not Prometheus text: {exc}") from None
    return samples


def snapshot_from_text(text: str, time: float) -> Snapshot:
    samples = parse_samples(text)
    values: dict[str, float] = {}
    for metric in CATALOGUE:
        for name in metric.names:
            series = samples.get(name)
            if series:
                numbers = [value for _, value in series]
                if metric.combine == "mean":
                    values[metric.key] = sum(numbers) / len(numbers)
                elif metric.combine == "max":
                    values[metric.key] = max(numbers)
                else:
                    values[metric.key] = sum(numbers)
                break
    cache_config: dict[str, str] = {}
    for labels, _ in samples.get(CACHE_CONFIG_INFO, []):
        cache_config = {k: v for k, v in labels.items() if k not in ("engine", "model_name")}
        break
    return Snapshot(time=time, values=values, cache_config=cache_config)
