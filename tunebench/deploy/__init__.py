"""Deployments by `kind`; see base.Deployment for the contract."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tunebench.deploy.base import Deployment, ServerHandle
from tunebench.deploy.endpoint import EndpointServer
from tunebench.deploy.helm import HelmDeployment
from tunebench.deploy.local import LocalVllmServer
from tunebench.replay.deployment import ReplayDeployment

# kind -> factory(settings, work_dir, on_status, served_model_name); explicit, so a kind is found by reading.
REGISTRY: dict[str, Callable[..., Deployment]] = {
    "local": LocalVllmServer,
    "endpoint": EndpointServer,
    "replay": ReplayDeployment,
    "helm": HelmDeployment,
}


def create_deployment(
    settings, work_dir: Path, on_status=None, served_model_name: str | None = None
) -> Deployment:
    return REGISTRY[settings.kind](settings, work_dir, on_status, served_model_name)


__all__ = ["Deployment", "ServerHandle", "REGISTRY", "create_deployment"]
