"""Whether a local server can load a hub model id: in this machine's Hugging Face cache, or
downloadable (the hub reachable) — known before a server start, not 20-40 s into it.

Reads the cache with huggingface_hub's `try_to_load_from_cache` (no network); for a model
that is not cached, asks whether the hub answers a TCP connection and, when it does, whether
it has the model (`model_info`: a misspelt id fails the check, not the server 30 s later).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from tunebench.spec.plan import BUILTIN_PREFIX

DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "true", "yes", "on"}


def is_hub_id(model: str) -> bool:
    """Neither a builtin model nor a local path: vLLM looks it up on the hub."""
    if model.startswith(BUILTIN_PREFIX) or model.startswith(("/", ".", "~")):
        return False
    return not Path(model).exists()


def in_local_cache(model: str) -> bool | None:
    """True: its config.json is in the local Hugging Face cache; False: it is not; None:
    not a valid hub id (the hub library refuses it)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except ImportError:
        return False
    except Exception:  # HFValidationError: not owner/name
        return None
    return isinstance(cached, str)


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the hub cannot be reached ("HF_HUB_OFFLINE is set", "no connection to
    huggingface.co:443"), or None when it answers."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUE:
        return "HF_HUB_OFFLINE is set"
    url = urlparse(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    answered: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                answered.append(True)
        except OSError:
            pass

    # a thread: name resolution ignores the socket's timeout and can hang far longer
    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    return None if answered else f"no connection to {host}:{port}"


def hub_says_missing(model: str, timeout: float = 10.0) -> str | None:
    """Why the hub will not serve `model` (no such repository, or gated without access), or
    None when it will or cannot tell (a network hiccup is not a verdict on the model)."""
    try:
        from huggingface_hub import model_info
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:
        return None
    try:
        model_info(model, timeout=timeout)  # HF_TOKEN from the environment, as vLLM's
    except GatedRepoError:
        return (
            "gated on the hub and this token has no access; accept its licence on "
            "huggingface.co and set HF_TOKEN"
        )
    except RepositoryNotFoundError:
        return (
            "no such model on the hub (a typo? a private model needs HF_TOKEN with access); "
            "check the id on huggingface.co or give a local path"
        )
    except Exception:  # timeouts, 5xx: vLLM's download will say
        return None
    return None


def model_problem(
    model: str,
    unreachable: Callable[[], str | None] = hub_unreachable,
    missing: Callable[[str], str | None] = hub_says_missing,
) -> tuple[str | None, str | None]:
    """(error, note) about one model a local server loads: the error when it cannot be loaded
    (not cached and the hub unreachable or without it, or not a hub id at all), else a note
    when it will be downloaded at start; (None, None) for a builtin, a local path or a
    cached id."""
    if not is_hub_id(model):
        return None, None
    cached = in_local_cache(model)
    if cached is None:
        return (
            "not a local path and not a hub id (owner/name); give a directory "
            "(e.g. ./models/my-model) or a Hugging Face id",
            None,
        )
    if cached:
        return None, None
    why = unreachable()
    if why is not None:
        return (
            f"not in the local cache and the hub is unreachable ({why}); download it where "
            f"the hub is reachable (huggingface-cli download {model}) or give a local path",
            None,
        )
    gone = missing(model)
    if gone is not None:
        return gone, None
    return None, "not in the local cache; the server downloads it at start"
