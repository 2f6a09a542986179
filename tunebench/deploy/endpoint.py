"""An already running server (like asv's "existing environment"): used, never started or stopped."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import httpx

from tunebench.errors import DeploymentError
from tunebench.deploy.base import ServerHandle
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
        return {"Authorization": f"Bearer {key}"}

    def start(self, config: ServerConfig) -> ServerHandle:
        headers = self._headers()
        url = self.settings.url.removesuffix("/v1")
        deadline = time.monotonic() + self.settings.ready_timeout_s
        last = ""
        with httpx.Client(headers=headers, verify=self.settings.verify_tls, timeout=5) as client:
            while time.monotonic() < deadline:
                try:
                    response = client.get(f"{url}/v1/models")
                    if response.status_code in (401, 403):
                        raise DeploymentError(
                            f"{url}: HTTP {response.status_code}; check the token in "
                            f"{self.settings.api_key_env or 'deployment.api_key_env'}"
                        )
                    response.raise_for_status()
                    models = response.json().get("data") or []
                    ids = [m.get("id") for m in models]
                    if self.served_model_name and self.served_model_name not in ids:
                        raise DeploymentError(
                            f"{url} serves {', '.join(map(str, ids)) or 'no model'}, not "
                            f"served_model_name {self.served_model_name!r}; fix served_model_name"
                        )
                    served = self.served_model_name or (ids[0] if ids else config.model)
                    return ServerHandle(
                        base_url=url,
                        metrics_url=self.settings.metrics_url or f"{url}/metrics",
                        served_model=served,
                        headers=headers,
                        verify_tls=self.settings.verify_tls,
                    )
                except (httpx.HTTPError, ValueError, KeyError) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    self.on_status(f"waiting for {url} …")
                    time.sleep(1)
        raise DeploymentError(f"{url}: not reachable within ready_timeout_s: {last}")

    def stop(self) -> None:
        pass

    def log_text(self) -> str:
        return ""
