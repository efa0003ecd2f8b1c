"""Manual page images: render time uncached and cached, against baselines measured in the same run.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_page_images.py [--pdfs devcorpus-pdfs] [--db INDEX]

Indexes the demo manuals and, if present, the development corpus's vendor PDFs (git-ignored,
fetched per ../shared/devcorpus/SOURCES.md; `--db` reuses an index of them), then requests
every page that holds a fault entry, with that entry highlighted, plus the other pages of each
manual without one (up to --pages a manual):
- baselines: PyMuPDF opening the document and loading the page alone; and the naive render
  (the page drawn at the same size and encoded by MuPDF's own PNG writer, no highlight, no cache);
- the library (knowledge.page_images): uncached (an empty cache), then the same requests cached;
- HTTP (the whole service, `create_app(Service(config))` with a copy of the index as its manual index,
  on uvicorn, loopback, keep-alive; measured once its models are warm): uncached, cached, and 304
  revalidation; and, as their baseline, the same cached PNG files from a bare route on an app of its
  own (no token, no middleware, no index, no checks).
- memory under bursts: a real `fixloop serve` process on a copy of each index; --bursts times, its page cache
  emptied first, --clients concurrent clients each ask for every page above, in an order of their own. Its RSS
  and thread count before (ready, warm, no page served yet: the baseline), at peak, right after the last burst
  and --settle seconds later.
Targets: p95 <= 150 ms uncached, <= 10 ms cached.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import pymupdf  # noqa: E402
from bench_hardening import TECHNICIAN, serve  # noqa: E402
from bench_support import PeakSampler, free_port, pct, rss_mb, threads, wait_warm  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from fastapi.responses import Response  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from edge.config import load_config  # noqa: E402
from edge.service.app import create_app  # noqa: E402
from edge.service.server import ServerThread  # noqa: E402
from edge.service.service import Service  # noqa: E402
from knowledge.demo import write_demo_manuals  # noqa: E402
from knowledge.ingest.build import build_index  # noqa: E402
from knowledge.page_images import MAX_HEIGHT_PX, WIDTH_PX, PageImages  # noqa: E402
from tools.plc.simulator import start_simulator  # noqa: E402

TOKEN = "bench-technician-token"
UNCACHED_P95_MS = 150.0
CACHED_P95_MS = 10.0
console = Console()

Request = tuple[str, str, Path, int, str | None]  # corpus, manual id, pdf, page, entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--pdfs",
        type=Path,
        default=ROOT / "devcorpus-pdfs",
        help="folder of vendor PDFs (default: devcorpus-pdfs; skipped when absent)",
    )
    parser.add_argument("--db", type=Path, help="an index of those PDFs to reuse (default: build one, without OCR)")
    parser.add_argument("--pages", type=int, default=12, help="pages without an entry to request per manual")
    parser.add_argument("--clients", type=int, default=48, help="concurrent clients in a burst")
    parser.add_argument("--bursts", type=int, default=3, help="bursts, each on an empty page cache")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds idle before the last memory figure")
    parser.add_argument("--memory-only", action="store_true", help="only the bursts, not the latency tables")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-page-images-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        demo_db = work / "demo.sqlite"
        build_index(write_demo_manuals(work / "demo"), demo_db)
        indexes = {"demo": demo_db}
        if args.db:
            indexes["devcorpus"] = args.db
        elif args.pdfs.is_dir() and any(args.pdfs.glob("*.pdf")):
            indexes["devcorpus"] = work / "devcorpus.sqlite"
            build_index([args.pdfs], indexes["devcorpus"], ocr=False)
        console.print(f"[dim]indexes built in {time.perf_counter() - started:.0f} s: {', '.join(indexes)}[/]")

        requests = {name: plan(db, name, args.pages) for name, db in indexes.items()}
        for name, todo in requests.items():
            bursts(indexes[name], work / "bursts" / name, todo, args.clients, args.bursts, args.settle)
        if not args.memory_only:
            latencies(indexes, requests, work)
    console.print(
        f"[dim]machine: {os.cpu_count()} cores, load average at start {load_start:.2f}, "
        f"at end {os.getloadavg()[0]:.2f}[/]"
    )
    return 0


def latencies(indexes: dict[str, Path], requests: dict[str, list[Request]], work: Path) -> None:
    table = Table(title=f"Page images, {WIDTH_PX} px wide (at most {MAX_HEIGHT_PX} px high): ms per page")
    for column in ("corpus", "stage", "requests", "p50", "p95", "max"):
        table.add_column(column, justify="left" if column in ("corpus", "stage") else "right")
    results: dict[tuple[str, str], list[float]] = {}
    for name, todo in requests.items():
        images = PageImages(indexes[name], work / "cache" / name)
        results[name, "baseline: open the PDF, load the page"] = timed(todo, open_page)
        results[name, "baseline: naive render + MuPDF PNG"] = timed(todo, naive_render)
        results[name, "library, uncached"] = timed(todo, rendering(images))
        results[name, "library, cached"] = timed(todo, rendering(images))
        http = over_http(indexes[name], work / "service" / name, todo)
        results.update({(name, f"HTTP, {stage}"): times for stage, times in http.items()})
    for (name, stage), times in results.items():
        table.add_row(
            name, stage, str(len(times)), f"{pct(times, 0.5):.1f}", f"{pct(times, 0.95):.1f}", f"{max(times):.1f}"
        )
    console.print(table)
    verdicts(results)


def bursts(index: Path, state: Path, todo: list[Request], clients: int, count: int, settle_s: float) -> None:
    """The service's RSS and threads under bursts of page requests; each burst on an empty cache, so it renders."""
    state.mkdir(parents=True)
    shutil.copy(index, state / "manuals.sqlite")
    cache = state / "page-images"
    plc_port = free_port()
    sim = start_simulator(load_config(env={}).devices, "127.0.0.1", plc_port)
    try:
        with serve(state, plc_port) as (url, pid):
            before = rss_mb(pid), threads(pid)
            walls = []
            with PeakSampler(pid) as peak:
                for n in range(count):
                    shutil.rmtree(cache, ignore_errors=True)
                    started = time.perf_counter()
                    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                        seeds = range(n * clients, (n + 1) * clients)
                        list(pool.map(lambda seed: fetch_all(url, todo, random.Random(seed)), seeds))
                    walls.append(time.perf_counter() - started)
            after = rss_mb(pid), threads(pid)
            time.sleep(settle_s)
            settled = rss_mb(pid), threads(pid)
    finally:
        sim.stop()
    table = Table(
        title=f"{todo[0][0]}: fixloop serve, {count} bursts of {clients} clients x {len(todo)} pages, "
        f"each on an empty cache ({' / '.join(f'{wall:.1f}' for wall in walls)} s a burst)"
    )
    for column in ("", "RSS MB", "threads"):
        table.add_column(column, justify="right" if column else "left")
    for stage, (rss, running) in [
        ("baseline: ready, warm, no page yet", before),
        ("peak", (peak.rss_mb, peak.threads)),
        ("right after the last burst", after),
        (f"{settle_s:g} s later", settled),
    ]:
        table.add_row(stage, f"{rss:.0f}", str(running))
    console.print(table)


def fetch_all(url: str, todo: list[Request], order: random.Random) -> None:
    mine = todo[:]
    order.shuffle(mine)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TECHNICIAN}"}, timeout=120) as client:
        for _, sha, _, page, entry in mine:
            response = client.get(f"/v1/manuals/{sha}/pages/{page}.png", params={"entry": entry} if entry else None)
            if response.status_code != 200:
                raise SystemExit(f"page {page} of {sha[:12]}: HTTP {response.status_code} {response.text[:200]}")


def plan(db: Path, corpus: str, others: int) -> list[Request]:
    """Each page that holds an entry, highlighted (its first entry), then up to `others` pages a manual without."""
    with sqlite3.connect(db) as conn:
        manuals = conn.execute("SELECT sha256, path, pages FROM manuals ORDER BY file").fetchall()
        entries = conn.execute(
            "SELECT manual_sha256, page, code, boxes FROM records WHERE kind = 'entry' ORDER BY id"
        ).fetchall()
    cited: dict[tuple[str, int], str] = {}
    for sha, page, code, boxes in entries:
        if any(box[0] == page for box in json.loads(boxes or "[]")):
            cited.setdefault((sha, page), code)
    todo: list[Request] = []
    for sha, path, pages in manuals:
        todo += [(corpus, sha, Path(path), page, code) for (s, page), code in cited.items() if s == sha]
        rest = [n for n in range(1, pages + 1) if (sha, n) not in cited]
        todo += [(corpus, sha, Path(path), page, None) for page in rest[:others]]
    return todo


def rendering(images: PageImages) -> Callable[[Request], object]:
    """The library's page image for a request: rendered, or from its cache once rendered."""
    return lambda request: images.render_page(request[1], request[3], request[4])


def timed(todo: list[Request], call: Callable[[Request], object]) -> list[float]:
    times = []
    for request in todo:
        started = time.perf_counter()
        call(request)
        times.append((time.perf_counter() - started) * 1000)
    return times


def open_page(request: Request) -> None:
    with pymupdf.open(request[2]) as doc:
        doc.load_page(request[3] - 1)


def naive_render(request: Request) -> None:
    with pymupdf.open(request[2]) as doc:
        page = doc.load_page(request[3] - 1)
        zoom = min(WIDTH_PX / page.rect.width, MAX_HEIGHT_PX / page.rect.height)
        page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False).tobytes("png")


def service_on(index: Path, state: Path) -> Service:
    """The service with a copy of `index` in `state` as its manual index: its page cache goes beside the copy,
    never beside an index given with --db."""
    state.mkdir(parents=True)
    shutil.copy(index, state / "manuals.sqlite")
    config = load_config(env={"FIXLOOP_STATE_DIR": str(state)})
    return Service(
        config.model_copy(
            update={
                "knowledge": config.knowledge.model_copy(update={"index_file": "manuals.sqlite"}),
                "service": config.service.model_copy(update={"technician_tokens": [TOKEN]}),
            }
        )
    )


def over_http(index: Path, state: Path, todo: list[Request]) -> dict[str, list[float]]:
    service = service_on(index, state)
    images = service.page_images
    bare = FastAPI()

    @bare.get("/bare/{name}")
    def bare_file(name: str) -> Response:
        return Response((images.cache_dir / name).read_bytes(), media_type="image/png")

    with (
        ServerThread(create_app(service), "127.0.0.1", free_port(), limits=service.config.service) as server,
        ServerThread(bare, "127.0.0.1", free_port()) as bare_server,
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
        httpx.Client(base_url=bare_server.url) as plain,
    ):
        wait_warm(service)
        etags: dict[Request, str] = {}

        def get(request: Request, revalidate: bool = False) -> None:
            _, sha, _, page, entry = request
            url = f"/v1/manuals/{sha}/pages/{page}.png"
            response = client.get(
                url,
                params={"entry": entry} if entry else None,
                headers={"If-None-Match": etags[request]} if revalidate else None,
            )
            if response.status_code != (304 if revalidate else 200):
                raise SystemExit(f"{url}: HTTP {response.status_code} {response.text[:200]}")
            etags[request] = response.headers["etag"]

        measured = {
            "uncached": timed(todo, get),
            "cached": timed(todo, get),
            "304 revalidation": timed(todo, lambda r: get(r, revalidate=True)),
        }
        files = {request: f"/bare/{images.locate(request[1], request[3], request[4]).key}.png" for request in todo}
        measured["baseline: the same files, bare route"] = timed(todo, lambda r: plain.get(files[r]).raise_for_status())
        return measured


def verdicts(results: dict[tuple[str, str], list[float]]) -> None:
    for (name, stage), times in results.items():
        target = UNCACHED_P95_MS if stage.endswith("uncached") else CACHED_P95_MS if stage.endswith("cached") else None
        if target is not None:
            p95 = pct(times, 0.95)
            mark = "[green]met[/]" if p95 <= target else "[red]missed[/]"
            console.print(f"{name} {stage}: p95 {p95:.1f} ms (target <= {target:g} ms) {mark}")
    for name in dict.fromkeys(name for name, _ in results):
        naive = pct(results[name, "baseline: naive render + MuPDF PNG"], 0.95)
        ours = pct(results[name, "library, uncached"], 0.95)
        console.print(
            f"{name}: uncached p95 is {ours / naive:.2f}x the naive render's (highlight and cache write included)"
        )


if __name__ == "__main__":
    sys.exit(main())
