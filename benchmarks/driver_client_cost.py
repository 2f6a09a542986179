"""Does the vllm-bench driver add client cost? It against plain vLLM benchmark runs, and
GuideLLM beside them, on one vLLM-CPU server.

    python benchmarks/driver_client_cost.py [--streams 8] [--requests 200] [--repeats 3]

One server (the embedded model, pinned to core 0) serves every run; every client is pinned
to core 1. Per repeat, in alternated order:
  - plain: a fresh process that does what `vllm bench serve` does after parsing its flags
    (vllm.benchmarks.serve.main with vLLM's own parser; the `vllm` command itself fails on
    the vllm-cpu distribution, docs/load-drivers.md), with the same flags;
  - driver: tunebench's VllmBenchDriver running the same point (prepare, run, close);
  - guidellm: tunebench's GuideLLMDriver running the same point.
Printed per client: output tok/s min/median/max over the repeats, and driver/plain.
Target: driver >= 0.9 x plain. A plain run that exits non-zero fails the benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench import demo  # noqa: E402
from tunebench.deploy.local import LocalVllmServer  # noqa: E402
from tunebench.environment import host_info  # noqa: E402
from tunebench.load.guidellm import GuideLLMDriver  # noqa: E402
from tunebench.load.vllm_bench import VllmBenchDriver, point_argv  # noqa: E402
from tunebench.spec.deployments import LocalSettings  # noqa: E402
from tunebench.spec.models import SyntheticData  # noqa: E402
from tunebench.spec.plan import LoadPoint, ServerConfig  # noqa: E402
from tunebench.store.layout import RunLayout  # noqa: E402

CLIENT_CPU = 1
PLAIN = """
import json, sys, time
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def plain_run(handle, tokenizer: str, point: LoadPoint, data, out: Path) -> float:
    argv = point_argv(point, data) + [
        "--base-url", handle.base_url, "--model", handle.served_model,
        "--tokenizer", tokenizer, "--save-result", "--result-dir", str(out.parent),
        "--result-filename", out.name, "--disable-tqdm",
    ]  # fmt: skip
    result = subprocess.run(
        ["taskset", "-c", str(CLIENT_CPU), sys.executable, "-c", PLAIN, *argv],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        sys.exit(f"plain vllm bench failed ({result.returncode}): {result.stderr[-500:]}")
    return float(json.loads(out.read_text())["output_throughput"])


def driver_run(driver, handle, point: LoadPoint, work: Path) -> float:
    results = []
    try:
        driver.prepare([point], work)
        driver.run(handle, results.append)
    finally:
        driver.close()
    return float(results[0].columns["output_tok_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = SyntheticData(kind="synthetic", prompt_tokens=64, output_tokens=32)
    point = LoadPoint(
        f"concurrent-{args.streams}", "concurrent", args.streams, None, args.requests, None
    )
    root = Path(tempfile.mkdtemp(prefix="tunebench-client-cost-"))
    host = host_info()
    print(f"machine: {host.get('cpu_model')}, flags {host.get('cpu_flags')}")
    server = LocalVllmServer(LocalSettings(kind="local", cpus="0"), RunLayout(root / "server"))
    config = ServerConfig("s1", "server", "builtin:tiny-llama-random", None, {"max-model-len": 512})
    tokenizer = demo.resolve_builtin("builtin:tiny-llama-random")
    results: dict[str, list[float]] = {"plain": [], "driver": [], "guidellm": []}
    try:
        handle = server.start(config)
        print(f"server ready in {handle.started_s:.0f} s; {point.point_id}, {args.requests} "
              f"requests, 64/32 tokens, {args.repeats} alternated repeats")  # fmt: skip
        for repeat in range(args.repeats):
            order = ["plain", "driver", "guidellm"]
            order = order[repeat % 3 :] + order[: repeat % 3]  # alternate who goes first
            for name in order:
                work = root / f"{name}-{repeat}"
                began = time.monotonic()
                if name == "plain":
                    value = plain_run(handle, tokenizer, point, data, work / "plain.json")
                elif name == "driver":
                    driver = VllmBenchDriver(data, tokenizer, cpus={CLIENT_CPU})
                    value = driver_run(driver, handle, point, work)
                else:
                    driver = GuideLLMDriver(data, REPO, tokenizer, cpus={CLIENT_CPU})
                    value = driver_run(driver, handle, point, work)
                results[name].append(value)
                print(f"  repeat {repeat + 1} {name:<8} {value:7.1f} output tok/s "
                      f"({time.monotonic() - began:.0f} s wall)", flush=True)  # fmt: skip
    finally:
        server.stop()
    print()
    for name, values in results.items():
        print(f"{name:<8} output tok/s min {min(values):7.1f}  median "
              f"{statistics.median(values):7.1f}  max {max(values):7.1f}")  # fmt: skip
    ratio = statistics.median(results["driver"]) / statistics.median(results["plain"])
    gap = statistics.median(results["driver"]) / statistics.median(results["guidellm"])
    print(f"driver / plain (medians): {ratio:.3f} (target >= 0.9)")
    print(f"vllm-bench driver / guidellm driver (medians): {gap:.2f}")
    return 0 if ratio >= 0.9 else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
