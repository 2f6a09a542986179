"""The sweep's report.html opens correctly in a real browser (Debian's headless Chromium),
and what a person sees there holds: no legend over the data, every configuration's series
drawn and visible, no two series alike by construction (read from the layout each plot
records in its own PNG: tunebench/testing/plot_layout.py), and the headline's best the one
`tunebench results` names."""

from __future__ import annotations

import html as html_lib
import importlib.util
import re
import shutil

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.points import trust
from tunebench.testing.plot_layout import layout_problems, page_images, read_layout

CHROMIUM = shutil.which("chromium")
# alone, in `make test`'s last step: the e2e sweep (tests/e2e/conftest.py) is timed; its
# readers run where it runs
pytestmark = [
    pytest.mark.server,
    pytest.mark.speed,
    NEEDS_SERVER,
    pytest.mark.skipif(
        not CHROMIUM or importlib.util.find_spec("playwright") is None,
        reason="Debian chromium and playwright are needed; `make test` installs them",
    ),
]


def test_report_is_self_contained_and_renders(e2e_sweep, tmp_path):
    from playwright.sync_api import sync_playwright

    report = e2e_sweep.path / "report.html"
    assert report.exists(), e2e_sweep.stdout[-1000:]
    assert f"report: {e2e_sweep.shown / 'report.html'}" in e2e_sweep.stdout
    html = report.read_text()
    # nothing is fetched: no external scripts, styles, fonts or images
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    for text in (
        "Summary",
        "Server configurations",
        "Plots",
        "Versions and host",
        "mns2",
        "mns8",
        "argument --kv-cache-dtype: invalid choice",
        "max_model_len",
    ):
        assert text in html, text

    problems, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(report.as_uri(), wait_until="load")
            images = page.evaluate(
                "Array.from(document.images)"
                ".map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight])"
            )
            headline = page.locator("p.headline").inner_text()
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    # 5 run plots, the machine's speed over the run, one time series per configuration
    assert len(images) == 8, images
    assert "Machine speed over the run" in [alt for alt, *_ in images], images
    assert all(
        complete and width > 100 and height > 100 for _, complete, width, height in images
    ), images
    assert shot.stat().st_size > 50_000

    # the plots as a reader sees them, from the layout each image records
    embedded = page_images(html)
    assert [alt for alt, _ in embedded] == [alt for alt, *_ in images]
    layouts = {alt: read_layout(png) for alt, png in embedded}
    problems = [p for alt, layout in layouts.items() for p in layout_problems(layout, alt)]
    assert problems == []
    # every configuration with a valid point at an offered load is a series in each plot
    # that compares configurations, in every panel of a load kind it ran
    ran: dict[str, set[str]] = {}
    for row in e2e_sweep.rows:
        if trust.flag(row.get("valid")) and row.get("load_kind") in ("concurrent", "poisson"):
            ran.setdefault(str(row["load_kind"]), set()).add(str(row["config_label"]))
    assert ran.get("concurrent") and ran.get("poisson"), e2e_sweep.rows
    for alt in (
        "Output throughput vs offered load",
        "TTFT vs offered load",
        "TTFT p95 vs achieved throughput, in load order",
        "ITL vs offered load",
    ):
        layout = layouts[alt]
        for index, panel in enumerate(layout["axes"]):
            kind = panel["title"].removesuffix(" load")
            drawn = {s["label"] for s in layout["series"] if s["axes"] == index}
            assert drawn == ran[kind], (alt, kind, drawn)
        (legend,) = layout["legends"]
        assert set(legend["labels"]) >= set().union(*ran.values()), (alt, legend)

    # the headline's best is the one `tunebench results` names, in the same words
    results = run_cli("results", str(e2e_sweep.path))
    assert results.returncode == 0, results.stderr
    best = next(x for x in results.stdout.splitlines() if x.startswith("best: "))
    assert headline == best.removeprefix("best: ")
    config = re.search(r'best-config: \{"config_id":"(c\d+)","label":"([^"]+)"', results.stdout)
    assert config and f"{config[1]} {config[2]}" in headline, (results.stdout, headline)
    assert html_lib.escape(headline, quote=False) in html
