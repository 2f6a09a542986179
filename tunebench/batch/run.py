"""`tunebench batch`: every engine configuration pushes the whole dataset through the model.

Per configuration, the prompts are split into `shards` contiguous slices, one worker
process each (`tunebench.batch.worker`, its own process group, its own device:
CUDA_VISIBLE_DEVICES on GPU, its own cores on CPU). Outputs are merged into
`outputs/<config>.jsonl`, keyed by record id; the phases of each shard go to the manifest
and one row per configuration to points.csv (load_kind "batch", target = records), so
`report`, `show` and `compare` read a batch run like any other.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tunebench import demo
from tunebench.batch.dataset import PromptRenderer, load_records
from tunebench.batch.spec import BatchSpec, check_json_schema
from tunebench.deploy.local import (
    gpu_visible,
    server_error_line,
    vllm_environment,
    with_builtin_drafts,
)
from tunebench.errors import SpecError
from tunebench.processes import ManagedProcess
from tunebench.quality.prompts import load_prompts, prompts_path
from tunebench.quality.verdicts import write_table
from tunebench.seams.progress import Reporter, SilentReporter
from tunebench.spec.plan import (
    ServerConfig,
    expand_configs,
    format_value,
    gpus_per_server,
    resolve_model,
)
from tunebench.store.files import write_atomic
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore

PHASES = ("import_s", "load_s", "init_s", "compile_s", "generate_s", "write_s")


@dataclass
class BatchOutcome:
    config_id: str
    status: str
    error: str | None = None


def plan_configs(spec: BatchSpec, spec_path: Path) -> list[ServerConfig]:
    if spec.engine == "transformers":
        model = resolve_model(spec.model, spec_path.parent, "model", spec_path)
        tokenizer = (
            resolve_model(spec.tokenizer, spec_path.parent, "tokenizer", spec_path)
            if spec.tokenizer
            else None
        )
        return [ServerConfig("c1", "transformers", model, tokenizer, {}, {})]
    adapter = SimpleNamespace(server=spec.engine_args, model=spec.model, tokenizer=spec.tokenizer)
    return expand_configs(adapter, spec_path.parent, spec_path)


def render_prompts(spec: BatchSpec, spec_path: Path) -> list[dict[str, str]]:
    dataset = (spec_path.parent / spec.dataset.path).resolve()
    if not dataset.is_file():
        raise SpecError(
            f"{spec_path}: dataset.path: {dataset} is not a file; the path is "
            "relative to the spec file"
        )
    try:
        records = load_records(dataset, spec.dataset.id_field, spec.dataset.limit)
    except SpecError as exc:  # names the dataset file; say which spec and key led there
        raise SpecError(f"{spec_path}: dataset.path: {exc}") from None
    if spec.prompt.template_file is not None:
        template_path = (spec_path.parent / spec.prompt.template_file).resolve()
        try:
            template = template_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(
                f"{spec_path}: prompt.template_file: {exc.strerror}: {template_path}"
            ) from None
        except UnicodeDecodeError:
            raise SpecError(
                f"{spec_path}: prompt.template_file: {template_path} is not UTF-8 "
                "text; save it as UTF-8"
            ) from None
        where = f"{spec_path}: prompt.template_file {template_path}"
    else:
        template, where = spec.prompt.template, f"{spec_path}: prompt.template"
    renderer = PromptRenderer(template, where)
    return [{"id": r.id, "prompt": renderer.render(r)} for r in records]


def json_schema_of(spec: BatchSpec, spec_path: Path) -> dict | None:
    so = spec.structured_output
    if so is None:
        return None
    if so.json_schema_file is not None:
        path = (spec_path.parent / so.json_schema_file).resolve()
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SpecError(f"{spec_path}: structured_output.json_schema_file: {exc}") from None
        check_json_schema(schema, f"{spec_path}: structured_output.json_schema_file {path}")
        return schema
    return so.json_schema


def shard_slices(count: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) slices covering 0..count once; sizes differ by at most 1."""
    shards = max(1, min(shards, count))
    base, extra = divmod(count, shards)
    out, start = [], 0
    for index in range(shards):
        end = start + base + (1 if index < extra else 0)
        out.append((start, end))
        start = end
    return out


def run_batch(
    spec: BatchSpec,
    spec_path: Path,
    spec_data: dict,
    output_root: Path,
    reporter: Reporter | None = None,
    shards: int | None = None,
    on_store=None,
) -> tuple[RunStore, list[BatchOutcome]]:
    reporter = reporter or SilentReporter()
    shards = shards or spec.shards
    prompts = render_prompts(spec, spec_path)
    schema = json_schema_of(spec, spec_path)
    if spec.quality is not None:  # a bad prompts file stops here, before any engine starts
        load_prompts(prompts_path(spec.quality.prompts, spec_path.parent))
    configs = plan_configs(spec, spec_path)
    varied = sorted({k for c in configs for k in c.varied})
    store = RunStore.create(
        output_root,
        RunKind.BATCH,
        spec.name,
        spec=spec_data,
        spec_path=spec_path,
        deployment_kind=f"batch-{spec.engine}",
        varied_args=varied,
        records=len(prompts),
        shards=shards,
    )
    if on_store:
        on_store(store)
    outcomes: list[BatchOutcome] = []
    with store.running("batch") as attempt:
        for index, config in enumerate(configs, start=1):
            reporter.config_starting(config, index, len(configs))
            outcomes.append(
                _run_config(spec, spec_path, store, config, prompts, schema, shards, reporter)
            )
        write_table(store)
        if any(o.status != "complete" for o in outcomes):
            attempt.fail()
    return store, outcomes


def _run_config(
    spec: BatchSpec,
    spec_path: Path,
    store: RunStore,
    config: ServerConfig,
    prompts: list[dict],
    schema: dict | None,
    shards: int,
    reporter: Reporter,
) -> BatchOutcome:
    work = store.layout.batch_dir(config.config_id)
    work.mkdir(parents=True, exist_ok=True)
    model = demo.resolve_builtin(config.model)
    tokenizer = demo.resolve_builtin(config.tokenizer) if config.tokenizer else None
    store.update_config(
        config.config_id,
        label=config.label,
        model=config.model,
        args=config.args,
        engine=spec.engine,
        varied=config.varied,
        status=ConfigStatus.RUNNING,
    )
    slices = shard_slices(len(prompts), shards)
    on_gpu = gpu_visible()
    # each shard's engine holds tensor x pipeline x data parallel GPUs of the visible ones
    # (a Ray job on a cluster elsewhere places its engines there: nothing to count here)
    remote_ray = spec.engine == "ray" and bool(spec.ray.address)
    try:
        gpu_sets = (
            shard_gpus(visible_gpus(), gpus_per_server(config.args), len(slices))
            if on_gpu and not remote_ray
            else []
        )
    except ValueError as error:
        store.update_config(config.config_id, status=ConfigStatus.FAILED, error=str(error))
        reporter.config_failed(config, str(error))
        return BatchOutcome(config.config_id, "failed", str(error))
    processes: list[ManagedProcess] = []
    started = time.time()
    try:
        for shard, (first, end) in enumerate(slices):
            prompt_path = work / f"prompts-{shard}.jsonl"
            write_atomic(
                prompt_path,
                "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts[first:end]),
            )
            job = {
                "engine": spec.engine,
                "model": model,
                "tokenizer": tokenizer,
                # a builtin: draft as its built path, as the local server gets it
                "engine_args": with_builtin_drafts(config).args,
                "mode": spec.prompt.mode,
                "system": spec.prompt.system,
                "sampling": spec.sampling.model_dump(),
                "structured_output": {
                    "choice": spec.structured_output.choice,
                    "json_schema": schema,
                }
                if spec.structured_output
                else None,
                "transformers": spec.transformers.model_dump(),
                "ray": {
                    **spec.ray.model_dump(),
                    "cpu": not on_gpu,
                    "env": {
                        k: v
                        for k, v in vllm_environment(model, cpu=not on_gpu).items()
                        if k.startswith(("VLLM_", "HF_HUB_OFFLINE", "LD_PRELOAD"))
                    },
                },
                "prompts": str(prompt_path),
                "outputs": str(work / f"outputs-{shard}.jsonl"),
                "result": str(work / f"result-{shard}.json"),
                "log": str(work / f"worker-{shard}.log"),
                # the quality check's answers: once per configuration, by the first shard
                "quality": _quality_job(spec, spec_path, work) if shard == 0 else None,
            }
            job_path = work / f"job-{shard}.json"
            job_path.write_text(json.dumps(job, indent=2))
            env = vllm_environment(
                model,
                cpu=not on_gpu,
                threads_bind=_cpu_bind(shard, len(slices)) if not on_gpu else "auto",
            )
            env["VLLM_ENABLE_V1_MULTIPROCESSING"] = (
                "0"  # engine in the worker: its logs time phases
            )
            if gpu_sets:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_sets[shard])
            processes.append(
                ManagedProcess(
                    [sys.executable, "-m", "tunebench.batch.worker", str(job_path)],
                    env=env,
                    log_path=work / f"worker-{shard}.log",
                )
            )
        reporter.server_status(f"{len(processes)} worker(s) generating {len(prompts)} records …")
        errors = _wait_all(processes, spec.start_timeout_s)
    finally:
        for process in processes:
            process.stop(grace_s=5)
    if errors:
        error = "; ".join(errors)
        store.update_config(config.config_id, status=ConfigStatus.FAILED, error=error)
        reporter.config_failed(config, error)
        return BatchOutcome(config.config_id, "failed", error)
    results = [json.loads((work / f"result-{i}.json").read_text()) for i in range(len(slices))]
    _record_quality(store, config.config_id, work, results[0])
    outputs = _merge_outputs(work, len(slices), store.layout.outputs(config.config_id))
    row = _row(store, config, results, len(prompts), outputs, schema, time.time() - started)
    store.add_point(row)
    store.update_config(
        config.config_id,
        status=ConfigStatus.COMPLETE,
        shards=results,
        outputs=store.layout.relative(store.layout.outputs(config.config_id)),
    )
    reporter.point_done(config, row)
    return BatchOutcome(config.config_id, "complete")


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES, else every /dev/nvidiaN."""
    named = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if named:
        return [part.strip() for part in named.split(",") if part.strip()]
    return sorted(
        (path.removeprefix("/dev/nvidia") for path in glob.glob("/dev/nvidia[0-9]*")), key=int
    )


def shard_gpus(visible: list[str], per_shard: int, shards: int) -> list[list[str]]:
    """Each shard's GPUs, `per_shard` consecutive ones of `visible`; a ValueError naming the
    fix when there are too few (a shard on a GPU another holds fails at its engine start)."""
    if shards * per_shard > len(visible):
        raise ValueError(
            f"{shards} shard(s) x {per_shard} GPU(s) each (tensor x pipeline x data parallel) "
            f"need {shards * per_shard} GPUs, {len(visible)} visible "
            f"({','.join(visible) or 'none'}): lower --shards or the parallel sizes"
        )
    return [visible[i * per_shard : (i + 1) * per_shard] for i in range(shards)]


def _cpu_bind(shard: int, shards: int) -> str:
    """Give each CPU shard its own cores, so shards do not fight over the same threads."""
    cores = os.cpu_count() or 1
    if shards <= 1 or shards > cores:
        return "auto"
    per = cores // shards
    return f"{shard * per}-{shard * per + per - 1}" if per > 1 else str(shard)


def _wait_all(processes: list[ManagedProcess], timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    errors = []
    for shard, process in enumerate(processes):
        try:
            code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: stop them all
            errors.append(f"shard {shard} did not finish within {timeout_s:g} s")
            continue
        if code != 0:
            log = process.log_path.read_text(errors="replace") if process.log_path else ""
            errors.append(f"shard {shard} exited with code {code}: {worker_error_line(log)}")
    return errors


def worker_error_line(log: str) -> str:
    """The root cause of a failed worker, one line: the server's rule (`server_error_line`).

    A worker's log is the offline engine's, with the same layers as a server's: the engine
    core and its workers log the exception that was raised first, and the worker's own
    uncaught traceback ends with a wrapper ("Engine core initialization failed. See root
    cause above."), so its last exception line is the least telling one.
    """
    return server_error_line(log)


def _merge_outputs(work: Path, shards: int, target: Path) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    for shard in range(shards):
        with open(work / f"outputs-{shard}.jsonl", encoding="utf-8") as handle:
            outputs += [json.loads(line) for line in handle if line.strip()]
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in outputs))
    return outputs


def _row(
    store: RunStore,
    config: ServerConfig,
    results: list[dict],
    records: int,
    outputs: list[dict],
    schema: dict | None,
    wall_s: float,
) -> dict[str, Any]:
    # Shards generate at the same time: throughput is all tokens over the span from the
    # first shard's start to the last shard's end of generation.
    span = max(r["generate_end"] for r in results) - min(r["generate_start"] for r in results)
    prompt_tokens = sum(r["prompt_tokens"] for r in results)
    output_tokens = sum(r["output_tokens"] for r in results)
    row: dict[str, Any] = {
        "run_id": store.run_id,
        "config_id": config.config_id,
        "config_label": config.label,
        "point_id": "batch",
        "load_kind": "batch",
        "target": records,
        **{k: format_value(v) for k, v in config.varied.items()},
        "requests_ok": len(outputs),
        "requests_failed": records - len(outputs),
        "duration_s": span,
        "achieved_rps": len(outputs) / span if span else None,
        "input_tok_s": prompt_tokens / span if span else None,
        "output_tok_s": output_tokens / span if span else None,
        "total_tok_s": (prompt_tokens + output_tokens) / span if span else None,
        "prompt_tokens_mean": prompt_tokens / max(1, len(outputs)),
        "output_tokens_mean": output_tokens / max(1, len(outputs)),
        "wall_s": wall_s,
        "valid": True,
        "invalid_reason": "",
        "server_metrics": "absent",
    }
    for phase in PHASES:  # the slowest shard's, as the job waits for it
        values = [r[phase] for r in results if r.get(phase) is not None]
        row[phase] = max(values) if values else None
    if schema is not None:
        invalid = schema_failures(outputs, schema)
        row["schema_valid_fraction"] = 1 - len(invalid) / max(1, len(outputs))
        if invalid:
            row["valid"] = False
            row["invalid_reason"] = (
                f"{len(invalid)} output(s) do not match the JSON schema, e.g. id {invalid[0]}"
            )
    return row


def schema_failures(outputs: list[dict], schema: dict) -> list[str]:
    """Ids of outputs that are not JSON valid against `schema`."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    bad = []
    for output in outputs:
        try:
            document = json.loads(output["output"])
        except ValueError:
            bad.append(output["id"])
            continue
        if not validator.is_valid(document):
            bad.append(output["id"])
    return bad


def _quality_job(spec: BatchSpec, spec_path: Path, work: Path) -> dict[str, Any] | None:
    quality = spec.quality
    if quality is None:
        return None
    prompts = load_prompts(prompts_path(quality.prompts, spec_path.parent))
    return {
        "prompts": prompts,
        "max_tokens": quality.max_tokens,
        "top_logprobs": quality.top_logprobs,
        "out": str(work / "quality.jsonl"),
    }


def _record_quality(store: RunStore, config_id: str, work: Path, phases: dict) -> None:
    """The first shard's quality answers into the run, and their cost into the manifest."""
    answers = work / "quality.jsonl"
    if not answers.is_file():
        return
    target = store.layout.quality(config_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, answers.read_text())
    count = sum(1 for line in answers.read_text().splitlines() if line)
    store.update_config(
        config_id, quality={"prompts": count, "seconds": round(phases.get("quality_s", 0.0), 2)}
    )
