"""A stand-in for tunebench.load.guidellm_worker, for the driver's retry tests only.

Speaks the worker's protocol (imported / go line / start / done / idle / more groups /
finished) and copies a
real GuideLLM report for each benchmark. FAKE_WORKER_MODE:
  stall-once  the first worker stalls on its second benchmark; a retry finishes
  die-once    the first worker exits with code 1 on its second benchmark
  stall       every worker stalls on its second benchmark
  slow        every benchmark takes a second (a run long enough to abort)
  hang-once   the first worker starts its second benchmark but never sends a request (the
              GuideLLM 0.8.1 hang the "benchmark"/"sending" events expose); a retry finishes
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

from tunebench.load.worker_pipe import answer_stack_requests

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures/guidellm/v0.8.1-mns2-c1-c8.json"


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def main():
    answer_stack_requests()  # as the real worker does at import
    job = json.loads(Path(sys.argv[1]).read_text())
    emit("imported")
    if not sys.stdin.readline().strip():
        return
    out = Path(job["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    mode = os.environ.get("FAKE_WORKER_MODE", "")
    first = job.get("first_index", 0)
    # The real worker's order of events: "start" of the first benchmark, "benchmark" and
    # "sending" as GuideLLM begins it and its first request is under way, then after each
    # benchmark "done" and the "start" of the next one; "idle" when the groups are done.
    index, groups = first, job["groups"]
    emit("start", index=index)
    while True:  # as the real worker: a job without groups goes straight to "idle"
        # what it was asked to run, for tests of what the driver sends (datasets, profiles)
        with open(out / "groups.jsonl", "a") as log:
            log.write(json.dumps(groups) + "\n")
        total = sum(
            len(g["profile"].get("streams") or g["profile"].get("rate") or [None]) for g in groups
        )
        for _ in range(total):
            if index == 1 and (mode == "stall" or (mode == "stall-once" and first == 0)):
                time.sleep(600)
            if index == 1 and mode == "die-once" and first == 0:
                sys.exit(1)
            emit("benchmark")
            if index == 1 and mode == "hang-once" and first == 0:
                time.sleep(600)
            emit("sending")
            if mode == "slow":
                time.sleep(1.0)
            path = out / f"{index:03d}.json"
            shutil.copy(FIXTURE, path)
            emit("done", index=index, path=str(path))
            index += 1
            emit("start", index=index)
        emit("idle", index=index)
        line = sys.stdin.readline()
        groups = json.loads(line).get("groups") if line.strip() else None
        if not groups:
            break
    emit("finished", index=index)


if __name__ == "__main__":
    main()
