"""The sweep's report.html opens correctly in a real browser (Debian's headless Chromium)."""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest

from tests.e2e.conftest import NEEDS_SERVER

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
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    # 5 run plots + one time series per configuration that ran
    assert len(images) == 7, images
    assert all(
        complete and width > 100 and height > 100 for _, complete, width, height in images
    ), images
    assert shot.stat().st_size > 50_000
