"""What a stored point may be used as: the one reading of its `valid` and `client_limited`
flags for every consumer (compare, report, results/best, capacity search, tuner).

- invalid (`valid` false: args not in effect, no successful request, client and server
  counts disagree): evidence of nothing; compare excludes it, best and the tuner skip it,
  a capacity search does not count it as capacity;
- client-limited (the load it got is not the load it names): a true statement about what
  was measured but not about the server at its target; compare marks it, best uses it only
  when nothing else is left, a capacity search never counts it as capacity;
- otherwise: server evidence; *unverified* (`unverified_reason`) when part of it could not
  be checked (no server metrics, args the server gave no read-back of, an imported run):
  compare's gate fails on an unverified candidate point unless told `--allow-unverified`,
  and `results` says so of a best configuration that rests on one.
"""

from __future__ import annotations

from typing import Any

from tunebench.points.cells import RowView


def flag(value: Any) -> bool:
    """A boolean cell as stored (True, "True", "true", "1") or in memory."""
    return value is True or str(value).lower() in ("true", "1")


def is_valid(row: RowView) -> bool:
    return flag(row.get("valid"))


def is_client_limited(row: RowView) -> bool:
    return flag(row.get("client_limited"))


def is_server_evidence(row: RowView) -> bool:
    """Valid and not held back by the client: the point speaks for the server at its target."""
    return is_valid(row) and not is_client_limited(row)


def unverified_reasons(row: RowView) -> list[str]:
    """What could not be checked of a point ([] when everything was). Runs stored before the
    column existed: a point without server metrics is unverified."""
    text = row.get("unverified_reason")
    if isinstance(text, str):
        return [part for part in text.split("; ") if part]
    if str(row.get("server_metrics") or "") == "absent":
        return ["no server metrics"]
    return []
