"""Abort the load at once when the server it drives is gone."""

from __future__ import annotations

import threading

from tunebench.seams.deployment import Deployment
from tunebench.seams.load import LoadDriver


class ServerWatch:
    """Polls `deployment.failure()` once a second during the load; on a failure, aborts the
    driver instead of running every remaining point against nothing."""

    def __init__(self, deployment: Deployment, driver: LoadDriver, period_s: float = 1.0):
        self._deployment = deployment
        self._driver = driver
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="server-watch", daemon=True)

    def start(self) -> "ServerWatch":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            failure = self._deployment.failure()
            if failure:
                self._driver.abort(failure)
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
