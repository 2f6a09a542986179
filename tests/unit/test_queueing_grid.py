"""The queueing-law grid (tunebench/testing/queueing.py): its recorded windows measure the
capacity the formula states, so benchmarks can grade searches against the formula."""

from __future__ import annotations

import math

from tunebench.recorded.noisy import RecordedGrid, held_out_capacity
from tunebench.testing.queueing import (
    QueueingConfig,
    QueueingGrid,
    analytic_capacity,
    make_queueing_grid,
    start_factor,
)


def test_the_formula_is_the_quantile_law():
    """At the analytic capacity the law's TTFT p95 is the SLO: base + wait x ln 20 / (1 - rho)."""
    config = QueueingConfig("c", {}, service_rps=10.0, base_ms=20.0, wait_ms=10.0)
    grid = QueueingGrid((config,), slo_ms=250.0)
    rate = analytic_capacity(config, grid)
    p95 = config.base_ms + config.wait_ms * math.log(20) / (1 - rate / config.service_rps)
    assert math.isclose(p95, 250.0)
    assert math.isclose(analytic_capacity(config, grid, factor=1.1), rate * 1.1)


def test_dense_windows_measure_the_analytic_capacity_of_each_start(tmp_path):
    configs = (
        QueueingConfig("slow", {"max-num-seqs": 2}, service_rps=4.0),
        QueueingConfig("fast", {"max-num-seqs": 8}, service_rps=9.0, wait_ms=25.0),
    )
    law = QueueingGrid(configs, top_rate=12.0, rates=20, repeats=2, requests_per_window=400)
    store = make_queueing_grid(tmp_path, law)
    grid = RecordedGrid(store.path)
    for config, recorded in zip(configs, grid.configs):
        for repeat in (1, 2):
            own = analytic_capacity(config, law, start_factor(law, config.label, repeat))
            measured = held_out_capacity(recorded, [repeat], law.slo)
            assert measured.kind == "exact"
            # the recorded rates are 20% apart; the crossing between them is within 6%
            assert abs(measured.rate / own - 1) <= 0.06, (config.label, repeat, measured, own)
