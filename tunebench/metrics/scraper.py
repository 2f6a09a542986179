"""Background scraping of a server's /metrics while load runs."""

from __future__ import annotations

import threading
import time

import httpx

from tunebench.metrics.parse import MetricsParseError, Snapshot, snapshot_from_text


class MetricsScraper:
    """Scrapes `url` every `interval_s` on a daemon thread until `stop()`.

    Failures are counted, not raised: a point whose server metrics are missing is kept
    and flagged by the summary, never lost.
    """

    def __init__(
        self,
        url: str,
        interval_s: float = 1.0,
        headers: dict[str, str] | None = None,
        verify=True,  # a bool or an ssl.SSLContext (CA bundle)
        timeout_s: float = 5.0,
    ):
        self.url = url
        self.interval_s = interval_s
        self._client = httpx.Client(headers=headers or {}, verify=verify, timeout=timeout_s)
        self._snapshots: list[Snapshot] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)
        self.failures = 0
        self.last_error = ""

    def scrape_once(self) -> Snapshot | None:
        try:
            response = self._client.get(self.url)
            response.raise_for_status()
            snapshot = snapshot_from_text(response.text, time.time())
        except (httpx.HTTPError, MetricsParseError) as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return None
        with self._lock:
            self._snapshots.append(snapshot)
        return snapshot

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.scrape_once()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> "MetricsScraper":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._client.close()

    def snapshots(self) -> list[Snapshot]:
        with self._lock:
            return list(self._snapshots)
