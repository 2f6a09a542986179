"""analysis/frames.py: a run's points as a DataFrame that later steps can extend quietly."""

from __future__ import annotations

import warnings

import pandas as pd

from tunebench.analysis.frames import load_run
from tunebench.testing import make_demo_like_run


def test_adding_columns_to_a_loaded_run_warns_nothing(tmp_path):
    store = make_demo_like_run(tmp_path)
    points = load_run(store.path)
    assert len(points.columns) > 100  # the case that fragmented: every points.csv column
    # one column replaced at a time left a block per column, and pandas warns
    # (PerformanceWarning) on every insert into a frame of more than 100 blocks
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        points.assign(extra=points.apply(lambda row: str(row["config_id"]), axis=1))
    assert points["valid"].isin([True, False]).all()  # booleans read as booleans
    assert pd.api.types.is_numeric_dtype(points["ttft_p50_ms"])
