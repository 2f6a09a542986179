"""A batch dry-run's time estimate: from the last complete run of the same batch file, each
configuration's wall time with its generation scaled to the records asked for; none (and
why) without such a run."""

from __future__ import annotations

import time

from tunebench.batch.estimate import estimate_batch
from tunebench.report.batch_tables import estimate_line
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore


def _batch_run(root, name, rows, fail=False):
    store = RunStore.create(root, RunKind.BATCH, name, records=100)
    with store.running("batch") as attempt:
        for row in rows:
            store.add_point({"run_id": store.run_id, "point_id": "batch", **row})
        if fail:
            attempt.fail()
    store.release_lock()
    time.sleep(1.1)  # run ids carry the second they were made
    return store


def _row(label, wall, generate, records=100):
    return {
        "config_id": label.split()[0],
        "config_label": label,
        "load_kind": "batch",
        "target": records,
        "wall_s": wall,
        "generate_s": generate,
    }


def test_no_earlier_run_is_no_estimate_with_the_reason(tmp_path):
    found = estimate_batch(tmp_path, "recipes", ["mns=8"], 200)
    assert found.seconds is None and found.run_id is None
    text = estimate_line(found, tmp_path, "recipes").plain
    assert "none (no earlier complete run of batch 'recipes'" in text


def test_generation_scales_with_records_and_the_rest_is_kept(tmp_path):
    _batch_run(tmp_path, "recipes", [_row("mns=8", 60.0, 40.0), _row("mns=32", 50.0, 20.0)])
    # twice the records: 20 s fixed + 80 s, and 30 s fixed + 40 s
    found = estimate_batch(tmp_path, "recipes", ["mns=8", "mns=32"], 200)
    assert found.seconds == 170.0
    text = estimate_line(found, tmp_path, "recipes").plain
    assert text.startswith("estimated time: about 3 min (170 s) (each configuration's phases")
    one = estimate_batch(tmp_path, "recipes", ["mns=8", "mns=64"], 100)
    assert one.seconds == 60.0
    assert "for 1 of 2 configurations" in estimate_line(one, tmp_path, "recipes").plain
    assert estimate_batch(tmp_path, "other-file", ["mns=8"], 100).seconds is None
    none = estimate_batch(tmp_path, "recipes", ["mns=64"], 100)
    assert (
        none.seconds is None
        and "measured none of these" in estimate_line(none, tmp_path, "recipes").plain
    )


def test_the_latest_complete_run_is_read_and_a_failed_one_is_not(tmp_path):
    _batch_run(tmp_path, "recipes", [_row("mns=8", 60.0, 40.0)])
    _batch_run(tmp_path, "recipes", [_row("mns=8", 30.0, 20.0)])
    _batch_run(tmp_path, "recipes", [_row("mns=8", 999.0, 900.0)], fail=True)
    assert estimate_batch(tmp_path, "recipes", ["mns=8"], 100).seconds == 30.0
