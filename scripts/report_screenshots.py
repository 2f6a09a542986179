"""The screenshots of docs/results-and-compare.md, taken from a run's report.html as a reader
sees it: headless Chromium (Debian's, as `make test` installs it) at 1400 px.

    python scripts/report_screenshots.py RUN_DIR [--out docs/images]

Writes report-summary-headline.png (the summary table and the best configuration's
headline), report-throughput-vs-load.png and report-ttft-vs-load.png (two of the plots).
Exits 2 with one line when the report, Chromium or playwright is missing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

WIDTH = 1400
# the plot images by their alt text, as the report's template writes it
PLOTS = {
    "report-throughput-vs-load.png": "Output throughput vs offered load",
    "report-ttft-vs-load.png": "TTFT vs offered load",
}
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run directory holding report.html")
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args()
    report = args.run / "report.html"
    chromium = shutil.which("chromium")
    if not report.is_file():
        print(
            f"error: {report} not found: run `tunebench report {args.run}` first", file=sys.stderr
        )
        return 2
    if not chromium:
        print("error: chromium not found: `make test-deps` installs Debian's", file=sys.stderr)
        return 2
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("error: playwright is missing: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.goto(report.resolve().as_uri(), wait_until="load")
            top = page.locator("#summary").bounding_box()
            # the summary's heading down to the line under the headline
            bottom = page.locator("#best ~ p").first.bounding_box()
            if top is None or bottom is None:
                print(f"error: {report} has no summary or headline", file=sys.stderr)
                return 2
            clip = {
                "x": 0,
                "y": top["y"] - 8,
                "width": WIDTH,
                "height": bottom["y"] + bottom["height"] - top["y"] + 16,
            }
            page.screenshot(path=str(args.out / "report-summary-headline.png"), clip=clip)
            for name, alt in PLOTS.items():
                page.locator(f'img[alt="{alt}"]').screenshot(path=str(args.out / name))
                print(args.out / name)
            print(args.out / "report-summary-headline.png")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
