"""A run interrupted by a 5 s network drop is shown complete after reconnect, with no lost or duplicated steps.

    python scripts/bench_reconnect.py [--runs 10] [--drop-s 5] [--step-s 1.5]

The tablet app in Debian's Chromium (Playwright) against the real service on loopback, with the
scripted model taking `--step-s` per step. Each run is asked in a fresh tablet context; when its
first result shows, the network drops for `--drop-s`: Playwright's offline mode (the browser's
`offline`/`online` events, no new requests) and a Link in front of the service that resets every
open connection (offline mode alone leaves an open fetch stream running in Chromium). Measured:
runs shown complete, steps lost and duplicated (the timeline's steps against the run's events from
`GET /v1/runs/{id}/events`), and the time from the network's return to the run shown complete (the
answer's reason chip up, the spinner gone). Baseline, in the same process, interleaved: the same
runs without a drop, timed from the equivalent moment (first result + `--drop-s`) to complete.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_support import pct
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from rich.console import Console
from rich.table import Table

from knowledge.demo import build_demo_index
from tests.fixtures.link import Link
from tests.fixtures.service import RunningService, run_service
from tests.fixtures.tablet import CHROMIUM, CHROMIUM_ARGS, ask, open_app
from tests.fixtures.wifi import LONG_QUESTION, expected_steps, long_run, shown_steps, wifi_down

RUN_TIMEOUT_S = 60.0
# Set in the page, in the wall-clock ms Python's time.time() uses: when the run is first shown complete, and
# when the steps missed during a drop first show (the step count grows past what it was when back online).
WATCH = """
const steps = () => document.querySelectorAll("[data-testid=step]").length;
window.addEventListener("online", () => { window.__stepsWhenOnline = steps(); });
new MutationObserver(() => {
  const spinner = document.getElementById("spinner");
  if (!window.__completeMs && spinner && spinner.hidden && document.querySelector("[data-testid=reason]")) {
    window.__completeMs = Date.now();
  }
  if (window.__stepsWhenOnline !== undefined && !window.__caughtUpMs && steps() > window.__stepsWhenOnline) {
    window.__caughtUpMs = Date.now();
  }
}).observe(document, { subtree: true, childList: true, attributes: true });
"""


def one_run(browser: Browser, service: RunningService, link: Link, drop_s: float, drop: bool) -> dict:
    """One run, dropped or not: complete?, lost and duplicated steps, s from the network's return (or the
    equivalent moment) to the run shown complete."""
    page: Page = open_app(browser, link.url)
    try:
        page.add_init_script(WATCH)
        page.reload()  # the watch is in place from the start
        page.get_by_test_id("device-picker").locator("option[value=press-3]").wait_for(state="attached")
        with page.expect_response(lambda r: r.url.endswith("/v1/runs") and r.request.method == "POST") as posted:
            ask(page, "press-3", LONG_QUESTION)
        run_id = posted.value.headers["x-run-id"]
        page.locator("[data-testid=step][data-kind=observation]").first.wait_for()
        with wifi_down(page, link) if drop else contextlib.nullcontext():
            time.sleep(drop_s)
            back = time.time()
        try:
            page.wait_for_function("() => window.__completeMs", timeout=RUN_TIMEOUT_S * 1000)
        except PlaywrightTimeout:  # a run never shown complete is counted, not fatal
            return {"complete": False, "lost": 0, "duplicated": 0, "seconds": None, "caught_up": None}
        seconds = page.evaluate("window.__completeMs") / 1000 - back
        caught_up = page.evaluate("window.__caughtUpMs")
        with service.client() as client:
            events = client.get(f"/v1/runs/{run_id}/events").json()
        expected, shown = Counter(expected_steps(events)), Counter(shown_steps(page))
        return {
            "complete": events[-1]["type"] == "stored",
            "lost": sum((expected - shown).values()),
            "duplicated": sum((shown - expected).values()),
            "seconds": seconds,
            "caught_up": caught_up / 1000 - back if caught_up else None,
        }
    finally:
        page.context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs with a drop, and as many without")
    parser.add_argument("--drop-s", type=float, default=5.0)
    parser.add_argument("--step-s", type=float, default=1.5, help="the scripted model's time per step")
    args = parser.parse_args()
    console = Console()
    results: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        console.print("building the demo index…")
        index = build_demo_index(state / "knowledge")
        with (
            run_service(state / "service", index, long_run(args.step_s), loop={"max_wall_s": 120.0}) as service,
            Link(service.url) as link,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            for n in range(args.runs):
                for drop in (False, True):  # interleaved: both see the same machine load
                    result = one_run(browser, service, link, args.drop_s, drop)
                    results[drop].append(result)
                    took = f"complete {result['seconds']:.2f} s" if result["complete"] else "never complete"
                    if result["caught_up"] is not None:
                        took += f", missed steps shown {result['caught_up']:.2f} s"
                    since = "the network's return" if drop else "the same moment"
                    console.print(
                        f"run {n + 1} {'drop' if drop else 'no drop'}: {took} after {since}, "
                        f"lost {result['lost']}, duplicated {result['duplicated']}"
                    )
            browser.close()

    table = Table(
        title=f"Shown complete after a {args.drop_s:g} s network drop mid-run ({args.runs} runs each, "
        f"{args.step_s:g} s per model step)"
    )
    for column in ("", "runs complete", "lost steps", "duplicated steps", "to complete p50", "p95"):
        table.add_column(column, justify="right")
    for drop, label in ((True, "drop"), (False, "no drop")):
        rows = results[drop]
        times = [r["seconds"] for r in rows if r["complete"]]
        table.add_row(
            label,
            f"{len(times)}/{len(rows)}",
            str(sum(r["lost"] for r in rows)),
            str(sum(r["duplicated"] for r in rows)),
            f"{pct(times, 0.5):.2f} s" if times else "-",
            f"{pct(times, 0.95):.2f} s" if times else "-",
        )
    console.print(table)
    console.print("to complete: from the network's return (no drop: from the same moment) to the run shown complete")
    caught_up = [r["caught_up"] for r in results[True] if r["caught_up"] is not None]
    if caught_up:
        console.print(
            f"steps missed during the drop shown after the network's return: p50 {pct(caught_up, 0.5):.2f} s, "
            f"p95 {pct(caught_up, 0.95):.2f} s ({len(caught_up)} of {len(results[True])} drops)"
        )
    dropped = results[True]
    return 0 if all(r["complete"] and not r["lost"] and not r["duplicated"] for r in dropped) else 1


if __name__ == "__main__":
    sys.exit(main())
