"""How a point's offered load reads wherever it is printed: streams, req/s, or a speed.

A replay point (`load_kind` replay: a fixed `kind: replay` point or a probe of a capacity
search with `arrival: replay`) is offered a recorded trace at `target` times its own pace.
Its target is a speed, not a rate: the requests per second it offers are the trace's, which
vary over the slice. Every console line, table, report and plot axis spells it one way,
`2x trace` (`speed_text`), so no replay point is ever read as "2 req/s".
"""

from __future__ import annotations

import re
from typing import Any

from tunebench.numbers import to_float
from tunebench.spec.load_kind import LoadKind

# the load kind of a replayed trace (and of a capacity search over speed)
REPLAY = LoadKind.REPLAY.value
SPEED_AXIS = "trace speed (x real time)"
# replay-<trace>-<speed>, and a cross-checked side's replay-<trace>-<speed>@<driver>
_REPLAY_POINT = re.compile(r"^replay-(?P<trace>[^@]+)-[^-@]+(?:@.+)?$")


def is_replay(kind: Any) -> bool:
    return str(kind) == REPLAY


def speed_text(speed: Any) -> str:
    """A replay's speed (1 = the trace's own pace) as every output spells it: "2x trace"."""
    number = to_float(speed)
    return "-" if number is None else f"{number:.3g}x trace"


def offered_load(kind: Any, target: Any) -> str:
    """A point's offered load: "4 streams", "1.5 req/s", "200 records", "2x trace"; "-"
    without a numeric target (synchronous, a sweep's steps)."""
    number = to_float(target)
    if number is None:
        return "-"
    if is_replay(kind):
        return speed_text(number)
    if kind in LoadKind.STREAM:
        return f"{number:.3g} {'stream' if number == 1 else 'streams'}"
    return f"{number:.3g} {'records' if kind == LoadKind.BATCH else 'req/s'}"


def capacity_unit(arrival: Any) -> str:
    """What a capacity search's rates are: a speed (arrival replay) or requests/s."""
    return "x trace" if is_replay(arrival) else " req/s"


def rate_text(value: Any, arrival: Any = None) -> str:
    """A capacity search's rate: "4.5 req/s", or "13.1x trace" for a search over speed."""
    number = to_float(value)
    if number is None:
        return "-"
    return f"{number:.3g}{capacity_unit(arrival)}"


def trace_name(point_id: Any) -> str | None:
    """The trace a fixed replay point plays, from its id (replay-<trace>-<speed>); None for
    any other point (a capacity probe over speed is capacity-<n>)."""
    match = _REPLAY_POINT.match(str(point_id or ""))
    return match.group("trace") if match else None


def replay_key(point_id: Any, speed: Any) -> str:
    """A replay point as a load to align and name: "azure 2x trace" (its trace and speed);
    "replay 2x trace" for a capacity probe over speed."""
    return f"{trace_name(point_id) or REPLAY} {speed_text(speed)}"


def load_panel(kind: Any, point_id: Any) -> str:
    """The plot panel a point's offered load belongs on: its load kind, or for a replay
    "replay <trace>" (its speed is of that trace only; a capacity probe's: "replay")."""
    if not is_replay(kind):
        return str(kind)
    trace = trace_name(point_id)
    return f"{REPLAY} {trace}" if trace else REPLAY


def panel_of_key(key: Any, kind: Any, speed: Any) -> str:
    """`load_panel` of a point known by its `replay_key` ("azure 2x trace": replay azure)."""
    if not is_replay(kind):
        return str(kind)
    trace = str(key).removesuffix(f" {speed_text(speed)}")
    return REPLAY if trace in (REPLAY, str(key)) else f"{REPLAY} {trace}"
