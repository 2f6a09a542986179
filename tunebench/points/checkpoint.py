"""Whether a quantized checkpoint runs quantized: what its config.json declares vs what the
server says it loaded.

A checkpoint variant (`model: RedHatAI/...-quantized.w8a8`, `builtin:tiny-llama-random-w4a16`)
requests no `quantization` arg, so the arg checks of points/validity.py have nothing to
compare. Its `config.json` declares a method (`quantization_config.quant_method`) and, for
compressed-tensors, the bits and types of weights and activations; the server's engine line
shows the method it runs (`quantization=`) and its model loader names the scheme class and
kernel it chose per scheme (`quantization_schemes`, metrics/effective.py). A checkpoint
served without quantization, or with another scheme than it declares, is a mismatch: its
points measured something else than the sweep names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunebench import demo
from tunebench.points.validity import ENGINE_LINE, ArgCheck, normalise

CHECK_NAME = "checkpoint-quantization"
SCHEME_LINE = "model loader's kernel lines"


@dataclass(frozen=True)
class DeclaredQuantization:
    method: str  # quant_method of config.json
    summary: str  # e.g. "int8 weights, int8 activations"
    # vLLM's compressed-tensors scheme classes that serve what is declared (empty: any)
    schemes: frozenset[str]

    def shown(self) -> str:
        return f"{self.method} ({self.summary})" if self.summary else self.method


def declared_for_model(model: str) -> DeclaredQuantization | None:
    """What the served model's checkpoint declares: a `builtin:` model, a local directory, or
    a hub id whose config.json is in this machine's Hugging Face cache (where the server just
    downloaded it); None when none of these has it."""
    if model.startswith("builtin:"):
        return declared_quantization(demo.resolve_builtin(model))
    if Path(model).expanduser().is_dir():
        return declared_quantization(model)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # an id the hub library refuses: nothing cached to read
        return None
    return declared_quantization(Path(cached).parent) if isinstance(cached, str) else None


def declared_quantization(model_dir: str | Path) -> DeclaredQuantization | None:
    """What the checkpoint at `model_dir` declares, or None (not local, not quantized)."""
    config_file = Path(model_dir).expanduser() / "config.json"
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return None
    quant = config.get("quantization_config") if isinstance(config, dict) else None
    if not isinstance(quant, dict) or not quant.get("quant_method"):
        return None
    method = str(quant["quant_method"]).lower()
    if method != "compressed-tensors":
        bits = quant.get("bits") or quant.get("w_bit")
        return DeclaredQuantization(method, f"{bits}-bit weights" if bits else "", frozenset())
    summaries, schemes = [], set()
    for group in (quant.get("config_groups") or {}).values():
        if isinstance(group, dict):
            summary, scheme = _compressed_tensors_group(group)
            summaries.append(summary)
            schemes |= scheme
    return DeclaredQuantization(method, "; ".join(sorted(set(summaries))), frozenset(schemes))


def _compressed_tensors_group(group: dict[str, Any]) -> tuple[str, set[str]]:
    """A config group's summary and the vLLM scheme classes that serve it (the rules of
    `CompressedTensorsConfig._get_scheme_from_parts` in vLLM 0.32, for the dense schemes)."""
    weights = group.get("weights") or {}
    acts = group.get("input_activations") or {}
    w_bits, w_type = weights.get("num_bits"), weights.get("type", "int")
    summary = f"{w_type}{w_bits} weights"
    if acts:
        summary += f", {acts.get('type', 'int')}{acts.get('num_bits')} activations"
        if acts.get("dynamic"):
            summary += " (dynamic)"
    else:
        summary += ", 16-bit activations"
    if w_type == "int" and acts.get("type", "int") == "int" and w_bits == 8 and acts:
        return summary, {"CompressedTensorsW8A8Int8"}
    if w_type == "int" and not acts:
        return summary, {"CompressedTensorsWNA16", "CompressedTensorsW4A16Sparse24"}
    if w_type == "float" and w_bits == 8:
        return summary, ({"CompressedTensorsW8A8Fp8"} if acts else {"CompressedTensorsW8A16Fp8"})
    return summary, set()


def check_checkpoint(declared: DeclaredQuantization, effective: dict[str, Any]) -> ArgCheck:
    """verified / mismatch / unverified, as an arg check of points/validity.py."""
    wanted = declared.shown() + " (config.json)"
    if "quantization" not in effective:
        return ArgCheck(
            CHECK_NAME,
            "unverified",
            wanted,
            None,
            None,
            f"checkpoint declares {wanted}: not verified, the server showed no engine line",
        )
    running = effective["quantization"]
    # GPTQ and AWQ checkpoints run under their kernels' names (auto_gptq, gptq_marlin, ...):
    # compared by family, as the `quantization` arg is (points/validity.py)
    if running is None or normalise("quantization", running) != normalise(
        "quantization", declared.method
    ):
        shown = "without quantization" if running is None else f"quantization={running}"
        return ArgCheck(
            CHECK_NAME,
            "mismatch",
            wanted,
            shown,
            ENGINE_LINE,
            f"checkpoint declares {wanted}, server runs {shown}",
        )
    schemes = effective.get("quantization_schemes")
    if declared.schemes and isinstance(schemes, dict) and schemes:
        served = [f"{s} on {k}" for s, k in schemes.items() if s in declared.schemes]
        if not served:
            return ArgCheck(
                CHECK_NAME,
                "mismatch",
                wanted,
                ", ".join(schemes),
                SCHEME_LINE,
                f"checkpoint declares {wanted}, server loaded {', '.join(schemes)}",
            )
        running_shown = f"{running}: {', '.join(served)}"
        return ArgCheck(
            CHECK_NAME,
            "verified",
            wanted,
            running_shown,
            SCHEME_LINE,
            f"checkpoint {wanted}: server runs {running_shown} ({SCHEME_LINE})",
        )
    return ArgCheck(
        CHECK_NAME,
        "verified",
        wanted,
        f"quantization={running}",
        ENGINE_LINE,
        f"checkpoint {wanted}: server runs quantization={running} ({ENGINE_LINE})",
    )
