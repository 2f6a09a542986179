"""Whether the requested engine args are what the running server runs with.

Every requested arg ends in one state (`verify_args`):

- verified: a source on the server shows the same value, compared the way vLLM's command
  line reads it ("8K" is 8192, "half" is float16, -1 and "auto" leave the choice to vLLM);
- mismatch: a source shows another value. The configuration measured something else than
  asked, so its points are stored but marked invalid with the reason (`ineffective_args`);
- unverified: no source on this server reads the arg back. It is shown, never counted as
  applied.

The running configuration is read by metrics/effective.py; `KNOWN_ARGS` names, per arg, the
keys of that dict to read, best source first (docs/engine-args.md mirrors it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from tunebench.points.arg_values import AUTO, DETECTED_FROM_DRAFT, read_generic, read_value
from tunebench.redact import MASK, is_secret_name, redact

State = Literal["verified", "mismatch", "unverified"]

# Where a value is read back (labels used in reasons, the manifest and the docs).
MODELS = "/v1/models"
CACHE_INFO = "vllm:cache_config_info"
ENGINE_LINE = "engine config log line"
SCHEDULER_LINE = "scheduler log line"
MAX_LEN_LINE = "max model len log line"
NON_DEFAULT = "non-default args log line"
QUANTIZED_LINE = "quantized layers log line"

#: The effective key holding vLLM's `non-default args` dict; an arg is looked up in it by
#: its own name with underscores.
NON_DEFAULT_KEY = "non_default_args"


@dataclass(frozen=True)
class Source:
    key: str  # key of the effective dict (metrics/effective.py)
    label: str
    # A None there is a reading, not a gap (quantization=None: runs without quantization).
    none_means: str | None = None


@dataclass(frozen=True)
class KnownArg:
    kind: str  # how values are normalised: a key of _NORMALISERS
    sources: tuple[Source, ...]


@dataclass(frozen=True)
class ArgCheck:
    arg: str
    state: State
    requested: str
    running: str | None
    source: str | None
    reason: str


def _src(key: str, label: str, none_means: str | None = None) -> Source:
    return Source(key, label, none_means)


_LAST = _src(NON_DEFAULT_KEY, NON_DEFAULT)

#: Every engine arg tunebench reads back, with its sources in the order they are trusted:
#: what the engine runs first, the command line as the server parsed it (`non-default
#: args`) last, because vLLM may still change a parsed value while it builds the engine.
KNOWN_ARGS: dict[str, KnownArg] = {
    "max-model-len": KnownArg(
        "tokens_or_auto",
        (
            _src("max_model_len", MODELS),
            _src("max_seq_len", ENGINE_LINE),
            _src("max_model_len_used", MAX_LEN_LINE),
            _LAST,
        ),
    ),
    "max-num-batched-tokens": KnownArg(
        "tokens", (_src("max_num_batched_tokens", SCHEDULER_LINE), _LAST)
    ),
    "max-num-seqs": KnownArg("count", (_LAST,)),
    "gpu-memory-utilization": KnownArg(
        "fraction", (_src("gpu_memory_utilization", CACHE_INFO), _LAST)
    ),
    "kv-cache-memory-bytes": KnownArg("tokens", (_src("kv_cache_memory_bytes", CACHE_INFO), _LAST)),
    "block-size": KnownArg("count", (_src("block_size", CACHE_INFO), _LAST)),
    "kv-cache-dtype": KnownArg(
        "kv_cache_dtype",
        (_src("cache_dtype", CACHE_INFO), _src("kv_cache_dtype", ENGINE_LINE), _LAST),
    ),
    "enable-prefix-caching": KnownArg(
        "bool",
        (_src("prefix_caching", CACHE_INFO), _src("enable_prefix_caching", ENGINE_LINE), _LAST),
    ),
    "enable-chunked-prefill": KnownArg(
        "bool", (_src("enable_chunked_prefill", ENGINE_LINE), _LAST)
    ),
    "dtype": KnownArg("dtype", (_src("dtype", ENGINE_LINE), _LAST)),
    "quantization": KnownArg(
        "quantization",
        (_src("quantization", ENGINE_LINE, "without quantization"), _LAST),
    ),
    "enforce-eager": KnownArg("bool", (_src("enforce_eager", ENGINE_LINE), _LAST)),
    "tensor-parallel-size": KnownArg("count", (_src("tensor_parallel_size", ENGINE_LINE), _LAST)),
    "pipeline-parallel-size": KnownArg(
        "count", (_src("pipeline_parallel_size", ENGINE_LINE), _LAST)
    ),
    "data-parallel-size": KnownArg("count", (_src("data_parallel_size", ENGINE_LINE), _LAST)),
    "seed": KnownArg("integer", (_src("seed", ENGINE_LINE), _LAST)),
    "speculative-config": KnownArg(
        "speculative",
        (_src("speculative_method", ENGINE_LINE, "without it"), _LAST),
    ),
}

#: What a `vllm serve` runs when an arg is absent from a `non-default args` line that the
#: log does show: vLLM logs every arg that differs from its command-line default, so an
#: absent arg runs that default. None: the default is "vLLM chooses" (any value asked for
#: would have been logged). Only defaults that have not changed across vLLM releases are
#: listed (gpu-memory-utilization moved from 0.90 to 0.92, so it stays unverified);
#: tests/unit/test_validity.py checks this table against the installed vLLM.
ABSENT_MEANS_DEFAULT: dict[str, Any] = {
    "max-model-len": None,
    "max-num-batched-tokens": None,
    "max-num-seqs": None,
    "kv-cache-memory-bytes": None,
    "block-size": None,
    "enable-prefix-caching": None,
    "enable-chunked-prefill": None,
    "quantization": None,
    "speculative-config": None,
    "kv-cache-dtype": "auto",
    "dtype": "auto",
    "enforce-eager": False,
    "tensor-parallel-size": 1,
    "pipeline-parallel-size": 1,
    "data-parallel-size": 1,
}

#: Front-end and access options: they do not change what is measured, and some are secrets,
#: so they are not reported at all. Any other arg tunebench does not know is "unverified"
#: unless the server's non-default args show the same value.
NOT_REPORTED = frozenset(
    {
        "host",
        "port",
        "api-key",
        "served-model-name",
        "uvicorn-log-level",
        "disable-uvicorn-access-log",
        "disable-log-requests",
        "enable-log-requests",
        "disable-log-stats",
        "ssl-keyfile",
        "ssl-certfile",
        "ssl-ca-certs",
        "root-path",
        "allowed-origins",
        "allowed-methods",
        "allowed-headers",
        "download-dir",
    }
)


def normalise(arg: str, value: Any) -> Any:
    """`value` of engine arg `arg` as vLLM's command line would read it (AUTO: vLLM's choice).

    Raises ValueError for a value vLLM would not accept.
    """
    known = KNOWN_ARGS.get(arg)
    return read_value(known.kind, value) if known else read_generic(value)


def verify_args(requested: dict[str, Any], effective: dict[str, Any]) -> list[ArgCheck]:
    """One check per requested arg (in request order), except args left at vLLM's default
    (None) and front-end options (`NOT_REPORTED`, secrets)."""
    checks: list[ArgCheck] = []
    for name, value in requested.items():
        arg, value = _canonical(name, value)
        if value is None or arg in NOT_REPORTED or is_secret_name(arg):
            continue
        if arg in KNOWN_ARGS:
            checks.append(_check_known(arg, value, effective))
        else:
            checks.append(_check_unknown(arg, value, effective))
    return checks


def ineffective_args(requested: dict[str, Any], effective: dict[str, Any]) -> list[str]:
    """Reasons why a requested arg demonstrably did not take effect (empty: all good)."""
    return [
        check.reason for check in verify_args(requested, effective) if check.state == "mismatch"
    ]


def _canonical(name: str, value: Any) -> tuple[str, Any]:
    """`no-X: true` is `X: false` (vLLM's --no-X flags); underscores read as dashes."""
    arg = name.strip().replace("_", "-")
    if arg.startswith("no-") and arg[3:] in KNOWN_ARGS and value is not None:
        try:
            return arg[3:], not read_value("bool", value)
        except ValueError:
            return arg, value
    return arg, value


def _check_known(arg: str, value: Any, effective: dict[str, Any]) -> ArgCheck:
    try:
        wanted = normalise(arg, value)
    except ValueError:
        wanted = read_generic(value)  # spec checks refuse these; compare the text then
    shown = _show(arg, value, wanted)
    for source in KNOWN_ARGS[arg].sources:
        found, running = _read(arg, source, effective)
        if not found:
            continue
        running_shown = source.none_means if running is None else _show(arg, running, None)
        if wanted is AUTO or _same(wanted, _normalised_running(arg, running)):
            return _after_verified(arg, shown, running_shown, source.label, effective)
        return ArgCheck(
            arg,
            "mismatch",
            shown,
            running_shown,
            source.label,
            f"{arg} requested {shown}, server runs {running_shown}",
        )
    absent = _absent_from_non_default(arg, wanted, shown, effective)
    if absent is not None:
        return absent
    labels = ", ".join(source.label for source in KNOWN_ARGS[arg].sources)
    return ArgCheck(
        arg,
        "unverified",
        shown,
        None,
        None,
        f"{arg} requested {shown}: not verified, this server shows it in none of: {labels}",
    )


def _absent_from_non_default(
    arg: str, wanted: Any, shown: str, effective: dict[str, Any]
) -> ArgCheck | None:
    """The server logged its non-default args and this arg is not among them: it runs
    vLLM's default (e.g. helm values that never reached the pod, a port-forward to another
    server). None when there is no such line or the default is not known."""
    if not isinstance(effective.get(NON_DEFAULT_KEY), dict) or arg not in ABSENT_MEANS_DEFAULT:
        return None
    default = ABSENT_MEANS_DEFAULT[arg]
    if default is None:
        if wanted is AUTO:
            return None
        running = "vLLM's default (not in its non-default args)"
        same = False
    else:
        running = f"the default {default} (not in its non-default args)"
        same = wanted is AUTO or _same(wanted, normalise(arg, default))
    if same:
        reason = f"{arg} {shown}: server runs {running}"
        return ArgCheck(arg, "verified", shown, running, NON_DEFAULT, reason)
    reason = f"{arg} requested {shown}, server runs {running}"
    return ArgCheck(arg, "mismatch", shown, running, NON_DEFAULT, reason)


def _read(arg: str, source: Source, effective: dict[str, Any]) -> tuple[bool, Any]:
    """(whether this source has a reading, the running value) with readings vLLM cannot
    parse skipped: an unreadable value proves nothing either way."""
    if source.key == NON_DEFAULT_KEY:
        args = effective.get(NON_DEFAULT_KEY)
        key = arg.replace("-", "_")
        if not isinstance(args, dict) or key not in args:
            return False, None
        running = args[key]
    elif source.key not in effective:
        return False, None
    else:
        running = effective[source.key]
        if arg == "speculative-config" and running is not None:
            running = {
                "method": running,
                "num_speculative_tokens": effective.get("speculative_num_tokens"),
            }
    if running is None:
        return source.none_means is not None, None
    try:
        normalise(arg, running)
    except ValueError:
        return False, None
    return True, running


def _normalised_running(arg: str, running: Any) -> Any:
    return None if running is None else normalise(arg, running)


def _same(wanted: Any, running: Any) -> bool:
    if isinstance(wanted, dict) and isinstance(running, dict):
        # Only what was asked for is compared: a derived draft model or method is fine.
        return all(
            key not in running
            or running[key] == want
            or (key == "method" and want == "draft_model" and running[key] in DETECTED_FROM_DRAFT)
            for key, want in wanted.items()
        )
    if isinstance(wanted, float) and isinstance(running, (int, float)):
        return math.isclose(wanted, running, rel_tol=1e-6)
    if running is AUTO:
        return False  # the server runs vLLM's choice, not the value asked for
    return wanted == running


def _after_verified(
    arg: str, shown: str, running: str | None, label: str, effective: dict[str, Any]
) -> ArgCheck:
    # vLLM-CPU accepts int8 weight-only quantization and then quantizes no layer at all.
    if arg == "quantization" and effective.get("quantized_layers") == 0:
        return ArgCheck(
            arg,
            "mismatch",
            shown,
            "0 quantized layers",
            QUANTIZED_LINE,
            f"quantization {shown} requested but the server quantized 0 layers",
        )
    # The non-default args line is the command line as parsed, not yet what the engine runs.
    verb = "the server parsed" if label == NON_DEFAULT else "server runs"
    return ArgCheck(
        arg, "verified", shown, running, label, f"{arg} {shown}: {verb} {running} ({label})"
    )


def _check_unknown(arg: str, value: Any, effective: dict[str, Any]) -> ArgCheck:
    shown = _show(arg, value, None)
    args = effective.get(NON_DEFAULT_KEY)
    key = arg.replace("-", "_")
    if isinstance(args, dict) and key in args:
        running = _show(arg, args[key], None)
        if read_generic(value) == read_generic(args[key]):
            reason = f"{arg} {shown}: the server parsed {running} ({NON_DEFAULT})"
            return ArgCheck(arg, "verified", shown, running, NON_DEFAULT, reason)
        reason = (
            f"{arg} requested {shown}: not verified, the server's non-default args show "
            f"{running}, which tunebench cannot compare"
        )
        return ArgCheck(arg, "unverified", shown, running, NON_DEFAULT, reason)
    reason = f"{arg} requested {shown}: not verified, tunebench does not read this arg back"
    return ArgCheck(arg, "unverified", shown, None, None, reason)


def _show(arg: str, value: Any, normalised: Any) -> str:
    """A value as reports print it: as written, plus how vLLM reads it when that differs
    ("8k (8000)", "half (float16)"); secrets masked."""
    if is_secret_name(arg):
        return MASK
    if arg == "speculative-config":
        return _show_speculative(value)
    if isinstance(value, dict):
        return json.dumps(redact(value), sort_keys=True, separators=(",", ":"))
    text = str(value)
    if normalised is None or normalised is AUTO or isinstance(normalised, bool):
        return text
    plain = str(normalised)
    if plain in (text, text.lower()) or _numeric_text(text, normalised):
        return text
    return f"{text} ({plain})"


def _numeric_text(text: str, normalised: Any) -> bool:
    try:
        return isinstance(normalised, (int, float)) and float(text) == float(normalised)
    except ValueError:
        return False


def _show_speculative(value: Any) -> str:
    try:
        spec = read_value("speculative", value)
    except ValueError:
        return str(redact(value))
    text = spec.get("method", "no method")
    if "num_speculative_tokens" in spec:
        text += f", {spec['num_speculative_tokens']} tokens"
    return f"({text})"
