"""`deployment: {kind: replay, run: RUN}`: a server that answers from a recorded run.

`start(config)` finds the recorded configuration with the same engine args; a configuration
that failed when recorded fails the same way, and one never recorded fails with the list
of recorded ones. Nothing is started, so there is no process, log or metrics endpoint; the
recorded effective configuration travels in the handle.
"""

from __future__ import annotations

from pathlib import Path

from tunebench.errors import DeploymentError
from tunebench.redact import redact
from tunebench.replay.model import RecordedConfig, RecordedRun
from tunebench.seams.deployment import ServerHandle
from tunebench.spec.deployments import ReplaySettings
from tunebench.spec.plan import ServerConfig, format_value


class ReplayDeployment:
    kind = "replay"

    def __init__(self, settings: ReplaySettings):
        self.recorded = RecordedRun(Path(settings.run))
        self.current: RecordedConfig | None = None

    def start(self, config: ServerConfig) -> ServerHandle:
        recorded = self.recorded.find(config.args)
        if recorded is None:
            wanted = " ".join(
                f"{k}={format_value(v)}" for k, v in redact(config.args).items() if v is not None
            )
            raise DeploymentError(
                f"replay: {self.recorded.name} recorded no configuration with args "
                f"{wanted or '(defaults)'}; recorded: {self.recorded.describe_choices()}"
            )
        if recorded.status != "complete" and not recorded.rows:
            raise DeploymentError(f"replay: {recorded.error or 'failed when recorded'}")
        self.current = recorded
        return ServerHandle(
            base_url=f"replay:{self.recorded.path.name}/{recorded.config_id}",
            metrics_url="",
            served_model=recorded.label,
            started_s=0.0,
            effective=dict(recorded.effective),
        )

    def stop(self) -> None:
        self.current = None

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
