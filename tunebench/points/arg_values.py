"""Engine-arg values read the way vLLM's command line reads them, so a requested value and
a running one compare as vLLM would: "8K" is 8192, "half" is float16, -1 and "auto" leave the
choice to vLLM (`AUTO`), a quantization or speculative method is the name the engine line
shows. `validity.py` says per arg which reader applies (`KnownArg.kind`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tunebench.spec.engine_args import parse_count


class _Auto:
    """A request that leaves the value to vLLM (-1, "auto"): any running value agrees."""

    def __repr__(self) -> str:
        return "auto"


AUTO: Any = _Auto()


# Names vLLM runs a requested quantization under: its INC method runs the auto-round format,
# so a server asked for auto_round (the non-default args of
# tests/fixtures/logs/vllm-0.27-gpu-autoround-mtp.log) shows quantization=inc in its engine
# config line (tests/fixtures/logs/vllm-0.24-gpu-autoround-tp4.log, the same stack).
# A GPTQ or AWQ checkpoint runs under the first method whose `override_quantization_method`
# claims it (vLLM 0.32 `ModelConfig._verify_quantization`, the `overrides` order): asked for
# gptq, gptq_marlin, auto_gptq or marlin it runs `auto_gptq` (older releases: gptq_marlin),
# and likewise `auto_awq` for AWQ on a GPU, so each family reads as one name.
# tests/unit/test_effective.py checks these against the installed vLLM. `fp8` and the online
# shorthands (fp8_per_tensor, fp8_per_block, ...) are shown as asked: the engine line
# prints `ModelConfig.quantization`, which the online path does not rewrite.
_QUANTIZATION_ALIASES = {
    "auto_round": "inc",
    "auto-round": "inc",
    "gptq_marlin": "gptq",
    "auto_gptq": "gptq",
    "awq_marlin": "awq",
    "auto_awq": "awq",
}
_DTYPE_ALIASES = {"half": "float16", "float": "float32"}
_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


class Unreadable(ValueError):
    """A value that cannot be read the way vLLM reads this arg."""


def _tokens_or_auto(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return AUTO
    count = _tokens(value)
    return AUTO if count == -1 else count


def _tokens(value: Any) -> int:
    return _checked(parse_count(value, human=True), value)


def _count(value: Any) -> int:
    return _checked(parse_count(value, human=False), value)


def _checked(count: int | None, value: Any) -> int:
    if count is None:
        raise Unreadable(f"not a whole number: {value!r}")
    return count


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise Unreadable(f"not a boolean: {value!r}")


def _fraction(value: Any) -> float:
    if isinstance(value, bool):
        raise Unreadable(f"not a fraction: {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError) as error:
        raise Unreadable(f"not a fraction: {value!r}") from error


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Unreadable(f"not a name: {value!r}")
    return value.strip().strip("'\"").lower()


def _dtype(value: Any) -> Any:
    text = _text(value).removeprefix("torch.")
    return AUTO if text == "auto" else _DTYPE_ALIASES.get(text, text)


def _kv_cache_dtype(value: Any) -> Any:
    text = _text(value)
    return AUTO if text == "auto" else text


def _quantization(value: Any) -> str | None:
    if value is None:
        return None
    text = _text(value)
    return _QUANTIZATION_ALIASES.get(text, text)


# vLLM 0.32 `vllm/config/speculative.py`: every MTP method name (`MTPModelTypes`) is
# "deprecated and replaced with mtp" in `SpeculativeConfig.__post_init__`, so the engine line
# shows `mtp` for any of them.
_MTP_METHODS = frozenset(
    {
        "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
        "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp",
        "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp",
        "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "kimi_k3_mtp",
        "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
        "inkling_mtp", "glm5_next_mtp",
    }
)  # fmt: skip
# The same `__post_init__` detects what a `draft_model` draft is from its name, its
# architectures or its model type, and runs that method instead: asking for `draft_model`
# and running one of these is the request honoured.
DETECTED_FROM_DRAFT = frozenset(
    {"eagle", "eagle3", "dflash", "dspark", "medusa", "mlp_speculator", "mtp"}
)


def _speculative_method(method: Any) -> str:
    text = str(method).lower()
    return "mtp" if text in _MTP_METHODS else text


def _speculative(value: Any) -> dict[str, Any]:
    """The parts of a speculative config the server shows: method and token count."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise Unreadable(f"not a JSON object: {value!r}") from error
    if not isinstance(value, dict):
        raise Unreadable(f"not a mapping: {value!r}")
    out: dict[str, Any] = {}
    if value.get("method"):
        out["method"] = _speculative_method(value["method"])
    if value.get("num_speculative_tokens") is not None:
        out["num_speculative_tokens"] = _count(value["num_speculative_tokens"])
    return out


def read_generic(value: Any) -> Any:
    """Args tunebench does not know: equal only when plainly equal."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        return text.lower() if text.lower() in _TRUE | _FALSE else text


_NORMALISERS: dict[str, Callable[[Any], Any]] = {
    "tokens_or_auto": _tokens_or_auto,
    "tokens": _tokens,
    "count": _count,
    "integer": _count,
    "bool": _bool,
    "fraction": _fraction,
    "dtype": _dtype,
    "kv_cache_dtype": _kv_cache_dtype,
    "quantization": _quantization,
    "speculative": _speculative,
}


def read_value(kind: str, value: Any) -> Any:
    """`value` read the way vLLM's command line reads an arg of `kind` (a `KnownArg.kind`).

    Raises `Unreadable` (a ValueError) for a value vLLM would not accept.
    """
    return _NORMALISERS[kind](value)
