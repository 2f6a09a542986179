"""The A...A sentinels judged when they are measured, recorded in the manifest, and the
points since the reading before them marked when the machine did not hold its speed
(points/sentinel.py). Each sentinel is read against the reading before it (the
configuration's first point, or the sentinel before) and, when that is another sentinel,
against the first point too: the span of points between two readings is marked when its
closing reading moved from its opening one (a change under these points) or from the first
point (the machine no longer runs at the speed the configuration started at: a step that
lasted, or a drift in steps each too small to flag). Points before the change stay as their
other evidence judged them."""

from __future__ import annotations

from dataclasses import dataclass, field

from tunebench.points.cells import RequestSample
from tunebench.points.machine import DRIFT_PREFIX
from tunebench.points.records import SentinelRecord
from tunebench.points.sentinel import (
    SentinelVerdict,
    readable,
    sentinel_after,
    sentinel_verdict,
)
from tunebench.seams.load import ClientResult
from tunebench.seams.progress import Reporter
from tunebench.store.run import RunStore


@dataclass
class SentinelSpans:
    """One repeat's readings of its first point as they come: the reading a sentinel is
    compared with, and the points measured since."""

    first: str | None = None  # the point every sentinel repeats
    first_samples: list[RequestSample] | None = None
    against: str | None = None  # the last reading: the first point or the last sentinel
    against_samples: list[RequestSample] | None = None
    points: list[str] = field(default_factory=list)  # measured since `against`
    sentinels: int = 0  # judged so far

    def measured(self, point_id: str, samples: list[RequestSample]) -> None:
        """A point (not a sentinel) was stored."""
        if self.first is None:
            self.first, self.first_samples = point_id, samples
            self.against, self.against_samples = point_id, samples
        self.points.append(point_id)

    def judged(self, sentinel_id: str, samples: list[RequestSample]) -> None:
        """A sentinel was judged: the next span starts at it. A sentinel whose window is too
        thin to compare starts none: the next one is read against the reading before it,
        and judges its points too."""
        self.sentinels += 1
        if not readable(samples):
            return
        self.against, self.against_samples = sentinel_id, samples
        self.points = []


_NO_FIRST = "sentinel not compared: the first point was measured by an earlier attempt"


def judge_sentinel(
    store: RunStore,
    reporter: Reporter,
    config_id: str,
    repeat: int,
    first: str,
    spans: SentinelSpans,
    result: ClientResult,
) -> None:
    """`result` is the sentinel's window; `first` the point it repeats, `spans` this repeat's
    readings so far (no first reading: an earlier attempt measured the first point)."""
    after = sentinel_after(result.point_id)
    alone = after is None and spans.sentinels == 0  # the only sentinel: it judges every point
    against = spans.against or first
    verdict: SentinelVerdict | str = (
        sentinel_verdict(spans.against_samples, result.samples)
        if spans.against_samples is not None
        else _NO_FIRST
    )
    # against the first point too, when the reading before was a sentinel
    from_first: SentinelVerdict | str | None = None
    if spans.first_samples is not None and spans.against != spans.first:
        from_first = sentinel_verdict(spans.first_samples, result.samples)
    record: SentinelRecord = {
        "point": first,
        "repeat": repeat,
        "window": [result.start_time, result.end_time],
    }
    if not alone:
        record["after"] = after or (spans.points[-1] if spans.points else "")
        record["against"] = against
        record["points"] = list(spans.points)
    if isinstance(verdict, str):
        record["note"] = verdict
        reporter.note(f"  {verdict}")
    else:
        record.update(verdict.as_record())
    if isinstance(from_first, SentinelVerdict):
        record["first_change_pct"] = round(100 * from_first.change, 1)
        record["first_held"] = from_first.held
    elif from_first is not None:
        record["first_note"] = from_first
    where = "" if alone else f" after {record['after']}"
    moved = [
        (v, than)
        for v, than in ((verdict, against), (from_first, first))
        if isinstance(v, SentinelVerdict) and not v.held
    ]
    if moved:
        shift, than = moved[0]
        described = shift.describe(first) if alone else shift.describe(first, record["after"], than)
        reason = f"{DRIFT_PREFIX}: {described}"
        store.mark_unverified(config_id, repeat, reason, None if alone else spans.points)
        record["marked"] = True
        shown = "every point" if alone else ", ".join(spans.points) or "no point"
        reporter.note(f"  [yellow]{reason}[/] (marks {shown})")
    elif isinstance(verdict, SentinelVerdict):
        if verdict.inconclusive:
            way = "slower" if verdict.change > 0 else "faster"
            reporter.note(
                f"  sentinel{where}: {first} again {abs(verdict.change):.0%} {way}, within its "
                f"windows' own noise ({verdict.z:.1f} noise units): it cannot say whether the "
                "machine held"
            )
        else:
            reporter.note(
                f"  sentinel{where}: {first} again within {abs(verdict.change):.0%}: "
                "the machine held its speed"
            )
    spans.judged(result.point_id, result.samples)
    _keep(store, config_id, repeat, record)


def sentinel_not_measured(
    store: RunStore, reporter: Reporter, config_id: str, repeat: int, first: str, error: str
) -> None:
    """The sentinel's window failed (the load generator stalled or died): the points before
    it stand, and the record says the machine's hold over them was not checked."""
    note = f"sentinel not measured: {error}"
    reporter.note(f"  [yellow]{note}[/]: whether the machine held its speed is not checked")
    _keep(store, config_id, repeat, {"point": first, "repeat": repeat, "note": note})


def _keep(store: RunStore, config_id: str, repeat: int, record: SentinelRecord) -> None:
    # every sentinel's record is kept: a later repeat's (or a later sentinel of the same
    # repeat) does not replace an earlier one; a resumed repeat measures its sentinels again
    entry = store.manifest.config(config_id)
    key = (repeat, record.get("after"))
    kept = [
        r
        for r in (entry.sentinels if entry else None) or []
        if (r.get("repeat"), r.get("after")) != key
    ]
    store.update_config(config_id, sentinel=record, sentinels=[*kept, record])
