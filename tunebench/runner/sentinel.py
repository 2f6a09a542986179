"""The A...A sentinel judged when it is measured: against the configuration's first point
(points/sentinel.py), recorded in the manifest, and every point of the repeat marked when the
machine did not hold its speed between the two."""

from __future__ import annotations

from tunebench.points.cells import RequestSample
from tunebench.points.machine import DRIFT_PREFIX
from tunebench.points.records import SentinelRecord
from tunebench.points.sentinel import sentinel_verdict
from tunebench.seams.load import ClientResult
from tunebench.seams.progress import Reporter
from tunebench.store.run import RunStore


def judge_sentinel(
    store: RunStore,
    reporter: Reporter,
    config_id: str,
    repeat: int,
    first: str,
    first_samples: list[RequestSample] | None,
    result: ClientResult,
) -> None:
    """`result` is the sentinel's window; `first` the point it repeats, `first_samples` that
    point's requests (None when an earlier attempt measured it)."""
    verdict = (
        sentinel_verdict(first_samples, result.samples)
        if first_samples is not None
        else "sentinel not compared: the first point was measured by an earlier attempt"
    )
    record: SentinelRecord = {
        "point": first,
        "repeat": repeat,
        "window": [result.start_time, result.end_time],
    }
    if isinstance(verdict, str):
        record["note"] = verdict
        reporter.note(f"  {verdict}")
    else:
        record.update(verdict.as_record())
        if verdict.inconclusive:
            way = "slower" if verdict.change > 0 else "faster"
            reporter.note(
                f"  sentinel: {first} again {abs(verdict.change):.0%} {way}, within its windows' "
                f"own noise ({verdict.z:.1f} noise units): it cannot say whether the machine held"
            )
        elif verdict.held:
            reporter.note(
                f"  sentinel: {first} again within {abs(verdict.change):.0%}: "
                "the machine held its speed"
            )
        else:
            reason = f"{DRIFT_PREFIX}: {verdict.describe(first)}"
            store.mark_unverified(config_id, repeat, reason)
            reporter.note(f"  [yellow]{reason}[/]")
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
    # every repeat's record is kept: a later repeat's sentinel does not replace an earlier one
    entry = store.manifest.config(config_id)
    kept = [r for r in (entry.sentinels if entry else None) or [] if r.get("repeat") != repeat]
    store.update_config(config_id, sentinel=record, sentinels=[*kept, record])
