"""What a person sees in a plot, read from the layout every tunebench PNG carries.

`tunebench/analysis/figure_kit.py` records, while it draws a figure, where its panels, legends
and labelled series landed in the image's pixels (a tEXt chunk named LAYOUT_KEY). The checks
here read that record from the images themselves (a report.html, a compare page), so a
test sees the picture the reader gets, not the intentions of the code that drew it.
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import re
import struct
from itertools import combinations
from typing import Any

from tunebench.analysis.figure_kit import LAYOUT_KEY

IMAGE = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)"')
NEAR_PX = 1.5  # two markers closer than this are one spot to the eye
SAME_LINE = 0.005  # points within 0.5% of one y = kx line


def read_layout(png: bytes) -> dict[str, Any] | None:
    """The layout a tunebench PNG carries, or None when it carries none."""
    at = 8  # after the PNG signature
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind = png[at + 4 : at + 8]
        data = png[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, text = data.partition(b"\0")
            if key.decode("latin-1") == LAYOUT_KEY:
                return json.loads(text.decode("latin-1"))
        at += 12 + length
    return None


def page_images(page: str) -> list[tuple[str, bytes]]:
    """(alt text, PNG bytes) of every inline image of an HTML page, in page order."""
    return [(html_lib.unescape(alt), base64.b64decode(data)) for data, alt in IMAGE.findall(page)]


def _overlap(a: list[float], b: list[float]) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return max(width, 0.0) * max(height, 0.0)


def _inside(point: list[float], box: list[float], margin: float = 1.0) -> bool:
    x, y = point
    return box[0] - margin <= x <= box[2] + margin and box[1] - margin <= y <= box[3] + margin


def _cut(point: list[float], box: list[float], radius: float) -> bool:
    """A marker centred inside the panel but nearer its edge than its half width: a panel
    that clips its series cuts it, and half a marker reads as none or another shape."""
    if radius <= 1 or not _inside(point, box, margin=0):
        return False
    x, y = point
    edge = min(x - box[0], box[2] - x, y - box[1], box[3] - y)
    return edge < radius - 1


def _covered(under: dict, over: dict) -> bool:
    """Every marker of `under` lies on one of `over`'s."""
    return bool(under["pixels"]) and all(
        any(abs(x - u) <= NEAR_PX and abs(y - v) <= NEAR_PX for u, v in over["pixels"])
        for x, y in under["pixels"]
    )


def _on_one_line_through_zero(a: dict, b: dict) -> bool:
    """Both series' points on one y = kx: y is x times a constant, whatever was measured."""
    ratios = [y / x for x, y in a["data"] + b["data"] if x > 0]
    if len(a["data"]) < 2 or len(b["data"]) < 2 or len(ratios) < 4:
        return False
    middle = sorted(ratios)[len(ratios) // 2]
    return middle > 0 and all(abs(r / middle - 1) <= SAME_LINE for r in ratios)


def layout_problems(layout: dict[str, Any] | None, name: str = "plot") -> list[str]:
    """What would mislead or hide something from a reader, one line each; [] when none.

    - a legend over a panel (it covers data), or cut off at the image's edge;
    - a series with no marker inside its panel, or a marker cut in part by its edge;
    - two series of one panel alike in colour, marker and fill;
    - a series hidden under a later one: every marker on one of the later's, drawn no
      smaller and both filled (a hollow or smaller marker on top leaves the lower visible);
    - two series of one panel on one line y = kx against an achieved (measured) x: such a
      y follows from x whatever the configuration (output tok/s against achieved req/s with
      fixed output lengths), so the panel compares nothing.
    """
    if layout is None:
        return [f"{name}: no layout recorded"]
    problems = []
    width, height = layout["size"]
    panels = layout["axes"]
    for legend in layout["legends"]:
        box = legend["box"]
        what = f"{name}: legend {legend['labels'][:3]}"
        for panel in panels:
            if _overlap(box, panel["box"]) > 0:
                problems.append(f"{what} overlaps the panel {panel['title']!r}")
        if box[0] < -1 or box[1] < -1 or box[2] > width + 1 or box[3] > height + 1:
            problems.append(f"{what} is cut off at the image's edge")
    by_panel: dict[int, list[dict]] = {}
    for series in layout["series"]:
        by_panel.setdefault(series["axes"], []).append(series)
    for index, members in by_panel.items():
        panel = panels[index]
        where = f"{name}, panel {panel['title']!r}"
        for series in members:
            if not any(_inside(p, panel["box"]) for p in series["pixels"]):
                problems.append(f"{where}: series {series['label']!r} has no marker inside")
            radius = series.get("radius", 0) if series.get("clipped", True) else 0
            cut = [p for p in series["pixels"] if _cut(p, panel["box"], radius)]
            if cut:
                problems.append(
                    f"{where}: series {series['label']!r} has {len(cut)} marker(s) cut by "
                    "the panel's edge"
                )
        for a, b in combinations(members, 2):
            pair = f"{where}: series {a['label']!r} and {b['label']!r}"
            if (a["colour"], a["marker"], a["filled"]) == (b["colour"], b["marker"], b["filled"]):
                problems.append(f"{pair} look alike")
            # b is drawn after a, on top of it
            if _covered(a, b) and b["size"] >= a["size"] and a["filled"] and b["filled"]:
                problems.append(f"{pair}: the first is hidden under the second")
            if "achieved" in panel["xlabel"] and _on_one_line_through_zero(a, b):
                problems.append(f"{pair} lie on one line y = kx, identical by construction")
    return problems
