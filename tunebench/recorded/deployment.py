"""`deployment: {kind: recorded, run: RUN}`: a server that answers from a recorded run.

`start(config)` finds the recorded configuration with the same engine args; a configuration
that failed when recorded fails the same way, and one never recorded fails with the list
of recorded ones. Nothing is started, so there is no process, log or metrics endpoint; the
recorded effective configuration travels in the handle. A noisy recorded run (`noisy: true`)
also draws which recorded server start this start is (recorded/noisy.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tunebench.errors import DeploymentError, StoreError
from tunebench.recorded.model import RecordedConfig, RecordedRun
from tunebench.recorded.noisy import RecordedGrid, RecordedStart
from tunebench.redact import redact
from tunebench.seams.deployment import ServerHandle
from tunebench.spec.deployments import RecordedSettings
from tunebench.spec.plan import ServerConfig, format_value

# a start's seconds when the recording did not keep them (time_scale only)
DEFAULT_START_S = 40.0


class RecordedDeployment:
    kind = "recorded"

    def __init__(self, settings: RecordedSettings):
        self.recorded = RecordedRun(Path(settings.run))
        self.current: RecordedConfig | None = None
        self.grid: RecordedGrid | None = None
        self.start_drawn: RecordedStart | None = None  # noisy: the recorded start in use
        self.rng = np.random.default_rng(settings.seed)
        self.time_scale = settings.time_scale
        if settings.noisy:
            try:
                self.grid = RecordedGrid(Path(settings.run))
            except StoreError as exc:
                raise DeploymentError(f"{exc}; or set noisy: false") from None
            self.repeats = settings.repeats or self.grid.repeats

    def start(self, config: ServerConfig) -> ServerHandle:
        recorded = self.recorded.find(config.args)
        if recorded is None:
            wanted = " ".join(
                f"{k}={format_value(v)}" for k, v in redact(config.args).items() if v is not None
            )
            raise DeploymentError(
                f"recorded: {self.recorded.name} recorded no configuration with args "
                f"{wanted or '(defaults)'}; recorded: {self.recorded.describe_choices()}"
            )
        if recorded.status != "complete" and not recorded.rows:
            raise DeploymentError(f"recorded: {recorded.error or 'failed when recorded'}")
        if self.grid is not None:
            starts = self.grid.find(config.args)
            if starts is None or not any(r in starts.starts for r in self.repeats):
                raise DeploymentError(
                    f"recorded: {recorded.label} has no recorded start with per-request "
                    f"samples in repeats {self.repeats}"
                )
            self.start_drawn = starts.deploy(self.repeats, self.rng)
        self.current = recorded
        if self.time_scale:
            time.sleep(self.time_scale * (recorded.start_s or DEFAULT_START_S))
        return ServerHandle(
            base_url=f"recorded:{self.recorded.path.name}/{recorded.config_id}",
            metrics_url="",
            served_model=recorded.label,
            started_s=0.0,
            effective=dict(recorded.effective),
        )

    def stop(self) -> None:
        self.current = None
        self.start_drawn = None

    def log_text(self) -> str:
        return ""

    @property
    def log_path(self) -> Path | None:
        return None

    @property
    def pgid(self) -> int | None:
        return None

    @property
    def last_pgid(self) -> int | None:
        return None

    def failure(self) -> str | None:
        return None
