"""Capacity search (bracketing, then interpolation/bisection) and KV-capacity pruning."""

from __future__ import annotations

import pytest

from tunebench.points.capacity import CapacitySearch
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
    assert search.upper.rate > true_capacity
    assert len(search.probes) <= 12


def test_a_good_start_needs_few_probes():
    # starting near the answer (the previous configuration's capacity) is cheap
    search = run(CapacitySearch(start_rate=7.0, tolerance=0.05, warm=True), 7.3)
    assert 0.95 * 7.3 <= search.capacity <= 7.3
    assert len(search.probes) <= 6, [p.rate for p in search.probes]


def queueing_ratio(rate: float, saturation: float) -> float:
    """p95 latency / limit of an M/M/1-like server: flat, then a hockey stick at saturation."""
    return 0.3 / max(1e-6, 1 - rate / saturation)


def run_with_ratios(search: CapacitySearch, saturation: float) -> CapacitySearch:
    while (rate := search.next_rate()) is not None:
        ratio = queueing_ratio(rate, saturation)
        search.tell(rate, ratio <= 1 + 1e-9, ratio=ratio)
    return search


@pytest.mark.parametrize("saturation", [1.3, 2.9, 5.0, 7.7, 12.0, 23.0])
def test_interpolation_finds_a_convex_knee_quickly(saturation):
    true_capacity = 0.7 * saturation  # where 0.3 / (1 - r/s) = 1
    cold = run_with_ratios(CapacitySearch(start_rate=1.0), saturation)
    assert 0.95 * true_capacity <= cold.capacity <= true_capacity * (1 + 1e-9)
    assert len(cold.probes) <= 7, [p.rate for p in cold.probes]
    for previous in (0.7 * true_capacity, true_capacity, 1.4 * true_capacity):
        warm = run_with_ratios(CapacitySearch(start_rate=previous, warm=True), saturation)
        assert 0.95 * true_capacity <= warm.capacity <= true_capacity * (1 + 1e-9)
        assert len(warm.probes) <= 6, (previous, [p.rate for p in warm.probes])


def test_a_noisy_pass_above_a_failure_does_not_count():
    search = CapacitySearch(start_rate=4.0)
    search.tell(4.0, True)
    search.tell(8.0, False)
    search.tell(6.0, False)
    search.tell(9.0, True)  # noise: the failure at 6 wins
    assert search.capacity == 4.0 and search.upper.rate == 6.0


def test_max_rate_caps_the_search():
    search = run(CapacitySearch(start_rate=2.0, max_rate=5.0), true_capacity=50.0)
    assert search.capped and search.capacity == 5.0 and not search.client_bound


def test_client_limited_probe_never_counts_as_capacity():
    search = run(CapacitySearch(start_rate=2.0), true_capacity=50.0, client_max=6.0)
    assert search.client_bound and search.done
    # proven by the server just below what the client could drive; never above it
    assert 0.8 * 6.0 <= search.capacity <= 6.0
    assert [p.client_limited for p in search.probes][:3] == [False, False, True]


def test_a_client_limited_first_probe_searches_below_it():
    search = run(CapacitySearch(start_rate=8.0), true_capacity=3.0, client_max=6.0)
    assert not search.client_bound
    assert 0.95 * 3.0 <= search.capacity <= 3.0


def test_nothing_meets_the_slo():
    search = run(CapacitySearch(start_rate=1.0, min_rate=0.1), true_capacity=0.01)
    assert search.capacity is None and search.done


def test_bad_parameters():
    with pytest.raises(ValueError):
        CapacitySearch(growth=1.0)


def test_kv_pruning():
    assert prune_reason({"max-model-len": 4096, "max-num-seqs": 8}, 65536) is None
    assert (
        prune_reason({"max-model-len": 8192}, 4096)
        == "max-model-len 8192 exceeds the KV cache (4096 tokens)"
    )
    reason = prune_reason({"max-model-len": 4096, "max-num-seqs": 64}, 65536)
    assert reason.startswith("max-num-seqs x max-model-len = 262144 tokens exceeds")
    assert prune_reason({"max-model-len": 4096, "max-num-seqs": 64}, 65536, overcommit=4) is None
    assert prune_reason({"max-num-seqs": 64}, 10) is None  # model default unknown: keep


def test_kv_capacity_scales_with_cache_dtype():
    assert kv_capacity_for(100_000, "auto", "fp8") == 200_000
    assert kv_capacity_for(100_000, "fp8", "bfloat16") == 50_000
    assert kv_capacity_for(100_000, "float32", "fp8_e5m2") == 400_000
    assert kv_capacity_for(100_000, "auto", "nvfp4") == 400_000  # a 4-bit cache


def test_a_capacity_learned_at_one_memory_share_is_not_used_at_another(tmp_path):
    """On a GPU the KV budget follows gpu-memory-utilization (and a draft, CUDA graphs):
    a capacity learned at 0.80 prunes nothing at 0.95, and is learned again there."""
    from tunebench.spec.models import Tune
    from tunebench.tune.storage import open_study
    from tunebench.tune.study import TrialOutcome, Tuner

    class ByShare:
        """KV tokens grow with the memory share, as on a GPU."""

        def __init__(self):
            self.deployed = []

        def evaluate(self, config):
            self.deployed.append(dict(config.args))
            share = config.args.get("gpu-memory-utilization", 0.8)
            tokens = 4096 if share < 0.9 else 40960
            return TrialOutcome(
                [1.0], effective={"kv_capacity_tokens": tokens, "cache_dtype": "auto"}
            )

    tune = Tune.model_validate(
        {
            "trials": 4,
            "seed": 0,
            "sampler": "random",
            "hints": False,
            "baseline": False,
            "space": {
                "gpu-memory-utilization": {"choices": [0.8, 0.95]},
                "max-num-seqs": {"choices": [4, 32]},
            },
            "enqueue": [
                {"gpu-memory-utilization": 0.8, "max-num-seqs": 4},
                {"gpu-memory-utilization": 0.95, "max-num-seqs": 32},  # 16384 < 40960: fits
                {"gpu-memory-utilization": 0.8, "max-num-seqs": 32},  # 16384 > 4096: pruned
            ],
        }
    )
    evaluator = ByShare()
    study = open_study(tmp_path, "t", tune, create=True)
    Tuner(study, tune, {"max-model-len": 512}, "m", None, evaluator).run()
    deployed = [(a["gpu-memory-utilization"], a["max-num-seqs"]) for a in evaluator.deployed]
    assert (0.95, 32) in deployed  # not pruned by the capacity learned at 0.80
    assert (0.8, 32) not in deployed  # pruned by it
    assert len(study.user_attrs["kv_capacities"]) == 2  # learned once per memory share
