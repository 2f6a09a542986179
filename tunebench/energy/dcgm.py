"""GPU energy from NVIDIA's DCGM exporter, through the Prometheus that scrapes it.

On OpenShift and Kubernetes the GPU operator runs the DCGM exporter and the cluster's
Prometheus (or Thanos querier) scrapes it. After each point tunebench asks that Prometheus
for the raw DCGM_FI_DEV_POWER_USAGE samples (watts) of the window, one series per GPU,
selected by `selector` (the server's namespace and pods), and takes their mean power times
the window's length. The exporter's scrape interval bounds what this can see: a window
needs two samples of each GPU inside it, or the point gets no energy and says why.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import httpx

from tunebench.energy.window import Reading, power_joules
from tunebench.seams.energy import EnergyReading

POWER_METRIC = "DCGM_FI_DEV_POWER_USAGE"
# The labels that tell one GPU from another in the exporter's series.
GPU_LABELS = ("Hostname", "UUID", "gpu")


class DcgmMeter:
    source = "dcgm"

    def __init__(
        self,
        prometheus_url: str,
        selector: str = "",
        bearer_token_env: str | None = None,
        verify: bool | str = True,
        timeout_s: float = 10.0,
        settle_s: float = 0.0,
    ):
        self.url = prometheus_url.rstrip("/") + "/api/v1/query"
        self.selector = selector.strip().strip("{}")
        headers = {}
        if bearer_token_env:
            token = os.environ.get(bearer_token_env, "")
            if token:
                headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(headers=headers, verify=verify, timeout=timeout_s)
        # Wait this long after a window for the scrape that ends it to reach Prometheus.
        self.settle_s = settle_s

    def start(self) -> None:
        pass

    def mark(self) -> None:
        if self.settle_s:
            time.sleep(self.settle_s)

    def stop(self) -> None:
        self._client.close()

    def query(self, start: float, end: float) -> str:
        span = max(1, math.ceil(end - start))
        return f"{POWER_METRIC}{{{self.selector}}}[{span}s]"

    def window(self, start: float, end: float) -> EnergyReading | str:
        if end <= start:
            return "the window is empty"
        try:
            response = self._client.get(
                self.url, params={"query": self.query(start, end), "time": f"{end:.3f}"}
            )
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            return f"Prometheus query failed: {type(exc).__name__}: {exc}"
        if body.get("status") != "success":
            return f"Prometheus query failed: {body.get('error') or body.get('status')}"
        series = body.get("data", {}).get("result", [])
        if not series:
            return (
                f"Prometheus has no {POWER_METRIC}{{{self.selector}}} samples in the window "
                "(is the DCGM exporter scraped, and does the selector match the server's pods?)"
            )
        readings, devices = readings_of(series)
        result = power_joules(readings, start, end, what="DCGM power sample")
        if isinstance(result, str):
            return result
        joules, inside = result
        return EnergyReading(
            joules=joules,
            mean_watts=joules / (end - start),
            source=self.source,
            devices=devices,
            method="power",
            samples=inside,
        )


def readings_of(series: list[dict[str, Any]]) -> tuple[list[Reading], str]:
    """Prometheus matrix results as readings (one value per GPU and time), and what they are."""
    by_time: dict[float, dict[str, float]] = {}
    names: set[str] = set()  # a GPU's series changes labels when a pod comes or goes
    models: set[str] = set()
    for item in series:
        labels = item.get("metric", {})
        gpu = "/".join(str(labels[k]) for k in GPU_LABELS if k in labels) or str(labels)
        names.add(gpu)
        if labels.get("modelName"):
            models.add(str(labels["modelName"]))
        # a range query answers "values" (a matrix), an instant query one "value"
        samples = item.get("values") or ([item["value"]] if "value" in item else [])
        for when, value in samples:
            by_time.setdefault(float(when), {})[gpu] = float(value)
    readings = [Reading(t, values) for t, values in sorted(by_time.items())]
    devices = f"{len(names)} GPU(s)" + (f" ({', '.join(sorted(models))})" if models else "")
    return readings, devices
