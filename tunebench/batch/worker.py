"""Child process: one shard of a batch job: vLLM's offline engine, transformers or Ray Data LLM.

    python -m tunebench.batch.worker JOB.json

Reads the shard's prompts (JSONL of {"id", "prompt"}), generates, writes outputs (JSONL of
{"id", "output", "prompt_tokens", "output_tokens", "finish_reason"}) and a result JSON
with the phases measured separately: import, model load, engine initialisation (memory
profiling, KV cache, compilation, warm-up), generation and writing. vLLM's engine runs
in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, set by the parent) so its own log
lines ("init engine (...) took ...", "torch.compile takes ...") time the phases.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from tunebench.store.files import write_atomic

# vLLM's own account of engine initialisation (profiling, KV cache, compiling, warm-up).
INIT_LINE = re.compile(r"init engine \(.*?\) took ([0-9.]+) s")
COMPILE_LINE = re.compile(r"torch\.compile takes? ([0-9.]+) s")


def _log_seconds(log_path: str | None, pattern: re.Pattern) -> list[float]:
    """Numbers from this process's own log (its stderr, a file the parent named)."""
    if not log_path or not Path(log_path).exists():
        return []
    text = Path(log_path).read_text(errors="replace")
    return [float(m.group(1)) for m in pattern.finditer(text)]


def _read_prompts(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def llm_kwargs(engine_args: dict[str, Any]) -> dict[str, Any]:
    """Engine args as `vllm.LLM(**kwargs)` takes them: dashes as underscores, a `no-X: true`
    flag as `X=False` (the CLI's negation has no keyword), and a mapping given as JSON text
    (`speculative-config: '{"method": "ngram"}'`) as the mapping."""
    kwargs: dict[str, Any] = {}
    for name, value in engine_args.items():
        key = name.replace("-", "_")
        if key.startswith("no_") and isinstance(value, bool):
            key, value = key[3:], not value
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                pass  # not JSON after all: vLLM judges the text
        kwargs[key] = value
    return kwargs


def run_vllm(
    job: dict[str, Any], prompts: list[dict[str, Any]], phases: dict[str, float]
) -> list[dict]:
    started = time.monotonic()
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    phases["import_s"] = time.monotonic() - started
    started = time.monotonic()
    engine_kwargs = llm_kwargs(job["engine_args"])
    if job.get("structured_output"):
        # No free whitespace in JSON: a grammar that allows it lets a weak model pad with
        # spaces until max_tokens. (vLLM takes this from the engine, not the request.)
        structured_config = dict(engine_kwargs.get("structured_outputs_config") or {})
        structured_config.setdefault("backend", "xgrammar")  # the option needs a named backend
        structured_config.setdefault("disable_any_whitespace", True)
        engine_kwargs["structured_outputs_config"] = structured_config
    llm = LLM(model=job["model"], tokenizer=job.get("tokenizer") or job["model"], **engine_kwargs)
    constructed = time.monotonic() - started
    sys.stderr.flush()
    # LLM() loads the weights, then initialises the engine; vLLM logs how long the latter took.
    init = _log_seconds(job.get("log"), INIT_LINE)
    phases["init_s"] = init[-1] if init else 0.0
    phases["load_s"] = max(0.0, constructed - phases["init_s"])
    compiled = _log_seconds(job.get("log"), COMPILE_LINE)
    if compiled:
        phases["compile_s"] = sum(compiled)
    phases["vllm_version"] = vllm.__version__  # type: ignore[assignment]

    sampling = job["sampling"]
    structured = None
    so = job.get("structured_output") or {}
    # No free whitespace: a grammar that allows it lets a weak model pad until max_tokens.
    if so.get("json_schema") is not None:
        structured = StructuredOutputsParams(json=so["json_schema"], disable_any_whitespace=True)
    elif so.get("choice") is not None:
        structured = StructuredOutputsParams(choice=list(so["choice"]))
    params = SamplingParams(
        temperature=sampling["temperature"],
        top_p=sampling["top_p"],
        max_tokens=sampling["max_tokens"],
        seed=sampling.get("seed"),
        ignore_eos=bool(sampling.get("ignore_eos")),
        structured_outputs=structured,
    )
    texts = [p["prompt"] for p in prompts]
    started = time.monotonic()
    phases["generate_start"] = time.time()
    if job["mode"] == "chat":
        conversations = [
            ([{"role": "system", "content": job["system"]}] if job.get("system") else [])
            + [{"role": "user", "content": text}]
            for text in texts
        ]
        results = llm.chat(conversations, params, use_tqdm=False)
    else:
        results = llm.generate(texts, params, use_tqdm=False)
    phases["generate_s"] = time.monotonic() - started
    phases["generate_end"] = time.time()
    if job.get("quality"):  # after the timed generation: its time is in no phase above
        started = time.monotonic()
        _quality_answers(llm, SamplingParams, job["quality"])
        phases["quality_s"] = time.monotonic() - started
    out = []
    for prompt, result in zip(prompts, results):
        completion = result.outputs[0]
        out.append(
            {
                "id": prompt["id"],
                "output": completion.text,
                "prompt_tokens": len(result.prompt_token_ids or []),
                "output_tokens": len(completion.token_ids),
                "finish_reason": completion.finish_reason,
            }
        )
    return out


def _ranked(position: dict | None, top_k: int) -> list[list[float]]:
    """vLLM's {token id: Logprob} of one position as [[id, logprob], ...], best first,
    the top_k by rank (a prompt position also carries its actual token)."""
    if not position:
        return []
    ranked = sorted(position.items(), key=lambda kv: -kv[1].logprob)
    return [[int(t), float(lp.logprob)] for t, lp in ranked if lp.rank and lp.rank <= top_k]


def _quality_answers(llm: Any, sampling_params: Any, quality: dict[str, Any]) -> None:
    """The quality check's answers (docs/quality.md), one prompt at a time so that every
    configuration computes them in the same batch: greedy, with top-k logprobs per
    generated and per prompt position; written as tunebench/quality/collect.py's records."""
    top_k = int(quality["top_logprobs"])
    params = sampling_params(
        temperature=0.0,
        max_tokens=int(quality["max_tokens"]),
        logprobs=top_k,
        prompt_logprobs=top_k,
        seed=0,
    )
    lines = []
    for index, prompt in enumerate(quality["prompts"]):
        result = llm.generate([prompt], params, use_tqdm=False)[0]
        completion = result.outputs[0]
        record = {
            "index": index,
            "prompt": prompt,
            "tokens": [int(t) for t in completion.token_ids],
            "top": [_ranked(p, top_k) for p in completion.logprobs or []],
            "prompt_top": [_ranked(p, top_k) for p in (result.prompt_logprobs or [])[1:]],
            "finish_reason": completion.finish_reason,
            "error": None,
        }
        lines.append(json.dumps(record) + "\n")
    write_atomic(Path(quality["out"]), "".join(lines))


def ray_processor_parts(job: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:
    """vLLMEngineProcessorConfig kwargs and the pre/postprocess functions of a Ray job."""
    sampling = job["sampling"]
    sampling_params: dict[str, Any] = {
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        "max_tokens": sampling["max_tokens"],
        "ignore_eos": bool(sampling.get("ignore_eos")),
    }
    if sampling.get("seed") is not None:
        sampling_params["seed"] = sampling["seed"]
    so = job.get("structured_output") or {}
    if so.get("json_schema") is not None:
        sampling_params["structured_outputs"] = {
            "json": so["json_schema"],
            "disable_any_whitespace": True,
        }
    elif so.get("choice") is not None:
        sampling_params["structured_outputs"] = {"choice": list(so["choice"])}
    chat = job["mode"] == "chat"
    system = job.get("system")

    def preprocess(row: dict[str, Any]) -> dict[str, Any]:
        if chat:
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": row["prompt"]}
            ]
            return {"messages": messages, "sampling_params": sampling_params}
        return {"prompt": row["prompt"], "sampling_params": sampling_params}

    def postprocess(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": row["id"],
            "output": row["generated_text"],
            "prompt_tokens": int(row.get("num_input_tokens") or 0),
            "output_tokens": int(row.get("num_generated_tokens") or 0),
            "finish_reason": row.get("finish_reason") or "",
        }

    ray_settings = job["ray"]
    engine_kwargs = llm_kwargs(job["engine_args"])
    if so.get("json_schema") is not None:  # as in run_vllm: no free whitespace in JSON
        engine_kwargs.setdefault(
            "structured_outputs_config", {"backend": "xgrammar", "disable_any_whitespace": True}
        )
    config = {
        "model_source": job["model"],
        "engine_kwargs": engine_kwargs,
        "concurrency": ray_settings["concurrency"],
        "batch_size": ray_settings["batch_size"],
        "chat_template_stage": chat,
        # engine metrics go through Ray Serve's metric wrappers (ray[serve]); tunebench
        # times the job itself
        "log_engine_metrics": False,
    }
    if ray_settings.get("cpu"):
        # Ray Data LLM reserves a GPU per engine unless told the bundle; on CPU: one CPU,
        # and the vLLM-CPU environment for the engine actor.
        config["placement_group_config"] = {"bundles": [{"CPU": 1}]}
        config["runtime_env"] = {"env_vars": dict(ray_settings.get("env") or {})}
    return config, preprocess, postprocess


def run_ray(
    job: dict[str, Any], prompts: list[dict[str, Any]], phases: dict[str, float]
) -> list[dict]:
    """Ray Data LLM: the same prompts through a vLLM engine actor pool (local or a cluster).

    Model load and engine start happen inside Ray's actors, so they are part of the
    generation phase here; `init_s` is Ray's own start (cluster connect or local start).
    """
    started = time.monotonic()
    import ray
    from ray.data import llm as ray_llm

    phases["import_s"] = time.monotonic() - started
    started = time.monotonic()
    address = job["ray"].get("address")
    if address:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    else:
        # A local instance: Ray Data LLM runs tokenizer, engine and detokenizer stages as
        # separate actors of one CPU each; on a small machine that deadlocks on logical
        # CPUs, so the local instance announces a few more than the cores it has.
        ray.init(
            num_cpus=max(4, 2 * (os.cpu_count() or 1)),
            ignore_reinit_error=True,
            include_dashboard=False,
            log_to_driver=False,
        )
    phases["load_s"] = 0.0
    phases["init_s"] = time.monotonic() - started
    config_kwargs, preprocess, postprocess = ray_processor_parts(job)
    config = ray_llm.vLLMEngineProcessorConfig(**config_kwargs)
    build = getattr(ray_llm, "build_processor", None) or getattr(ray_llm, "build_llm_processor")
    processor = build(config, preprocess=preprocess, postprocess=postprocess)
    started = time.monotonic()
    phases["generate_start"] = time.time()
    rows = processor(ray.data.from_items(prompts)).take_all()
    phases["generate_s"] = time.monotonic() - started
    phases["generate_end"] = time.time()
    ray.shutdown()
    order = {p["id"]: i for i, p in enumerate(prompts)}
    return sorted(rows, key=lambda r: order[r["id"]])


def run_transformers(
    job: dict[str, Any], prompts: list[dict[str, Any]], phases: dict[str, float]
) -> list[dict]:
    started = time.monotonic()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    phases["import_s"] = time.monotonic() - started
    started = time.monotonic()
    settings = job["transformers"]
    dtype = {
        "auto": "auto",
        "float32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
    }[settings["dtype"]]
    tokenizer = AutoTokenizer.from_pretrained(job.get("tokenizer") or job["model"])
    tokenizer.padding_side = "left"  # decoder-only generation needs prompts aligned on the right
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(job["model"], torch_dtype=dtype)
    model.eval()
    phases["load_s"] = time.monotonic() - started
    phases["init_s"] = 0.0
    sampling = job["sampling"]
    texts = [p["prompt"] for p in prompts]
    if job["mode"] == "chat":
        texts = [
            tokenizer.apply_chat_template(
                ([{"role": "system", "content": job["system"]}] if job.get("system") else [])
                + [{"role": "user", "content": t}],
                tokenize=False,
                add_generation_prompt=True,
            )
            for t in texts
        ]
    if sampling.get("seed") is not None:
        torch.manual_seed(sampling["seed"])
    out = []
    started = time.monotonic()
    phases["generate_start"] = time.time()
    size = settings["batch_size"]
    with torch.inference_mode():
        for first in range(0, len(texts), size):
            batch = tokenizer(texts[first : first + size], return_tensors="pt", padding=True)
            generated = model.generate(
                **batch,
                max_new_tokens=sampling["max_tokens"],
                min_new_tokens=sampling["max_tokens"] if sampling.get("ignore_eos") else None,
                do_sample=sampling["temperature"] > 0,
                temperature=sampling["temperature"] or None,
                top_p=sampling["top_p"],
                pad_token_id=tokenizer.pad_token_id,
            )
            width = batch["input_ids"].shape[1]
            for row, prompt in enumerate(prompts[first : first + size]):
                new = generated[row, width:]
                if tokenizer.eos_token_id is not None:
                    ends = (new == tokenizer.eos_token_id).nonzero()
                    finish = "stop" if len(ends) else "length"
                    new = new[: int(ends[0])] if len(ends) else new
                else:
                    finish = "length"
                out.append(
                    {
                        "id": prompt["id"],
                        "output": tokenizer.decode(new, skip_special_tokens=True),
                        "prompt_tokens": int(batch["attention_mask"][row].sum()),
                        "output_tokens": int(len(new)),
                        "finish_reason": finish,
                    }
                )
    phases["generate_s"] = time.monotonic() - started
    phases["generate_end"] = time.time()
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tunebench.batch.worker JOB.json")
    job = json.loads(Path(sys.argv[1]).read_text())
    prompts = _read_prompts(Path(job["prompts"]))
    phases: dict[str, Any] = {}
    engines = {"vllm": run_vllm, "transformers": run_transformers, "ray": run_ray}
    outputs = engines[job["engine"]](job, prompts, phases)
    started = time.monotonic()
    write_atomic(
        Path(job["outputs"]), "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in outputs)
    )
    phases["write_s"] = time.monotonic() - started
    phases["requests"] = len(outputs)
    phases["prompt_tokens"] = sum(o["prompt_tokens"] for o in outputs)
    phases["output_tokens"] = sum(o["output_tokens"] for o in outputs)
    write_atomic(Path(job["result"]), json.dumps(phases, indent=2))


if __name__ == "__main__":
    main()
