"""Effective configuration read back from a server, and the state of every requested arg."""

from __future__ import annotations

import dataclasses

import pytest

from tunebench.deploy.local import server_error_line
from tunebench.metrics.effective import combine_effective, parse_startup_log
from tunebench.points.arg_values import AUTO
from tunebench.points.validity import KNOWN_ARGS, ineffective_args, normalise, verify_args


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


# --- every requested arg in one state: verified, mismatch or unverified -------------------


def _cpu_effective(fixtures):
    """The CPU server as tunebench sees it: its real start-up log and idle /metrics."""
    return combine_effective(
        {"data": [{"id": "tiny", "max_model_len": 512}]},
        {"version": "0.32.0"},
        (fixtures / "metrics/vllm-0.32-idle.txt").read_text(),
        (fixtures / "logs/vllm-0.32-cpu-startup.log").read_text(),
    )


def _states(checks):
    return {check.arg: check.state for check in checks}


@pytest.mark.parametrize(
    ("arg", "value", "expected"),
    [
        ("max-model-len", "8K", 8192),
        ("max-model-len", "8k", 8000),
        ("max-model-len", "25.6k", 25600),
        ("max-model-len", 4096.0, 4096),
        ("max-model-len", "-1", AUTO),
        ("max-model-len", -1, AUTO),
        ("max-model-len", "auto", AUTO),
        ("max-num-batched-tokens", "1k", 1000),
        ("max-num-batched-tokens", "2M", 2 * 2**20),
        ("kv-cache-memory-bytes", "1G", 2**30),
        ("max-num-seqs", "16", 16),
        ("tensor-parallel-size", "2", 2),
        ("seed", 0, 0),
        ("enable-prefix-caching", "false", False),
        ("enable-prefix-caching", "True", True),
        ("enforce-eager", True, True),
        ("gpu-memory-utilization", "0.9", 0.9),
        ("dtype", "half", "float16"),
        ("dtype", "float", "float32"),
        ("dtype", "torch.bfloat16", "bfloat16"),
        ("dtype", "BFloat16", "bfloat16"),
        ("dtype", "auto", AUTO),
        ("kv-cache-dtype", "auto", AUTO),
        ("kv-cache-dtype", "FP8", "fp8"),
        ("quantization", "auto_round", "inc"),
        ("quantization", None, None),
        (
            "speculative-config",
            '{"method": "ngram", "num_speculative_tokens": 3}',
            {"method": "ngram", "num_speculative_tokens": 3},
        ),
        ("speculative-config", {"method": "EAGLE3", "model": "m"}, {"method": "eagle3"}),
    ],
)
def test_normalise_reads_values_like_vllms_command_line(arg, value, expected):
    got = normalise(arg, value)
    if expected is AUTO:
        assert got is AUTO
    else:
        assert got == expected and got is not AUTO


@pytest.mark.parametrize(
    ("arg", "value"),
    [
        ("max-num-seqs", "8k"),  # vLLM reads max-num-seqs with int(): no human sizes
        ("max-model-len", "1.5K"),  # binary suffixes take no decimals
        ("enforce-eager", "maybe"),
        ("speculative-config", "ngram"),
        ("gpu-memory-utilization", True),
    ],
)
def test_normalise_refuses_what_vllm_refuses(arg, value):
    with pytest.raises(ValueError):
        normalise(arg, value)


def test_valid_spellings_are_verified_not_flagged():
    effective = {
        "max_model_len": 8192,
        "dtype": "bfloat16",
        "cache_dtype": "fp8",
        "prefix_caching": False,
        "enforce_eager": True,
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.9,
    }
    requested = {
        "max-model-len": "8K",
        "dtype": "torch.bfloat16",
        "kv-cache-dtype": "FP8",
        "no-enable-prefix-caching": True,
        "enforce-eager": "true",
        "tensor-parallel-size": "2",
        "gpu-memory-utilization": "0.90",
    }
    checks = verify_args(requested, effective)
    assert [(c.arg, c.state) for c in checks] == [
        ("max-model-len", "verified"),
        ("dtype", "verified"),
        ("kv-cache-dtype", "verified"),
        ("enable-prefix-caching", "verified"),
        ("enforce-eager", "verified"),
        ("tensor-parallel-size", "verified"),
        ("gpu-memory-utilization", "verified"),
    ]
    assert checks[0].requested == "8K (8192)"
    assert checks[0].source == "/v1/models"
    assert ineffective_args(requested, effective) == []


def test_auto_requests_are_verified_by_any_running_value():
    effective = {"max_model_len": 32768, "dtype": "float16", "cache_dtype": "auto"}
    checks = verify_args(
        {"max-model-len": -1, "dtype": "auto", "kv-cache-dtype": "auto"}, effective
    )
    assert _states(checks) == dict.fromkeys(
        ["max-model-len", "dtype", "kv-cache-dtype"], "verified"
    )
    assert checks[0].running == "32768"


def test_mismatch_names_requested_and_running_value():
    effective = {"max_model_len": 8192, "dtype": "bfloat16", "block_size": 128}
    checks = verify_args({"max-model-len": "8k", "dtype": "half", "block-size": 16}, effective)
    assert [c.state for c in checks] == ["mismatch"] * 3
    assert [c.reason for c in checks] == [
        "max-model-len requested 8k (8000), server runs 8192",
        "dtype requested half (float16), server runs bfloat16",
        "block-size requested 16, server runs 128",
    ]
    assert checks[2].source == "vllm:cache_config_info"


def test_unverified_when_no_source_reads_the_arg_back():
    checks = verify_args({"max-num-seqs": 64, "enforce-eager": True}, {"max_model_len": 512})
    assert [c.state for c in checks] == ["unverified", "unverified"]
    assert checks[0].running is None and checks[0].source is None
    assert checks[0].reason == (
        "max-num-seqs requested 64: not verified, this server shows it in none of: "
        "non-default args log line"
    )
    assert "engine config log line" in checks[1].reason
    assert ineffective_args({"max-num-seqs": 64}, {}) == []  # unverified is not invalid


def test_best_source_decides_when_sources_disagree():
    # /v1/models (what is served) beats the command line as parsed.
    effective = {"max_model_len": 4096, "non_default_args": {"max_model_len": 8192}}
    (check,) = verify_args({"max-model-len": 8192}, effective)
    assert (check.state, check.source) == ("mismatch", "/v1/models")


def test_front_end_options_and_secrets_are_not_reported():
    effective = {"non_default_args": {"api_key": "***", "port": 8000}}
    requested = {
        "api-key": "sk-secret-value-123",
        "hf-token": "hf_abcdefghijkl",
        "host": "0.0.0.0",
        "port": 8000,
        "served-model-name": "m",
        "max-model-len": None,  # left at vLLM's default
    }
    assert verify_args(requested, effective) == []


def test_unknown_args_are_verified_only_by_the_parsed_command_line():
    effective = {"non_default_args": {"max_num_partial_prefills": 2, "swap_space": 8}}
    checks = verify_args(
        {"max-num-partial-prefills": 2, "swap-space": 4, "scheduling-policy": "priority"},
        effective,
    )
    assert [(c.arg, c.state, c.source) for c in checks] == [
        ("max-num-partial-prefills", "verified", "non-default args log line"),
        ("swap-space", "unverified", "non-default args log line"),
        ("scheduling-policy", "unverified", None),
    ]
    assert checks[1].reason == (
        "swap-space requested 4: not verified, the server's non-default args show 8, "
        "which tunebench cannot compare"
    )


def test_secret_values_never_appear(fixtures):
    log = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [utils.py:1] non-default args: "
        "{'model': 'm', 'api_key': 'sk-live-abcdef123456', 'hf_token': 'hf_abcdefghijkl'}"
    )
    parsed = parse_startup_log(log)
    assert parsed["non_default_args"] == {"model": "m", "api_key": "***", "hf_token": "***"}
    checks = verify_args(
        {"api-key": "sk-live-abcdef123456", "hf-overrides": {"token": "x1"}}, parsed
    )
    assert "sk-live" not in repr(checks)
    assert checks[0].requested == '{"token":"***"}'


def test_arg_check_is_frozen():
    (check,) = verify_args({"max-model-len": 512}, {"max_model_len": 512})
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.state = "mismatch"  # type: ignore[misc]


def test_known_args_sources_are_keys_the_reader_fills(fixtures):
    filled = set(_cpu_effective(fixtures)) | {"speculative_num_tokens", "quantized_layers"}
    for arg, known in KNOWN_ARGS.items():
        for source in known.sources:
            assert source.key in filled | {"non_default_args"}, (arg, source.key)


# --- the CPU server: its real start-up log and /metrics ------------------------------------


def test_cpu_server_reads_back_its_args(fixtures):
    effective = _cpu_effective(fixtures)
    assert effective["gpu_memory_utilization"] == 0.92
    assert effective["block_size"] == 128
    assert effective["kv_cache_memory_bytes"] == 1073741824
    assert effective["max_model_len_used"] == 512
    assert effective["non_default_args"]["max_num_seqs"] == 2
    # The configuration this log was started with (SOURCES.md: --max-model-len 512
    # --max-num-seqs 2), then every other arg tunebench knows at the value the server shows.
    requested = {
        "max-model-len": 512,
        "max-num-seqs": 2,
        "max-num-batched-tokens": "1k",
        "gpu-memory-utilization": 0.92,
        "kv-cache-memory-bytes": "1G",
        "block-size": 128,
        "kv-cache-dtype": "auto",
        "enable-prefix-caching": True,
        "enable-chunked-prefill": True,
        "dtype": "bfloat16",
        "enforce-eager": False,
        "tensor-parallel-size": 1,
        "pipeline-parallel-size": 1,
        "data-parallel-size": 1,
        "seed": 0,
    }
    checks = {c.arg: c for c in verify_args(requested, effective)}
    assert set(checks) == set(requested)
    assert {a: c.state for a, c in checks.items() if c.state != "verified"} == {
        "max-num-batched-tokens": "mismatch"  # "1k" is 1000; the server runs 1024
    }
    assert checks["max-num-batched-tokens"].reason == (
        "max-num-batched-tokens requested 1k (1000), server runs 1024"
    )
    assert checks["max-num-seqs"].source == "non-default args log line"
    assert checks["max-model-len"].source == "/v1/models"
    assert checks["gpu-memory-utilization"].source == "vllm:cache_config_info"
    assert checks["block-size"].source == "vllm:cache_config_info"
    assert checks["dtype"].source == "engine config log line"
    assert checks["max-num-batched-tokens"].source == "scheduler log line"


def test_cpu_server_without_quantization_or_speculation(fixtures):
    checks = verify_args(
        {
            "quantization": "fp8",
            "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
        },
        _cpu_effective(fixtures),
    )
    assert [(c.state, c.reason) for c in checks] == [
        ("mismatch", "quantization requested fp8, server runs without quantization"),
        ("mismatch", "speculative-config requested (ngram, 3 tokens), server runs without it"),
    ]


def test_read_effective_still_merges_log_under_server_answers(fixtures):
    # /v1/models wins over the log for max_model_len; the log fills what the server lacks.
    effective = combine_effective(
        {"data": [{"id": "m", "max_model_len": 256}]},
        None,
        None,
        (fixtures / "logs/vllm-0.32-cpu-startup.log").read_text(),
    )
    assert effective["max_model_len"] == 256
    assert effective["max_seq_len"] == 512
    assert effective["kv_capacity_tokens"] == 262144
    assert "gpu_memory_utilization" not in effective  # no /metrics: not read, not guessed


# --- GPU servers: real start-up logs from vLLM users (tests/fixtures/logs/SOURCES.md) ------


def test_gpu_v083_engine_line(fixtures):
    parsed = parse_startup_log((fixtures / "logs/vllm-0.8.3-gpu-engine-line.log").read_text())
    assert parsed["dtype"] == "bfloat16"
    assert parsed["max_seq_len"] == 102400
    assert parsed["enforce_eager"] is True
    assert parsed["enable_chunked_prefill"] is True  # spelled chunked_prefill_enabled there
    assert parsed["seed"] is None
    checks = verify_args(
        {
            "max-model-len": "100K",
            "enforce-eager": True,
            "dtype": "auto",
            "tensor-parallel-size": 2,
            "seed": 42,
            "max-num-seqs": 64,
        },
        parsed,
    )
    assert [(c.arg, c.state) for c in checks] == [
        ("max-model-len", "verified"),
        ("enforce-eager", "verified"),
        ("dtype", "verified"),
        ("tensor-parallel-size", "mismatch"),
        ("seed", "unverified"),  # the line says seed=None: no reading
        ("max-num-seqs", "unverified"),
    ]
    assert checks[3].reason == "tensor-parallel-size requested 2, server runs 1"


def test_gpu_non_default_args_with_config_objects(fixtures):
    parsed = parse_startup_log((fixtures / "logs/vllm-gpu-lmcache-eager.log").read_text())
    args = parsed["non_default_args"]
    assert args["gpu_memory_utilization"] == 0.35
    assert args["kv_transfer_config"].startswith("KVTransferConfig(kv_connector='LMCache")
    assert parsed["max_model_len_used"] == 1024
    assert parsed["max_num_batched_tokens"] == 8192
    checks = verify_args(
        {
            "max-model-len": "1K",
            "enforce-eager": True,
            "gpu-memory-utilization": 0.35,
            "max-num-batched-tokens": "8k",
            "load-format": "dummy",
        },
        parsed,
    )
    assert [(c.arg, c.state, c.source) for c in checks] == [
        ("max-model-len", "verified", "max model len log line"),
        ("enforce-eager", "verified", "non-default args log line"),
        ("gpu-memory-utilization", "verified", "non-default args log line"),
        ("max-num-batched-tokens", "mismatch", "scheduler log line"),
        ("load-format", "verified", "non-default args log line"),
    ]
    assert checks[3].reason == "max-num-batched-tokens requested 8k (8000), server runs 8192"


def test_gpu_autoround_tp4_engine_line(fixtures):
    parsed = parse_startup_log((fixtures / "logs/vllm-0.24-gpu-autoround-tp4.log").read_text())
    assert parsed["quantization"] == "inc"
    assert parsed["kv_cache_size_tokens"] == 1774963
    # The args of this stack as its non-default args line spells them (vllm-0.27 fixture).
    requested = {
        "quantization": "auto_round",
        "dtype": "half",
        "tensor-parallel-size": 4,
        "kv-cache-dtype": "fp8_e5m2",
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 3},
        "enable-prefix-caching": True,
    }
    checks = verify_args(requested, parsed)
    assert _states(checks) == {
        "quantization": "verified",  # vLLM runs the auto-round format as "inc"
        "dtype": "verified",
        "tensor-parallel-size": "verified",
        "kv-cache-dtype": "verified",
        "speculative-config": "verified",
        "enable-prefix-caching": "unverified",  # the excerpt ends before that field
    }
    assert checks[0].running == "inc"
    wrong = verify_args(
        {"speculative-config": '{"method": "mtp", "num_speculative_tokens": 5}'}, parsed
    )
    assert (
        wrong[0].reason
        == "speculative-config requested (mtp, 5 tokens), server runs (mtp, 3 tokens)"
    )
    eagle = verify_args({"speculative-config": {"method": "eagle3"}}, parsed)
    assert eagle[0].state == "mismatch"


def test_gpu_autoround_mtp_non_default_args(fixtures):
    parsed = parse_startup_log((fixtures / "logs/vllm-0.27-gpu-autoround-mtp.log").read_text())
    assert parsed["speculative_method"] == "mtp" and parsed["speculative_num_tokens"] == 4
    requested = {
        "quantization": "auto_round",
        "max-model-len": "256K",
        "tensor-parallel-size": 2,
        "kv-cache-dtype": "fp8_e4m3",
        "max-num-seqs": 1,
        "max-num-batched-tokens": "8K",
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 4},
        "served-model-name": "qwen3.8-27b",
    }
    checks = verify_args(requested, parsed)
    assert {c.arg: (c.state, c.source) for c in checks} == {
        "quantization": ("verified", "non-default args log line"),
        "max-model-len": ("verified", "non-default args log line"),
        "tensor-parallel-size": ("verified", "non-default args log line"),
        "kv-cache-dtype": ("verified", "non-default args log line"),
        "max-num-seqs": ("verified", "non-default args log line"),
        "max-num-batched-tokens": ("verified", "non-default args log line"),
        "speculative-config": ("verified", "engine config log line"),
    }
    assert checks[1].reason == (
        "max-model-len 256K (262144): the server parsed 262144 (non-default args log line)"
    )


def test_an_arg_absent_from_a_logged_non_default_line_runs_vllms_default():
    # The helm port-forward case: values asked for max-num-seqs 2, the pod's log says which
    # args it was started with, and max_num_seqs is not among them.
    effective = {"max_model_len": 256, "non_default_args": {"max_model_len": 256}}
    checks = verify_args(
        {"max-num-seqs": 2, "enforce-eager": True, "dtype": "auto", "tensor-parallel-size": 1},
        effective,
    )
    assert [(c.arg, c.state) for c in checks] == [
        ("max-num-seqs", "mismatch"),
        ("enforce-eager", "mismatch"),
        ("dtype", "verified"),
        ("tensor-parallel-size", "verified"),
    ]
    assert checks[0].reason == (
        "max-num-seqs requested 2, server runs vLLM's default (not in its non-default args)"
    )
    assert checks[1].reason == (
        "enforce-eager requested True, server runs the default False (not in its non-default args)"
    )
    assert ineffective_args({"max-num-seqs": 2}, effective) == [checks[0].reason]
    # No line at all proves nothing; a default whose value moved between releases neither.
    assert verify_args({"max-num-seqs": 2}, {"max_model_len": 256})[0].state == "unverified"
    (gpu,) = verify_args({"gpu-memory-utilization": 0.5}, effective)
    assert gpu.state == "unverified"


def test_absent_means_default_table_matches_the_installed_vllm():
    from tunebench.points.validity import ABSENT_MEANS_DEFAULT

    arg_utils = pytest.importorskip("vllm.engine.arg_utils")
    defaults = {f.name: f.default for f in dataclasses.fields(arg_utils.EngineArgs)}
    for arg, default in ABSENT_MEANS_DEFAULT.items():
        assert defaults[arg.replace("-", "_")] == default, arg


def test_an_mtp_method_name_is_what_the_server_calls_mtp(fixtures):
    # a real GPU start (tests/fixtures/logs/SOURCES.md): the engine line says method='mtp'
    log = (fixtures / "logs/vllm-0.27-gpu-autoround-mtp.log").read_text()
    effective = parse_startup_log(log)
    assert effective["speculative_method"] == "mtp"
    for method in ("qwen3_next_mtp", "deepseek_mtp", "mtp"):
        wanted = {"speculative-config": {"method": method, "num_speculative_tokens": 4}}
        assert _states(verify_args(wanted, effective)) == {"speculative-config": "verified"}
    # a different token count is still a mismatch
    wanted = {"speculative-config": {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}}
    assert _states(verify_args(wanted, effective)) == {"speculative-config": "mismatch"}


def test_a_draft_model_that_vllm_recognises_as_eagle3_is_the_request_honoured():
    log = (
        "INFO [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='m', "
        "speculative_config=SpeculativeConfig(method='eagle3', model='org/EAGLE3-x', "
        "num_spec_tokens=3), quantization=None, enforce_eager=False\n"
    )
    effective = parse_startup_log(log)
    draft = {"method": "draft_model", "model": "org/EAGLE3-x", "num_speculative_tokens": 3}
    assert _states(verify_args({"speculative-config": draft}, effective)) == {
        "speculative-config": "verified"
    }
    # but ngram asked and eagle3 running is not
    ngram = {"method": "ngram", "num_speculative_tokens": 3}
    assert _states(verify_args({"speculative-config": ngram}, effective)) == {
        "speculative-config": "mismatch"
    }


@pytest.mark.parametrize(
    ("family", "method_module", "config_class"),
    [
        ("gptq", "vllm.model_executor.layers.quantization.auto_gptq", "AutoGPTQConfig"),
        ("awq", "vllm.model_executor.layers.quantization.auto_awq", "AutoAWQConfig"),
    ],
)
def test_every_name_a_gptq_or_awq_request_runs_under_reads_as_its_family(
    monkeypatch, family, method_module, config_class
):
    """The names are vLLM's: each request its override accepts on a GPU is the engine line's
    `quantization=` of that override, and both read as one family (truth: the installed
    vLLM's `override_quantization_method`, not tunebench's table)."""
    module = pytest.importorskip(method_module)
    if hasattr(module, "current_platform"):  # AWQ: vLLM-CPU keeps its own path; a GPU's
        monkeypatch.setattr(module.current_platform, "is_cpu", lambda: False)
    config = getattr(module, config_class)
    for asked in (family, f"{family}_marlin", f"auto_{family}", "marlin", None):
        runs = config.override_quantization_method({"quant_method": family}, asked)
        assert runs is not None, asked
        assert normalise("quantization", runs) == family
        if asked is not None:
            effective = {"quantization": runs}
            assert (
                _states(verify_args({"quantization": asked}, effective))
                == {"quantization": "verified"}
                or asked == "marlin"
            ), asked
