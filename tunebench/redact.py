"""Keep secrets out of everything tunebench writes or prints.

Two nets: keys whose names look secret (token, key, secret, password, authorization) have
their values replaced in any mapping, and the values of secret-looking environment
variables are replaced wherever they occur in text (server logs, error messages).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
# A name is secret when it ends in one of these words (HF_TOKEN, api-key, AWS_SECRET_ACCESS_KEY,
# Authorization), not when it merely contains them (prompt_tokens, max-num-batched-tokens).
_SECRET_NAME = re.compile(
    r"(^|[_.-])(token|secret|password|passwd|api[_-]?key|access[_-]?key|secret[_-]?key"
    r"|authorization|credentials?|bearer)$",
    re.I,
)
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_MIN_SECRET_LEN = 6


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.strip()))


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_SECRET_LEN]


# Secret values met while running (a spec's api-key, a token read from a Secret): every
# redact_text in this process masks them too, crash logs included.
_remembered: set[str] = set()
# Keys that name where a secret is (token_env: TB_TOKEN, token_secret: my-sa), not the secret.
_REFERENCE_SUFFIXES = ("_env", "-env", "_secret", "-secret", "secret_name", "secret-name", "_file")
_MIN_REMEMBERED_LEN = 8  # masking short common words everywhere would garble messages


def remember(*values: Any) -> None:
    _remembered.update(str(v) for v in values if v and len(str(v)) >= _MIN_REMEMBERED_LEN)


def remember_secrets_in(value: Any) -> None:
    """Remember the values under secret-named keys anywhere in a parsed file (a spec)."""
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key).lower()
            if (
                is_secret_name(name)
                and not name.endswith(_REFERENCE_SUFFIXES)
                and isinstance(item, (str, int))
                and not isinstance(item, bool)
            ):
                remember(item)
            else:
                remember_secrets_in(item)
    elif isinstance(value, list):
        for item in value:
            remember_secrets_in(item)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    known = set(secrets) | set(environment_secrets()) | _remembered
    for secret in sorted(known, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET_LEN:
            text = text.replace(secret, MASK)
    return _BEARER.sub(r"\1" + MASK, text)


def secret_values(mapping: dict[str, Any]) -> list[str]:
    """Values of secret-named keys (e.g. an `api-key` engine arg), for redacting free text."""
    return [
        str(v)
        for k, v in mapping.items()
        if is_secret_name(str(k)) and v not in (None, "", False, True)
    ]


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of `value` with secret-named keys masked and known secret strings replaced.

    In a list, the item after a secret-named flag (`--api-key KEY`) is masked too.
    """
    secrets = list(secrets)
    if isinstance(value, list):
        out = []
        for index, item in enumerate(value):
            previous = value[index - 1] if index else None
            if (
                isinstance(previous, str)
                and previous.startswith("--")
                and is_secret_name(previous[2:])
            ):
                out.append(MASK)
            else:
                out.append(redact(item, secrets))
        return out
    if isinstance(value, dict):
        return {
            k: (
                MASK
                if is_secret_name(str(k))
                and v not in (None, "", False)
                and not str(k).endswith("_env")
                else redact(v, secrets)
            )
            for k, v in value.items()
        }
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value
