"""Capacity search (bracketing + bisection) and KV-capacity pruning."""

from __future__ import annotations

import pytest

from tunebench.tune.capacity import CapacitySearch
from tunebench.tune.pruning import kv_capacity_for, prune_reason


def run(search: CapacitySearch, true_capacity: float, client_max: float = float("inf")):
    while (rate := search.next_rate()) is not None:
        search.tell(rate, slo_met=rate <= true_capacity, client_limited=rate > client_max)
    return search


@pytest.mark.parametrize("true_capacity,start", [(7.3, 1.0), (7.3, 20.0), (0.9, 4.0), (31.0, 30.0)])
def test_finds_capacity_within_tolerance(true_capacity, start):
    search = run(CapacitySearch(start_rate=start, tolerance=0.05), true_capacity)
    assert search.capacity is not None
    assert 0.95 * true_capacity <= search.capacity <= true_capacity
    assert search.upper > true_capacity
    assert len(search.probes) <= 12


def test_a_good_start_needs_few_probes():
    # starting near the answer (the previous configuration's capacity) is cheap
    search = run(CapacitySearch(start_rate=7.0, tolerance=0.05, growth=1.25), 7.3)
    assert 0.95 * 7.3 <= search.capacity <= 7.3
    assert len(search.probes) <= 6, [p.rate for p in search.probes]


def test_client_limited_probe_never_counts_as_capacity():
    search = run(CapacitySearch(start_rate=2.0), true_capacity=50.0, client_max=6.0)
    assert search.client_bound
    assert search.capacity == 4.0  # proven by the server; 8 req/s was the client's limit
    assert [p.client_limited for p in search.probes] == [False, False, True]


def test_nothing_meets_the_slo():
    search = run(CapacitySearch(start_rate=1.0, min_rate=0.1), true_capacity=0.01)
    assert search.capacity is None and search.done


def test_bad_parameters():
    with pytest.raises(ValueError):
        CapacitySearch(growth=1.0)


def test_kv_pruning():
    assert prune_reason({"max-model-len": 4096, "max-num-seqs": 8}, 65536) is None
    assert prune_reason({"max-model-len": 8192}, 4096) == \
        "max-model-len 8192 exceeds the KV cache (4096 tokens)"
    reason = prune_reason({"max-model-len": 4096, "max-num-seqs": 64}, 65536)
    assert reason.startswith("max-num-seqs x max-model-len = 262144 tokens exceeds")
    assert prune_reason({"max-model-len": 4096, "max-num-seqs": 64}, 65536, overcommit=4) is None
    assert prune_reason({"max-num-seqs": 64}, 10) is None  # model default unknown: keep


def test_kv_capacity_scales_with_cache_dtype():
    assert kv_capacity_for(100_000, "auto", "fp8") == 200_000
    assert kv_capacity_for(100_000, "fp8", "bfloat16") == 50_000
    assert kv_capacity_for(100_000, "float32", "fp8_e5m2") == 400_000
