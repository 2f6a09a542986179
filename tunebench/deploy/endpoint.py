"""An already running server (like asv's "existing environment"): used, never started or stopped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from tunebench.errors import DeploymentError
from tunebench.deploy.base import ServerHandle
from tunebench.deploy.ready import wait_for_models
from tunebench.redact import remember
from tunebench.spec.models import EndpointDeployment
from tunebench.spec.plan import ServerConfig


class EndpointServer:
    kind = "endpoint"

    def __init__(
        self,
        settings: EndpointDeployment,
        work_dir: Path,
        on_status: Callable[[str], None] | None = None,
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
            url, headers, self.settings.verify_tls, self.settings.ready_timeout_s,
            self.served_model_name, self.on_status,
            self.settings.api_key_env or "deployment.api_key_env", "ready_timeout_s",
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
