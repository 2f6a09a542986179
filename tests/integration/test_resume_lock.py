"""`sweep --resume` and the run lock, on recorded configurations (no server; the real-server
faults are in tests/e2e/test_faults_cpu.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.conftest import FIXTURES, run_cli
from tunebench.store.run import RunStore, read_points


def make_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "resume-recorded.yaml"
    spec.write_text(f"""
name: resume-recorded
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {FIXTURES / "grid-cpu"}}}
server:
  args: {{max-model-len: 512, max-num-batched-tokens: 128}}
  matrix: {{max-num-seqs: [8, 16, 32]}}
load:
  data: {{kind: synthetic, prompt_tokens: 256, output_tokens: 32}}
  profiles:
    - {{kind: poisson, rate: [1.5, 3, 4.5], max_seconds: 10}}
    - {{kind: capacity, max_seconds: 10, start_rate: 2}}
slo: {{ttft_ms: {{p95: 250}}}}
""")
    return spec


def full_run(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    result = run_cli("sweep", str(make_spec(tmp_path)), "-o", str(runs), "--no-report")
    assert result.returncode == 0, result.stderr
    return next(runs.iterdir())


def interrupt_after(run: Path, keep_rows: int) -> list[dict]:
    """Make `run` look like a sweep stopped after `keep_rows` points, the next in flight."""
    rows = read_points(run)
    with open(run / "points.csv", newline="") as handle:
        header = next(csv.reader(handle))
    with open(run / "points.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows[:keep_rows])
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    manifest["attempts"][-1].update(status="interrupted")
    kept_configs = {r["config_id"] for r in rows[:keep_rows]}
    for config in manifest["configs"]:
        if (
            config["config_id"] not in kept_configs
            or config["config_id"] == rows[keep_rows]["config_id"]
        ):
            config["status"] = "running"
            config.pop("capacity", None)
    (run / "manifest.json").write_text(json.dumps(manifest))
    return rows


def test_resume_measures_only_what_is_missing_and_keeps_the_rest(tmp_path):
    run = full_run(tmp_path)
    cut = sum(r["config_id"] == "c1" for r in read_points(run)) + 1
    before = interrupt_after(run, keep_rows=cut)  # c1 done, c2's 1st point stored, 2nd in flight
    kept = read_points(run)
    result = run_cli("sweep", "--resume", str(run), "--no-report")
    assert result.returncode == 0, result.stderr
    assert f"{cut} points kept" in result.stderr + result.stdout
    after = read_points(run)
    assert after[:cut] == kept  # the stored points are untouched, byte for byte
    assert [
        (r["config_id"], r["point_id"]) for r in after if not r["point_id"].startswith("capacity")
    ] == [
        (r["config_id"], r["point_id"]) for r in before if not r["point_id"].startswith("capacity")
    ]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert [a["status"] for a in manifest["attempts"]] == ["interrupted", "complete"]
    assert manifest["attempts"][1]["points_kept"] == cut
    assert all(
        c["status"] == "complete" and c["capacity"]["probes"] >= 3 for c in manifest["configs"]
    )
    # c1 (complete before) was not deployed again; c2 and c3 were, in attempt 2
    attempts = {c["config_id"]: c["attempts"] for c in manifest["configs"]}
    assert attempts == {"c1": 1, "c2": 2, "c3": 2}


def test_resume_continues_a_capacity_search_from_its_stored_probes(tmp_path):
    run = full_run(tmp_path)
    original = [c["capacity"] for c in json.loads((run / "manifest.json").read_text())["configs"]]
    rows = read_points(run)
    c1 = [r for r in rows if r["config_id"] == "c1"]
    probes = [r for r in c1 if r["point_id"].startswith("capacity")]
    assert len(probes) >= 3
    cut = rows.index(probes[1]) + 1  # two probes stored, the third in flight
    interrupt_after(run, keep_rows=cut)
    result = run_cli("sweep", "--resume", str(run), "--no-report")
    assert result.returncode == 0, result.stderr
    again = [r for r in read_points(run) if r["config_id"] == "c1"]
    ids = [r["point_id"] for r in again if r["point_id"].startswith("capacity")]
    assert ids[:2] == ["capacity-1", "capacity-2"] and ids[2] == "capacity-3"  # numbering goes on
    assert len(ids) == len(set(ids))
    manifest = json.loads((run / "manifest.json").read_text())
    resumed = manifest["configs"][0]["capacity"]
    # Seeded with the two stored probes, the search takes the path the uninterrupted one took.
    assert resumed["probe_rates"] == [float(p["target"]) for p in probes]
    assert resumed["rate"] == original[0]["rate"] and resumed["probes"] == len(ids)


def test_resume_of_a_complete_run_does_nothing_and_says_so(tmp_path):
    run = full_run(tmp_path)
    before = (run / "points.csv").read_text()
    result = run_cli("sweep", "--resume", str(run))
    assert result.returncode == 0
    assert f"run {run.name} is complete; nothing to resume" in result.stdout
    assert (run / "points.csv").read_text() == before


def test_a_second_process_on_the_same_run_is_refused(tmp_path):
    run = full_run(tmp_path)
    interrupt_after(run, keep_rows=2)
    holder = RunStore.open(run).acquire_lock()
    try:
        result = run_cli("sweep", "--resume", str(run))
    finally:
        holder.release_lock()
    assert result.returncode == 1
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "run is locked by PID" in lines[0] and str(run) in lines[0], lines
    assert len(read_points(run)) == 2  # nothing was written by the refused process
    # once released, the resume goes ahead
    assert run_cli("sweep", "--resume", str(run), "--no-report").returncode == 0


def test_a_killed_process_leaves_no_stale_lock(tmp_path):
    import subprocess
    import sys

    run = full_run(tmp_path)
    code = (
        f"from tunebench.store.run import RunStore; import os, signal, sys; "
        f"RunStore.open(__import__('pathlib').Path({str(run)!r})).acquire_lock(); "
        "print('locked', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    # it held the lock and died of the signal (not of an error before taking it)
    assert child.stdout.strip() == "locked" and child.returncode == -9, (
        child.returncode,
        child.stderr,
    )
    RunStore.open(run).acquire_lock().release_lock()  # the kernel released it with the process


def test_resume_refuses_tune_and_batch_runs(tmp_path):
    run = full_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["kind"], manifest["tune"] = "tune", {"study": "study.db"}
    manifest["status"] = "interrupted"
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = run_cli("sweep", "--resume", str(run))
    assert (
        result.returncode == 1 and "resume it with `tunebench tune --resume RUN`" in result.stderr
    )


def test_resume_with_a_spec_file_given_too_is_a_usage_error(tmp_path):
    result = run_cli("sweep", str(make_spec(tmp_path)), "--resume", "x")
    assert result.returncode == 2 and "give no SPEC" in result.stdout + result.stderr


def test_kept_and_new_samples_share_the_requests_file(tmp_path):
    # a noisy recorded run keeps per-request samples, as a real server's run does
    spec = tmp_path / "noisy.yaml"
    spec.write_text(f"""
name: resume-noisy
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {FIXTURES / "grid-cpu-repeats"}, noisy: true, seed: 3}}
server:
  args: {{max-model-len: 512}}
  variants:
    - {{name: a, args: {{max-num-seqs: 2, max-num-batched-tokens: 32}}}}
    - {{name: b, args: {{max-num-seqs: 2, max-num-batched-tokens: 128}}}}
load:
  data: {{kind: synthetic, prompt_tokens: 256, output_tokens: 32}}
  profiles: [{{kind: poisson, rate: [1, 2], max_seconds: 20}}]
slo: {{ttft_ms: {{p90: 60}}}}
""")
    runs = tmp_path / "runs"
    assert run_cli("sweep", str(spec), "-o", str(runs), "--no-report").returncode == 0
    run = next(runs.iterdir())
    interrupt_after(run, keep_rows=3)  # a done; b's first point kept, its second in flight
    kept = read_points_file(run / "requests" / "c2.csv")
    assert {r["point_id"] for r in kept} == {"poisson-1", "poisson-2"}
    result = run_cli("sweep", "--resume", str(run), "--no-report")
    assert result.returncode == 0, result.stderr
    after = read_points_file(run / "requests" / "c2.csv")
    counts = {p: sum(r["point_id"] == p for r in after) for p in ("poisson-1", "poisson-2")}
    points = {r["point_id"]: r for r in read_points(run) if r["config_id"] == "c2"}
    # one file per configuration: the kept point's samples and the re-measured point's, each
    # once, as many as its point counts (the in-flight point's old samples are dropped)
    assert [r for r in after if r["point_id"] == "poisson-1"] == [
        r for r in kept if r["point_id"] == "poisson-1"
    ]
    for point_id, count in counts.items():
        requests = float(points[point_id]["requests_ok"]) + float(
            points[point_id]["requests_failed"]
        )
        assert count == round(requests), (point_id, count, requests)


def read_points_file(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
