#!/usr/bin/env python3
"""Capture real NVIDIA GPU readings as test fixtures for tunebench's GPU code paths.

Usage: python3 capture.py OUTDIR

Writes into OUTDIR (flat, 8 files):
  nvidia-smi-q.xml                   nvidia-smi -q -x at idle
  nvidia-smi-query-gpu.csv           --query-gpu=index,uuid,name,memory.total,memory.used,
                                     driver_version,power.draw,pci.bus_id --format=csv, at idle
  nvidia-smi-name-mem-driver.csv     --query-gpu=name,memory.total,driver_version
                                     --format=csv,noheader (what tunebench/environment.py parses)
  nvidia-smi-compute-apps-busy.csv   --query-compute-apps=pid,used_memory --format=csv while a
                                     child holds ~30 GiB and runs matmuls
  nvidia-smi-compute-apps-after.csv  the same after that child's process group was SIGKILLed
                                     and NVML reports the memory free again
  nvml-release-timeline.csv          trial,t_s,event,used_mib,compute_pids: NVML memory used and
                                     compute pids every 50 ms, from the child's spawn until the
                                     memory is back within 1 GiB of idle (or 30 s after the signal);
                                     trials sigkill and sigterm
  nvml-energy-samples.csv            t_s,phase,energy_mj,power_mw every 200 ms: idle, a bf16
                                     8192x8192 matmul loop (~15 s), idle
  nvml-device.json                   the device, driver, NVML/CUDA versions, capture date, uname -r,
                                     and a summary of the capture (children's pids, events, numbers)

Only the standard library, pynvml (nvidia-ml-py), torch (in child processes only) and
nvidia-smi are used. The parent never imports torch, so every GPU process NVML lists is one of
the children. Every child runs in its own session (process group); all are killed by process
group in a finally block. Without a GPU the script prints why and exits with status 2.
"""

from __future__ import annotations

import csv
import datetime
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

MIB = 1024 * 1024
HOLD_GIB = 30
RELEASE_MARGIN_MIB = 1024
RELEASE_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 60.0
TIMELINE_PERIOD_S = 0.05
ENERGY_PERIOD_S = 0.2
ENERGY_IDLE_S = 5.0
ENERGY_MATMUL_S = 15.0
SMI_TIMEOUT_S = 30

# The child: mode "hold" allocates HOLD GiB and runs small matmuls until it is signalled
# (SIGTERM raises SystemExit: a graceful Python exit, as a server's shutdown would be);
# mode "matmul" runs bf16 8192x8192 matmuls for SECONDS and exits. It reports its progress
# as single words on stdout.
CHILD = r"""
import os, signal, sys, time
mode = sys.argv[1]
print("spawned", os.getpid(), flush=True)
import torch
print("torch", torch.__version__, torch.version.cuda, flush=True)
dev = torch.device("cuda", 0)
torch.zeros(1, device=dev)
torch.cuda.synchronize(dev)
print("cuda_init", flush=True)
if mode == "hold":
    gib = int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
    hold = torch.empty(gib * 1024 ** 3, dtype=torch.uint8, device=dev)
    torch.cuda.synchronize(dev)
    print("allocated", hold.numel(), flush=True)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    c = a @ b
    torch.cuda.synchronize(dev)
    print("ready", flush=True)
    while True:
        for _ in range(10):
            c = a @ b
        torch.cuda.synchronize(dev)
else:
    seconds = float(sys.argv[2])
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        c = a @ b
    torch.cuda.synchronize(dev)
    print("ready", flush=True)
    t0 = time.monotonic()
    iters = 0
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize(dev)
        iters += 20
    dt = time.monotonic() - t0
    print("done", iters, round(dt, 3), round(2 * n ** 3 * iters / dt / 1e12, 1), flush=True)
"""


class Interrupted(Exception):
    """SIGTERM or SIGINT to the capture (e.g. from `timeout`): clean up and write what we have."""


def on_signal(signum, frame) -> None:
    raise Interrupted(f"signal {signum}")


def log(msg: str) -> None:
    print(f"[capture {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def no_gpu(why: str) -> None:
    print(
        f"capture.py: no NVIDIA GPU to capture from here: {why}. Nothing was written.", flush=True
    )
    sys.exit(2)


def smi(args: list[str]) -> tuple[int, str, str]:
    try:
        p = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"nvidia-smi {' '.join(args)} timed out after {SMI_TIMEOUT_S} s"
    except OSError as exc:
        return 127, "", str(exc)
    return p.returncode, p.stdout, p.stderr


class Capture:
    def __init__(self, outdir: str, nvml) -> None:
        self.outdir = outdir
        self.nvml = nvml
        self.handle = nvml.nvmlDeviceGetHandleByIndex(0)
        self.children: list[subprocess.Popen] = []
        self.summary: dict = {"smi": {}, "trials": {}, "energy": {}}

    # -- files -------------------------------------------------------------------------
    def path(self, name: str) -> str:
        return os.path.join(self.outdir, name)

    def save_smi(self, name: str, args: list[str]) -> None:
        rc, out, err = smi(args)
        with open(self.path(name), "w") as f:
            f.write(out)
        self.summary["smi"][name] = {"args": args, "rc": rc, "stderr": err.strip()[:2000]}
        log(
            f"{name}: nvidia-smi rc={rc}, {len(out)} bytes"
            + (f", stderr: {err.strip()}" if err.strip() else "")
        )

    # -- NVML readings --------------------------------------------------------------------
    def used_mib(self) -> int:
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used // MIB

    def pids(self) -> str:
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except self.nvml.NVMLError as exc:
            return f"error:{exc}".replace(",", ";").replace(" ", "_")
        return " ".join(str(p.pid) for p in procs)

    def idle_baseline(self) -> int:
        values = []
        for _ in range(10):
            values.append(self.used_mib())
            time.sleep(0.05)
        values.sort()
        return values[len(values) // 2]

    # -- children -------------------------------------------------------------------------
    def spawn(self, mode: str, arg: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-u", "-c", CHILD, mode, arg],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.children.append(proc)
        return proc

    def kill_children(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: pgid == pid
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log(f"child {proc.pid} did not exit 10 s after SIGKILL")

    @staticmethod
    def reader(proc: subprocess.Popen, on_line) -> threading.Thread:
        def run() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                on_line(line.rstrip("\n"))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    # -- memory release trials -------------------------------------------------------------
    def release_trial(self, trial: str, baseline: int, rows: list) -> None:
        sig = signal.SIGKILL if trial == "sigkill" else signal.SIGTERM
        info: dict = {"signal": trial, "hold_gib": HOLD_GIB, "events": {}, "child_output": []}
        self.summary["trials"][trial] = info
        lock = threading.Lock()
        seen: dict[str, float] = {}
        stop = threading.Event()
        t0 = time.monotonic()

        def mark(event: str) -> None:
            t = time.monotonic() - t0
            used, pids = self.used_mib(), self.pids()
            with lock:
                rows.append([trial, round(t, 4), event, used, pids])
                seen.setdefault(event, t)
                info["events"].setdefault(event, round(t, 4))

        def sampler() -> None:
            next_t = time.monotonic()
            while not stop.is_set():
                t = time.monotonic() - t0
                try:
                    used, pids = self.used_mib(), self.pids()
                except self.nvml.NVMLError as exc:
                    log(f"NVML read failed: {exc}")
                    used, pids = -1, ""
                with lock:
                    rows.append([trial, round(t, 4), "", used, pids])
                    last[0] = (t, used)
                next_t += TIMELINE_PERIOD_S
                stop.wait(max(0.0, next_t - time.monotonic()))

        last: list = [(0.0, baseline)]
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        mark("spawn")
        proc = self.spawn("hold", str(HOLD_GIB))
        info["child_pid"] = proc.pid

        def on_line(line: str) -> None:
            info["child_output"].append(line[:300])
            word = line.split(" ", 1)[0]
            if word in ("cuda_init", "allocated", "ready"):
                mark(word)

        self.reader(proc, on_line)
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while "ready" not in seen and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if "ready" not in seen:
                log(
                    f"{trial}: child not ready (rc={proc.poll()}); "
                    f"output: {info['child_output'][-5:]}"
                )
                mark("ready_timeout" if proc.poll() is None else "child_failed")
            else:
                log(
                    f"{trial}: child {proc.pid} ready at {seen['ready']:.2f} s, "
                    f"used {self.used_mib()} MiB"
                )
            time.sleep(1.5)
            if trial == "sigkill":
                mark("busy_snapshot")
                self.save_smi(
                    "nvidia-smi-compute-apps-busy.csv",
                    ["--query-compute-apps=pid,used_memory", "--format=csv"],
                )
                time.sleep(0.5)
            info["used_mib_busy"] = self.used_mib()
            mark(trial)
            t_sig = seen[trial]
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                log(f"{trial}: child already gone")
            released = False
            while time.monotonic() - t0 - t_sig < RELEASE_TIMEOUT_S:
                if proc.poll() is not None and "child_exited" not in seen:
                    mark("child_exited")
                    info["child_returncode"] = proc.returncode
                with lock:
                    t_last, used_last = last[0]
                if t_last > t_sig and 0 <= used_last <= baseline + RELEASE_MARGIN_MIB:
                    info["release_first_sample_t_s"] = round(t_last, 4)
                    released = True
                    break
                time.sleep(0.005)
            if released:
                mark("released")
                if proc.poll() is not None and "child_exited" not in seen:
                    mark("child_exited")
                    info["child_returncode"] = proc.returncode
                time.sleep(0.25)
            else:
                mark("release_timeout")
            info["released"] = released
            if released:
                info["release_ms_after_signal"] = round(
                    (info["release_first_sample_t_s"] - t_sig) * 1000.0, 1
                )
            if "child_exited" in seen:
                info["child_exit_ms_after_signal"] = round(
                    (seen["child_exited"] - t_sig) * 1000.0, 1
                )
            log(
                f"{trial}: released={released} "
                f"release_ms={info.get('release_ms_after_signal')} "
                f"exit_ms={info.get('child_exit_ms_after_signal')} rc={proc.poll()}"
            )
        finally:
            stop.set()
            thread.join(timeout=5)
            self.kill_children()
            if proc.returncode is not None:
                info.setdefault("child_returncode", proc.returncode)

    # -- energy -----------------------------------------------------------------------------
    def energy(self) -> list:
        rows: list = []
        phase = ["idle_before"]
        stop = threading.Event()
        t0 = time.monotonic()
        info: dict = {"child_output": [], "phase_start_t_s": {}}
        self.summary["energy"] = info

        def sample() -> None:
            t = time.monotonic() - t0
            try:
                e = self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
            except self.nvml.NVMLError as exc:
                e = f"error:{exc}"
            try:
                p = self.nvml.nvmlDeviceGetPowerUsage(self.handle)
            except self.nvml.NVMLError as exc:
                p = f"error:{exc}"
            rows.append([round(t, 4), phase[0], e, p])

        def sampler() -> None:
            next_t = time.monotonic()
            while not stop.is_set():
                sample()
                next_t += ENERGY_PERIOD_S
                stop.wait(max(0.0, next_t - time.monotonic()))

        def set_phase(name: str) -> None:
            phase[0] = name
            info["phase_start_t_s"][name] = round(time.monotonic() - t0, 4)

        info["phase_start_t_s"]["idle_before"] = 0.0
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        proc = None
        try:
            time.sleep(ENERGY_IDLE_S)
            set_phase("startup")
            proc = self.spawn("matmul", str(ENERGY_MATMUL_S))
            info["child_pid"] = proc.pid

            def on_line(line: str) -> None:
                info["child_output"].append(line[:300])
                word = line.split(" ", 1)[0]
                if word == "ready":
                    set_phase("matmul")
                elif word == "done":
                    set_phase("teardown")
                    parts = line.split()
                    if len(parts) == 4:
                        info["matmul_iters"] = int(parts[1])
                        info["matmul_s"] = float(parts[2])
                        info["matmul_tflops"] = float(parts[3])

            reader = self.reader(proc, on_line)
            try:
                proc.wait(timeout=READY_TIMEOUT_S + ENERGY_MATMUL_S + 30)
            except subprocess.TimeoutExpired:
                log("energy: matmul child overran; killing it")
            reader.join(timeout=5)
            info["child_returncode"] = proc.poll()
            set_phase("idle_after")
            time.sleep(ENERGY_IDLE_S)
        finally:
            stop.set()
            thread.join(timeout=5)
            self.kill_children()
        log(
            f"energy: {len(rows)} samples, child rc={info.get('child_returncode')}, "
            f"{info.get('matmul_tflops')} TFLOP/s; output tail {info['child_output'][-2:]}"
        )
        return rows

    # -- device -------------------------------------------------------------------------------
    def device_info(self) -> dict:
        nv, h = self.nvml, self.handle
        d: dict = {}

        def put(key: str, fn) -> None:
            try:
                d[key] = fn()
            except Exception as exc:  # NVMLError or a missing function in an old binding
                d[key] = None
                d.setdefault("errors", {})[key] = f"{type(exc).__name__}: {exc}"

        put("index", lambda: nv.nvmlDeviceGetIndex(h))
        put("name", lambda: text(nv.nvmlDeviceGetName(h)))
        put("uuid", lambda: text(nv.nvmlDeviceGetUUID(h)))
        put("pci_bus_id", lambda: text(nv.nvmlDeviceGetPciInfo(h).busId))
        put("driver_version", lambda: text(nv.nvmlSystemGetDriverVersion()))
        put("nvml_version", lambda: text(nv.nvmlSystemGetNVMLVersion()))
        put("cuda_driver_version", lambda: nv.nvmlSystemGetCudaDriverVersion())
        if isinstance(d.get("cuda_driver_version"), int):
            v = d["cuda_driver_version"]
            d["cuda_driver_version_str"] = f"{v // 1000}.{(v % 1000) // 10}"
        put("memory_total_bytes", lambda: nv.nvmlDeviceGetMemoryInfo(h).total)
        if isinstance(d.get("memory_total_bytes"), int):
            d["memory_total_mib"] = d["memory_total_bytes"] // MIB
        put("power_limit_mw", lambda: nv.nvmlDeviceGetPowerManagementLimit(h))
        put("power_limit_enforced_mw", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        put("power_limit_default_mw", lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h))
        put("device_count", lambda: nv.nvmlDeviceGetCount())
        return d


def write_csv(path: str, header: list[str], rows: list) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: python3 capture.py OUTDIR", file=sys.stderr)
        return 64
    outdir = argv[1]
    started = time.monotonic()
    captured_utc = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    if not shutil.which("nvidia-smi"):
        no_gpu("nvidia-smi is not on the PATH")
    try:
        import pynvml
    except ImportError:
        no_gpu("pynvml (nvidia-ml-py) is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        no_gpu(f"NVML did not start ({exc})")
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            no_gpu("NVML sees no GPU")
    except pynvml.NVMLError as exc:
        no_gpu(f"NVML could not count GPUs ({exc})")
    if importlib.util.find_spec("torch") is None:
        no_gpu(f"torch is not installed for {sys.executable}")

    os.makedirs(outdir, exist_ok=True)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cap = Capture(outdir, pynvml)
    status = 0
    try:
        device = cap.device_info()
        device["captured_utc"] = captured_utc
        device["uname_r"] = os.uname().release
        device["python"] = sys.version.split()[0]
        try:
            device["pynvml_version"] = __import__("importlib.metadata").metadata.version(
                "nvidia-ml-py"
            )
        except Exception:
            device["pynvml_version"] = None
        log(
            f"device: {device.get('name')} driver {device.get('driver_version')} "
            f"memory {device.get('memory_total_mib')} MiB uname -r {device['uname_r']}"
        )

        baseline = cap.idle_baseline()
        cap.summary["idle_used_mib_before"] = baseline
        cap.summary["idle_compute_pids_before"] = cap.pids()
        log(
            f"idle memory used {baseline} MiB; "
            f"compute pids [{cap.summary['idle_compute_pids_before']}]"
        )

        # a, b: idle nvidia-smi
        cap.save_smi("nvidia-smi-q.xml", ["-q", "-x"])
        cap.save_smi(
            "nvidia-smi-query-gpu.csv",
            [
                "--query-gpu=index,uuid,name,memory.total,memory.used,driver_version,power.draw,pci.bus_id",
                "--format=csv",
            ],
        )
        cap.save_smi(
            "nvidia-smi-name-mem-driver.csv",
            ["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
        )

        # c, d: memory release after SIGKILL and SIGTERM
        timeline: list = []
        try:
            cap.release_trial("sigkill", baseline, timeline)
            cap.save_smi(
                "nvidia-smi-compute-apps-after.csv",
                ["--query-compute-apps=pid,used_memory", "--format=csv"],
            )
            cap.release_trial("sigterm", baseline, timeline)
        finally:
            order = {"sigkill": 0, "sigterm": 1}
            timeline.sort(key=lambda r: (order[r[0]], r[1]))
            write_csv(
                cap.path("nvml-release-timeline.csv"),
                ["trial", "t_s", "event", "used_mib", "compute_pids"],
                timeline,
            )

        # e: energy
        energy_rows: list = []
        try:
            energy_rows = cap.energy()
        finally:
            write_csv(
                cap.path("nvml-energy-samples.csv"),
                ["t_s", "phase", "energy_mj", "power_mw"],
                energy_rows,
            )
        cap.summary["energy"].update(summarize_energy(energy_rows))
        cap.summary["idle_used_mib_after"] = cap.used_mib()
        incomplete = [t for t, i in cap.summary["trials"].items() if "ready" not in i["events"]]
        if "matmul_tflops" not in cap.summary["energy"]:
            incomplete.append("energy")
        if incomplete:
            cap.summary["incomplete"] = incomplete
            log(f"incomplete: the GPU child of {incomplete} never ran its work (see child_output)")
            status = 1
    except Exception as exc:
        log(f"capture failed: {type(exc).__name__}: {exc}")
        cap.summary["failure"] = f"{type(exc).__name__}: {exc}"
        status = 1
        import traceback

        traceback.print_exc()
    finally:
        cap.kill_children()
        cap.summary["duration_s"] = round(time.monotonic() - started, 1)
        try:
            device = locals().get("device") or {}
            device["capture"] = cap.summary
            with open(cap.path("nvml-device.json"), "w") as f:
                json.dump(device, f, indent=2, sort_keys=False)
                f.write("\n")
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception:
                pass
    log(f"done in {time.monotonic() - started:.1f} s; files: {sorted(os.listdir(outdir))}")
    print(json.dumps({k: cap.summary.get(k) for k in ("idle_used_mib_before", "energy")}, indent=1))
    for trial, info in cap.summary["trials"].items():
        print(trial, {k: v for k, v in info.items() if k != "child_output"})
    return status


def summarize_energy(rows: list) -> dict:
    """Mean power per phase and the energy counter's delta over the matmul phase."""
    out: dict = {}
    by_phase: dict[str, list] = {}
    for t, phase, e, p in rows:
        if isinstance(e, int) and isinstance(p, int):
            by_phase.setdefault(phase, []).append((t, e, p))
    for phase, samples in by_phase.items():
        mean_w = sum(s[2] for s in samples) / len(samples) / 1000.0
        entry = {"samples": len(samples), "mean_power_w": round(mean_w, 1)}
        if len(samples) >= 2:
            dt = samples[-1][0] - samples[0][0]
            de = samples[-1][1] - samples[0][1]
            entry["energy_delta_j"] = round(de / 1000.0, 3)
            entry["span_s"] = round(dt, 3)
            if dt > 0:
                entry["counter_power_w"] = round(de / 1000.0 / dt, 1)
        out[phase] = entry
    return {"phases": out}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
