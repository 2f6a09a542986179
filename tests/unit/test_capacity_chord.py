"""The bracket's crossing in log ratio, and narrowing windows that grow as the bracket
narrows (points/capacity.py): what a batching server's hockey-stick latency asks of them."""

from __future__ import annotations

import math

import pytest

from tunebench.points.capacity import NARROWING_GROWTH, CapacitySearch


def hockey_stick(rate: float, knee: float) -> float:
    """SLO ratio of a batching server: flat while the batch has room, then a queue that
    grows as fast as the window lets it (ratio 1 at 1.1 x knee)."""
    over = max(0.0, rate / knee - 1)
    return 0.5 * math.exp(over * 60 * math.log(2) / 6)  # doubles every 10% past the knee


def test_a_miss_far_past_the_limit_does_not_pull_the_answer_next_to_it():
    # a pass at half the limit, a miss twenty times over it: in 1/ratio the chord would sit
    # at 15.1 req/s (next to the miss); in log ratio it weighs both ends by factors
    search = CapacitySearch(start_rate=10.0)
    search.tell(10.0, True, ratio=0.5)
    search.tell(20.0, False, ratio=20.0)
    assert search.capacity == pytest.approx(10.0 + 10.0 * math.log(2) / math.log(40))
    assert search.capacity < 12.0
    assert 10.0 < search.next_rate() < 12.5  # the next probe goes there too


def test_the_previous_chord_stays_selectable():
    search = CapacitySearch(start_rate=10.0, chord="reciprocal")
    search.tell(10.0, True, ratio=0.5)
    search.tell(20.0, False, ratio=20.0)
    assert search.capacity == pytest.approx(10.0 + 10.0 * (2 - 1) / (2 - 0.05))
    with pytest.raises(ValueError):
        CapacitySearch(chord="linear")


def test_a_hockey_stick_search_ends_within_10_percent_of_its_crossing():
    knee = 12.0
    truth = knee * 1.1  # where the hockey stick reaches the limit
    for warm, start in ((False, 1.0), (True, 30.0), (True, 8.0)):
        search = CapacitySearch(start_rate=start, warm=warm, max_probes=8)
        while (rate := search.next_rate()) is not None:
            ratio = hockey_stick(rate, knee)
            search.tell(rate, ratio <= 1, ratio=ratio)
        assert search.capacity == pytest.approx(truth, rel=0.1), (warm, start, search.probes)


def test_narrowing_windows_grow_as_the_bracket_narrows():
    def margin(lower: float, upper: float, **settings) -> float:
        search = CapacitySearch(start_rate=lower, tolerance=0.05, **settings)
        search.tell(lower, True, ratio=0.8)
        search.tell(upper, False, ratio=1.3)
        return search.window_margin(4.0, 2.5)

    assert margin(4.0, 8.0) == 4.0  # a wide bracket: the sample margin
    assert margin(4.0, 4.8) == pytest.approx(4.0)  # 20% wide (4 x tolerance): still the margin
    assert margin(4.0, 4.6) == pytest.approx(4.0 * 0.2 / 0.15)  # growing with 1 / width
    assert margin(4.0, 4.3) == 4.0 * NARROWING_GROWTH  # under 10%: the most
    assert margin(4.0, 4.1) == 4.0 * NARROWING_GROWTH
    assert margin(4.0, 4.3, narrowing_growth=1.0) == 4.0  # the previous fixed windows
