"""The plots' shared kit: matplotlib set up for PNGs, each figure saved with the layout it
drew recorded in the PNG (`LAYOUT_KEY`: tests read what a person sees from the image itself,
tunebench/testing/plot_layout.py), legends placed outside the panels, and one colour and
marker per configuration."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zlib
from typing import Any

import numpy as np

# The PNG text chunk that carries where a figure put its panels, legends and series, in
# the image's own pixels: a test of the report reads what a person sees from the report's
# own images instead of trusting the code that placed them (tunebench/testing/plot_layout.py).
LAYOUT_KEY = "tunebench-layout"


def figure_bytes(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    recorded: dict[str, Any] = {}
    # recorded while the PNG is drawn: the positions the constrained layout settled on, at
    # the saved image's dpi (after savefig the figure is back at its own dpi)
    hook = fig.canvas.mpl_connect(
        "draw_event", lambda event: recorded.update(_layout(fig, event.renderer))
    )
    # A constrained layout instead of bbox_inches="tight": the latter draws every figure twice.
    fig.savefig(buffer, format="png", dpi=80)
    fig.canvas.mpl_disconnect(hook)
    plt.close(fig)
    png = buffer.getvalue()
    return _with_text_chunk(png, LAYOUT_KEY, json.dumps(recorded, separators=(",", ":")))


def _with_text_chunk(png: bytes, key: str, text: str) -> bytes:
    """`png` with a tEXt chunk before its IEND (the last 12 bytes of every PNG)."""
    data = key.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = b"tEXt" + data
    crc = struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF)
    return png[:-12] + struct.pack(">I", len(data)) + chunk + crc + png[-12:]


def _radius(fig, size_pt: float, marker: Any) -> float:
    """Half a marker's width in the image's pixels (0 for a line without markers)."""
    if marker in (None, "None", "none", "", " "):
        return 0.0
    return round(size_pt * fig.dpi / 72 / 2, 1)


def _layout(fig, renderer) -> dict[str, Any]:
    """Panels, legends and labelled series of `fig` as drawn: boxes [left, top, right,
    bottom] and points [x, y] in image pixels from the top left; each series with its data
    values, colour and marker (a series is what a legend names: a line or a scatter whose
    label does not start with "_")."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_hex

    height = fig.bbox.height

    def box(extent) -> list[float]:
        return [
            round(extent.x0, 1),
            round(height - extent.y1, 1),
            round(extent.x1, 1),
            round(height - extent.y0, 1),
        ]

    def pixels(ax, xy: np.ndarray) -> list[list[float]]:
        at = ax.transData.transform(xy)
        return [[round(x, 1), round(height - y, 1)] for x, y in at]

    axes, series = [], []
    for index, ax in enumerate(a for a in fig.axes if a.get_visible()):
        axes.append(
            {
                "box": box(ax.get_window_extent(renderer)),
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
            }
        )
        for line in ax.get_lines():
            if line.get_label().startswith("_") or not line.get_visible():
                continue
            xy = np.asarray(line.get_xydata(), dtype=float)
            xy = xy[np.isfinite(xy).all(axis=1)]
            face = line.get_markerfacecolor()
            series.append(
                {
                    "axes": index,
                    "label": line.get_label(),
                    "colour": to_hex(line.get_color()),
                    "marker": str(line.get_marker()),
                    "filled": not (isinstance(face, str) and face == "none"),
                    "size": float(line.get_markersize()),
                    "radius": _radius(fig, line.get_markersize(), line.get_marker()),
                    "clipped": bool(line.get_clip_on()),
                    "data": np.round(xy, 4).tolist(),
                    "pixels": pixels(ax, xy),
                }
            )
        for collection in ax.collections:
            if not isinstance(collection, PathCollection) or not collection.get_visible():
                continue
            if str(collection.get_label()).startswith("_"):
                continue
            xy = np.asarray(collection.get_offsets(), dtype=float)
            xy = xy[np.isfinite(xy).all(axis=1)]
            paths = collection.get_paths()
            shape = np.asarray(paths[0].vertices).round(3).tobytes() if paths else b""
            faces = np.asarray(collection.get_facecolor(), dtype=float)
            sizes = collection.get_sizes()
            size = float(np.sqrt(sizes[0])) if len(sizes) else 0.0  # s is the area in pt²
            series.append(
                {
                    "axes": index,
                    "label": collection.get_label(),
                    "colour": to_hex(tuple(faces[0])) if len(faces) else "none",
                    # a scatter's marker is a path: its vertices tell two shapes apart
                    "marker": hashlib.sha1(shape).hexdigest()[:8],
                    "filled": bool(len(faces)),
                    "size": size,
                    "radius": _radius(fig, size, "o"),
                    "clipped": bool(collection.get_clip_on()),
                    "data": np.round(xy, 4).tolist(),
                    "pixels": pixels(ax, xy),
                }
            )
    legends = [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend() is not None)]
    return {
        "size": [round(fig.bbox.width, 1), round(height, 1)],
        "axes": axes,
        "legends": [
            {
                "box": box(legend.get_window_extent(renderer)),
                "labels": [t.get_text() for t in legend.get_texts()],
            }
            for legend in legends
        ],
        "series": series,
    }


def setup_plotting():
    import matplotlib

    matplotlib.use("Agg")  # no display; PNGs only
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt, sns


MANY_HUES = 10  # beyond this a legend says nothing; the summary table names the lines


def place_legend(ax, sns, hues: int, what: str = "configurations") -> None:
    if hues > MANY_HUES and ax.get_legend() is not None:
        ax.get_legend().remove()
        ax.set_title(f"{ax.get_title()} ({hues} {what}; legend omitted)")


def legend_outside(fig, handles, labels) -> None:
    """One legend for the figure, right of every panel: never over the data."""
    fig.legend(handles, labels, loc="outside right upper", fontsize="small", frameon=False)


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# tab10 without its grey (index 7): the grid and the bands are grey
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79",
)  # fmt: skip


def styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """label -> (colour, marker), a different pair for every label: colours and markers
    step together, so two configurations differ in both while there are colours left
    and in at least one up to len(PALETTE) x len(MARKERS) configurations."""
    out = {}
    for index, label in enumerate(dict.fromkeys(labels)):
        colour = PALETTE[index % len(PALETTE)]
        marker = MARKERS[(index + index // len(PALETTE)) % len(MARKERS)]
        out[label] = (colour, marker)
    return out
