"""Effective configuration from the start-up log, and requested args that did not take effect."""

from __future__ import annotations

from tunebench.deploy.local import server_error_line
from tunebench.metrics.effective import parse_startup_log
from tunebench.points.validity import ineffective_args


def test_real_vllm_032_cpu_startup_log(fixtures):
    parsed = parse_startup_log((fixtures / "logs/vllm-0.32-cpu-startup.log").read_text())
    assert parsed["kv_cache_size_tokens"] == 262144
    assert parsed["max_num_batched_tokens"] == 1024
    assert parsed["quantization"] is None
    assert parsed["kv_cache_dtype"] == "auto"
    assert parsed["dtype"] == "bfloat16"
    assert parsed["max_seq_len"] == 512
    assert parsed["speculative_method"] is None
    assert parsed["enable_prefix_caching"] is True
    assert parsed["vllm_version"] == "0.32.0"


def test_speculative_method_and_quantized_layers():
    log = (
        "INFO [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='m', "
        "speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3), "
        "quantization=int8_per_channel_weight_only, kv_cache_dtype=fp8, enforce_eager=True\n"
        "INFO Quantizing 0 layers\n"
        "INFO [kv_cache_utils.py:1] GPU KV cache size: 1,234,560 tokens\n"
    )
    parsed = parse_startup_log(log)
    assert parsed["speculative_method"] == "ngram"
    assert parsed["quantization"] == "int8_per_channel_weight_only"
    assert parsed["quantized_layers"] == 0
    assert parsed["kv_cache_size_tokens"] == 1234560
    reasons = ineffective_args({"quantization": "int8_per_channel_weight_only"}, parsed)
    assert reasons == [
        "quantization int8_per_channel_weight_only requested but the server quantized 0 layers"
    ]


def test_ineffective_args():
    effective = {
        "max_model_len": 2048,
        "cache_dtype": "auto",
        "prefix_caching": True,
        "quantization": None,
        "speculative_method": None,
        "max_num_batched_tokens": 2048,
    }
    requested = {
        "max-model-len": 4096,
        "kv-cache-dtype": "fp8",
        "enable-prefix-caching": False,
        "quantization": "fp8",
        "speculative-config": {"method": "ngram"},
        "max-num-batched-tokens": 2048,
    }
    reasons = ineffective_args(requested, effective)
    assert reasons == [
        "max-model-len requested 4096, server runs 2048",
        "kv-cache-dtype requested fp8, server runs auto",
        "enable-prefix-caching requested False, server runs True",
        "quantization requested fp8, server runs without quantization",
        "speculative-config requested (ngram), server runs without it",
    ]
    assert ineffective_args({"max-model-len": 2048}, effective) == []
    assert ineffective_args({"max-model-len": 2048}, {}) == []  # unknown is not invalid


def test_server_error_line_is_vllms_own(fixtures):
    line = server_error_line((fixtures / "logs/vllm-0.32-bad-arg.log").read_text())
    assert "error: argument --kv-cache-dtype: invalid choice: 'not-a-dtype'" in line
