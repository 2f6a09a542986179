"""Wait until an OpenAI-compatible vLLM endpoint answers: /health, then /v1/models.

Kubernetes readiness (and a Route that answers) comes before vLLM has loaded its weights,
so a remote deployment is only ready when vLLM itself lists the model.
"""

from __future__ import annotations

import ssl
import time
from typing import Callable

import httpx

from tunebench.errors import DeploymentError
from tunebench.seams.deployment import tls_verify  # noqa: F401  (re-exported for kinds)


def wait_for_models(
    url: str,
    headers: dict[str, str],
    verify: bool | ssl.SSLContext,
    timeout_s: float,
    served_model_name: str | None,
    on_status: Callable[[str], None],
    token_hint: str,
    timeout_key: str,
    check_health: bool = False,
) -> str:
    """The model name to request once `url` serves it; DeploymentError when it never does."""
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    last = ""
    with httpx.Client(headers=headers, verify=verify, timeout=5) as client:
        while True:
            try:
                if check_health:
                    health = client.get(f"{url}/health")
                    _refuse_auth(health, url, token_hint)
                    health.raise_for_status()
                response = client.get(f"{url}/v1/models")
                _refuse_auth(response, url, token_hint)
                response.raise_for_status()
                ids = [m.get("id") for m in response.json().get("data") or []]
                if served_model_name and served_model_name not in ids:
                    raise DeploymentError(
                        f"{url} serves {', '.join(map(str, ids)) or 'no model'}, not "
                        f"served_model_name {served_model_name!r}; fix served_model_name"
                    )
                if ids:
                    return served_model_name or str(ids[0])
                last = "/v1/models lists no model yet"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            except (ValueError, KeyError, AttributeError) as exc:
                last = f"unexpected /v1/models answer: {exc}"
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"{url}: vLLM not answering within {timeout_key} ({timeout_s:g} s): {last}"
                )
            on_status(f"waiting for vLLM at {url} … {time.monotonic() - started:.0f} s")
            time.sleep(1)


def _refuse_auth(response: httpx.Response, url: str, token_hint: str) -> None:
    if response.status_code in (401, 403):
        raise DeploymentError(
            f"{url}: HTTP {response.status_code}; check the token in {token_hint}"
        )
