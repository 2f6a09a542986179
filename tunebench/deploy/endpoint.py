"""An already running server (like asv's "existing environment"): used, never started or stopped."""

from __future__ import annotations

import os
from pathlib import Path

from tunebench.deploy.ready import wait_for_models
from tunebench.errors import DeploymentError
from tunebench.redact import remember
from tunebench.seams.deployment import ServerHandle, StatusCallback
from tunebench.spec.deployments import EndpointSettings
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout


class EndpointServer:
    kind = "endpoint"

    def __init__(
        self,
        settings: EndpointSettings,
        layout: RunLayout,
        on_status: StatusCallback | None = None,
        served_model_name: str | None = None,
    ):
        self.settings = settings
        self.served_model_name = served_model_name
        self.on_status = on_status or (lambda message: None)

    @property
    def log_path(self) -> Path | None:
        return None

    @property
    def pgid(self) -> int | None:
        return None  # nothing of ours runs

    @property
    def last_pgid(self) -> int | None:
        return None

    def failure(self) -> str | None:
        return None  # not ours to watch: a failing server shows as failed requests

    def _headers(self) -> dict[str, str]:
        name = self.settings.api_key_env
        if not name:
            return {}
        key = os.environ.get(name)
        if not key:
            raise DeploymentError(
                f"deployment.api_key_env: environment variable {name} is not set; "
                f"export {name}=<token> or remove api_key_env"
            )
        remember(key)
        return {"Authorization": f"Bearer {key}"}

    def start(self, config: ServerConfig) -> ServerHandle:
        headers = self._headers()
        url = self.settings.url.removesuffix("/v1")
        served = wait_for_models(
            url,
            headers,
            self.settings.verify_tls,
            self.settings.ready_timeout_s,
            self.served_model_name,
            self.on_status,
            self.settings.api_key_env or "deployment.api_key_env",
            "ready_timeout_s",
        )
        return ServerHandle(
            base_url=url,
            metrics_url=self.settings.metrics_url or f"{url}/metrics",
            served_model=served,
            headers=headers,
            verify_tls=self.settings.verify_tls,
        )

    def stop(self) -> None:
        pass

    def log_text(self) -> str:
        return ""
