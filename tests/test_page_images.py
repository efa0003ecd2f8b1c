"""Manual pages as images: entry boxes kept at index time, the page rendered with the entry
highlighted, cached on disk, and served by `GET /v1/manuals/{id}/pages/{n}.png` over real HTTP.

Real PDFs made here (the demo manuals, one with a page turned sideways, one with a scanned fault
page read by the real Tesseract), real indexes with the real SBERT model, and the whole service
(`create_app(Service(config))`) on uvicorn on loopback with that index as its manual index.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pymupdf
import pytest

from edge.config import load_config
from knowledge.demo import demo_manuals
from knowledge.demo.render import render_pdf
from knowledge.embed import Embedder
from knowledge.ingest.build import build_index
from knowledge.page_images import RENDER_WORKERS, PageImages
from knowledge.search import ManualIndex
from tests.fixtures.service import TECHNICIAN_TOKEN, run_service
from tools.contract import ToolContext
from tools.manual_search import ManualSearchTool
from tools.registry import ToolRegistry

HYDRA = "hydra_hp200_v2.1_en.pdf"
TURNED = "meridian_vmc850_v2.1_en_turned.pdf"  # page 2 printed sideways (/Rotate 90)
SCANNED = "pump_unit_scanned.pdf"  # page 2 is a scan: its entry E502 is read by OCR
SCAN_LINES = [
    (120, 12, "Fault code: E502 - Oil temperature too high"),
    (146, 10, "Cause: The oil cooler fan has stopped or the filter is blocked."),
    (168, 10, "Remedy:"),
    (190, 10, "1. Check the oil cooler fan."),
    (212, 10, "2. Clean the oil filter."),
]


@dataclass
class Library:
    folder: Path
    index: Path
    embedder: Embedder

    def manual_id(self, file: str, index: Path | None = None) -> str:
        with sqlite3.connect(index or self.index) as conn:
            return conn.execute("SELECT sha256 FROM manuals WHERE file = ?", (file,)).fetchone()[0]

    def entry(self, file: str, code: str) -> tuple[int, list[list[float]]]:
        with sqlite3.connect(self.index) as conn:
            page, boxes = conn.execute(
                "SELECT r.page, r.boxes FROM records r JOIN manuals m ON m.sha256 = "
                "r.manual_sha256 WHERE m.file = ? AND r.code = ?",
                (file, code),
            ).fetchone()
        return page, json.loads(boxes)


def scanned_fault_manual(path: Path) -> None:
    """A fault section whose second page is a scan (an image, no text layer) of another entry."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for y, size, line in [
        (90, 16, "3 Fault procedures"),
        (120, 12, "Fault code: E501 - Pump pressure lost"),
        (146, 10, "Cause: The pump coupling slips or the relief valve is open."),
        (168, 10, "Remedy:"),
        (190, 10, "1. Check the pump coupling for wear."),
    ]:
        page.insert_text((60, y), line, fontsize=size)
    sheet = pymupdf.open().new_page(width=595, height=842)
    for y, size, line in SCAN_LINES:
        sheet.insert_text((60, y), line, fontsize=size)
    scan = doc.new_page(width=595, height=842)
    scan.insert_image(scan.rect, pixmap=sheet.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY))
    doc.save(path)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    root = tmp_path_factory.mktemp("page-images")
    folder = root / "manuals"
    folder.mkdir()
    manuals = demo_manuals()
    render_pdf(manuals[HYDRA], folder / HYDRA)
    render_pdf(manuals["meridian_vmc850_v2.1_en.pdf"], root / "upright.pdf")
    with pymupdf.open(root / "upright.pdf") as doc:
        doc[1].set_rotation(90)
        doc.save(folder / TURNED)
    scanned_fault_manual(folder / SCANNED)
    embedder = Embedder()
    report = build_index([folder], root / "manuals.sqlite", embedder=embedder)
    assert [m.status for m in report.manuals] == ["indexed"] * 3
    return Library(folder, root / "manuals.sqlite", embedder)


@contextlib.contextmanager
def serve(index: Path, state: Path) -> Iterator[httpx.Client]:
    """The service with `index` as its manual index (its page cache beside it, in `state`), and a client
    with a technician token."""
    with run_service(state, index) as running, running.client() as client:
        yield client


@pytest.fixture(scope="module")
def client(library: Library, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with serve(library.index, tmp_path_factory.mktemp("page-service")) as client:
        yield client


def pixels(png: bytes) -> np.ndarray:
    pixmap = pymupdf.Pixmap(png)
    return np.frombuffer(pixmap.samples, dtype=np.uint8).reshape(pixmap.height, pixmap.width, pixmap.n)


def changed(highlighted: bytes, plain: bytes) -> tuple[float, float, float, float] | None:
    """Where two renders of a page differ, as fractions of the image: (x0, y0, x1, y1)."""
    a, b = pixels(highlighted), pixels(plain)
    assert a.shape == b.shape
    ys, xs = np.nonzero((a != b).any(axis=2))
    if not len(xs):
        return None
    height, width = a.shape[:2]
    return xs.min() / width, ys.min() / height, (xs.max() + 1) / width, (ys.max() + 1) / height


def inside(rect: pymupdf.Rect, boxes: list[list[float]], slack: float = 1.0) -> bool:
    return any(pymupdf.Rect(x0 - slack, y0 - slack, x1 + slack, y1 + slack).contains(rect) for x0, y0, x1, y1 in boxes)


# -- boxes at index time -------------------------------------------------------------------------


def test_every_entry_is_boxed_where_its_code_is_printed_on_its_page(library):
    with sqlite3.connect(library.index) as conn:
        rows = conn.execute(
            "SELECT r.code, r.page, r.boxes, r.source FROM records r JOIN manuals m ON "
            "m.sha256 = r.manual_sha256 WHERE m.file = ? AND r.kind = 'entry'",
            (HYDRA,),
        ).fetchall()
    assert {source for *_, source in rows} == {"table", "text"}
    missed = []
    with pymupdf.open(library.folder / HYDRA) as doc:
        for code, page, boxes, _ in rows:
            on_page = [box[1:] for box in json.loads(boxes) if box[0] == page]
            if not any(inside(found, on_page) for found in doc[page - 1].search_for(code)):
                missed.append(code)
    assert len(rows) >= 10 and missed == []


def test_an_entry_read_by_ocr_is_boxed_by_tesseracts_lines(library):
    page, boxes = library.entry(SCANNED, "E502")
    assert page == 2 and len(boxes) == len(SCAN_LINES)
    for (number, x0, y0, _x1, y1), (baseline, size, _) in zip(boxes, SCAN_LINES):
        assert number == 2 and 55 <= x0 <= 65 and baseline - size - 2 <= y0 < y1 <= baseline + 4


def test_an_index_from_before_boxes_serves_pages_unhighlighted_and_a_rebuild_adds_them(library, tmp_path):
    old = tmp_path / "old.sqlite"
    shutil.copy(library.index, old)
    with sqlite3.connect(old) as conn:
        conn.execute("ALTER TABLE records DROP COLUMN boxes")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")
    images = PageImages(old, tmp_path / "cache")
    manual = library.manual_id(HYDRA)
    assert images.locate(manual, 2, "E102").key == images.locate(manual, 2).key  # no highlight, same image
    assert pymupdf.Pixmap(images.render_page(manual, 2, "E102").read_bytes()).width == 1400
    assert ManualIndex(old, embedder=library.embedder).lookup("E102").hits  # search reads it as before

    report = build_index([library.folder / HYDRA], old, embedder=library.embedder)
    assert [m.status for m in report.manuals] == ["indexed"]  # not copied over from the old schema
    assert images.locate(manual, 2, "E102").key != images.locate(manual, 2).key


# -- rendering -----------------------------------------------------------------------------------


def test_a_sideways_page_is_highlighted_where_the_entry_shows(library, tmp_path):
    """/Rotate 90 shows the page turned clockwise: a point (x, y) of the upright A4 page is shown at
    (842 - y, x) on the turned one. The highlight must turn with the page."""
    images = PageImages(library.index, tmp_path / "cache")
    manual = library.manual_id(TURNED)
    page, boxes = library.entry(TURNED, "6065")  # its heading and its text, in upright coordinates
    assert page == 2 and {box[0] for box in boxes} == {2}
    bx0, by0 = min(box[1] for box in boxes), min(box[2] for box in boxes)
    bx1, by1 = max(box[3] for box in boxes), max(box[4] for box in boxes)
    tx0, ty0, tx1, ty1 = changed(
        images.render_page(manual, 2, "6065").read_bytes(), images.render_page(manual, 2).read_bytes()
    )
    assert ty1 - ty0 > tx1 - tx0  # text across the upright page runs down the turned one
    assert (tx1, ty0, ty1) == pytest.approx(((842 - by0) / 842, bx0 / 595, bx1 / 595), abs=0.01)
    assert tx0 == pytest.approx((842 - by1) / 842, abs=0.03)  # the margin bar sits left of the row


def test_an_ocr_entry_is_highlighted_on_the_scanned_page(library, tmp_path):
    images = PageImages(library.index, tmp_path / "cache")
    manual = library.manual_id(SCANNED)
    area = changed(images.render_page(manual, 2, "E502").read_bytes(), images.render_page(manual, 2).read_bytes())
    assert area is not None
    _, y0, _, y1 = area
    assert (SCAN_LINES[0][0] - 20) / 842 <= y0 and y1 <= (SCAN_LINES[-1][0] + 10) / 842


def test_concurrent_renders_of_one_page_leave_one_whole_image(library, tmp_path):
    images = PageImages(library.index, tmp_path / "cache")
    manual = library.manual_id(HYDRA)
    results: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: results.append(images.render_page(manual, 1, "E103").read_bytes()))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and len(set(results)) == 1 and pymupdf.Pixmap(results[0]).width == 1400
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".png"]  # no temporary file left behind


def test_requests_for_a_page_being_rendered_share_its_render(library, tmp_path):
    images = PageImages(library.index, tmp_path / "cache")
    ref = images.locate(library.manual_id(HYDRA), 2, "E102")
    first = images.render_later(ref)
    assert images.render_later(ref) is first  # a render takes tens of ms: the second asks while it runs
    path = first.result(timeout=60)
    assert images.cached(ref) == path and pymupdf.Pixmap(path.read_bytes()).width == 1400
    assert images.render_later(ref).result(timeout=60) == path  # done: a new request finds it in the cache


def test_the_cache_keeps_to_its_bound_dropping_the_least_recently_served(library, tmp_path):
    manual = library.manual_id(HYDRA)
    sizes = [PageImages(library.index, tmp_path / "sizes").render_page(manual, n).stat().st_size for n in (1, 2, 3)]
    images = PageImages(library.index, tmp_path / "cache", max_cache_bytes=sum(sizes) - 1)
    first, second = images.render_page(manual, 1), images.render_page(manual, 2)
    assert images.render_page(manual, 1) == first  # served again: now the most recent
    third = images.render_page(manual, 3)
    assert first.exists() and third.exists() and not second.exists()
    assert sum(p.stat().st_size for p in (tmp_path / "cache").iterdir()) <= sum(sizes) - 1


# -- the route -----------------------------------------------------------------------------------


def test_a_cited_entry_opens_its_page_with_the_entry_highlighted(library, client):
    tool = ManualSearchTool(library.index, load_config(env={}).devices, None)
    registry = ToolRegistry([tool])
    try:
        obs = registry.call(
            tool.name,
            {"fault_code": "E103", "device_id": "press-3"},
            ToolContext(request_id="r1", run_id="run1", loop_step=1),
            "obs-1",
        )
    finally:
        registry.close()
    ref = obs.content[0].fields
    assert obs.dropped_fields == [] and ref["manual_id"] == library.manual_id(HYDRA)

    url = f"/v1/manuals/{ref['manual_id']}/pages/{ref['page']}.png"
    highlighted = client.get(url, params={"entry": ref["fault_code"]})
    plain = client.get(url)
    assert highlighted.status_code == plain.status_code == 200
    assert highlighted.headers["content-type"] == "image/png"
    assert highlighted.headers["cache-control"].startswith("private") and highlighted.headers["etag"]
    assert highlighted.headers["etag"] != plain.headers["etag"]
    _page, boxes = library.entry(HYDRA, "E103")
    ((_, _bx0, by0, bx1, by1),) = boxes  # one table row
    _x0, y0, x1, y1 = changed(highlighted.content, plain.content)
    assert (y0, y1) == pytest.approx((by0 / 842, by1 / 842), abs=0.01) and x1 == pytest.approx(bx1 / 595, abs=0.01)


def test_a_repeated_request_is_served_from_the_cache_and_a_current_copy_gets_304(library, client):
    url = f"/v1/manuals/{library.manual_id(HYDRA)}/pages/2.png"
    first = client.get(url, params={"entry": "E102"})
    again = client.get(url, params={"entry": "E102"})
    assert (
        again.status_code == 200 and again.content == first.content and again.headers["etag"] == first.headers["etag"]
    )
    current = client.get(url, params={"entry": "E102"}, headers={"If-None-Match": first.headers["etag"]})
    assert current.status_code == 304 and current.content == b"" and current.headers["etag"] == first.headers["etag"]
    stale = client.get(url, params={"entry": "E102"}, headers={"If-None-Match": '"something-else"'})
    assert stale.status_code == 200 and stale.content == first.content


def test_a_burst_of_uncached_pages_takes_a_few_threads_not_one_a_request(library, tmp_path):
    """The service in this process: the threads it serves pages with (AnyIO's workers, the page pools) are
    counted while 32 requests for uncached pages arrive at once, from one thread of the test's own."""
    asked = [(HYDRA, 1, "E103"), (HYDRA, 2, "E102"), (HYDRA, 3, None), (HYDRA, 1, None)]
    asked += [(TURNED, 2, "6065"), (TURNED, 1, None), (SCANNED, 2, "E502"), (SCANNED, 1, None)]
    pages = [(library.manual_id(file), page, entry) for file, page, entry in asked]

    def serving() -> int:
        return sum(t.name.startswith(("AnyIO worker", "page-")) for t in threading.enumerate())

    async def burst(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TECHNICIAN_TOKEN}"}) as c:
            return await asyncio.gather(
                *[
                    c.get(f"/v1/manuals/{manual}/pages/{page}.png", params={"entry": entry} if entry else None)
                    for manual, page, entry in pages * 4
                ]
            )

    with run_service(tmp_path / "service", library.index) as running:
        before, peak, stop = serving(), [0], threading.Event()

        def sample() -> None:
            while not stop.wait(0.002):
                peak[0] = max(peak[0], serving())

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            responses = asyncio.run(burst(running.url))
        finally:
            stop.set()
            sampler.join()
    assert [r.status_code for r in responses] == [200] * len(pages) * 4
    for n in range(len(pages)):
        assert len({r.content for r in responses[n :: len(pages)]}) == 1  # one image per page
    assert peak[0] - before <= RENDER_WORKERS + 4, (before, peak[0])  # the render pool and the page reads


def test_page_images_need_a_technician_token(library, client):
    url = f"{client.base_url}/v1/manuals/{library.manual_id(HYDRA)}/pages/1.png"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer guessed"}).status_code == 401


def test_unknown_manuals_pages_and_entries_are_404_and_malformed_requests_422(library, client):
    manual = library.manual_id(HYDRA)
    unknown = client.get(f"/v1/manuals/{'0' * 64}/pages/1.png")
    assert unknown.status_code == 404 and "no manual" in unknown.json()["detail"]
    beyond = client.get(f"/v1/manuals/{manual}/pages/99.png")
    assert beyond.status_code == 404 and f"{HYDRA} has no page 99 (it has 3)" in beyond.json()["detail"]
    entry = client.get(f"/v1/manuals/{manual}/pages/1.png", params={"entry": "E999"})
    assert entry.status_code == 404 and "no entry 'E999'" in entry.json()["detail"]
    for path in (
        f"/v1/manuals/{HYDRA}/pages/1.png",
        f"/v1/manuals/{manual.upper()}/pages/1.png",
        f"/v1/manuals/{manual}/pages/0.png",
        f"/v1/manuals/{manual}/pages/one.png",
    ):
        assert client.get(path).status_code == 422, path
    assert client.get(f"/v1/manuals/{manual}/pages/1.png", params={"entry": ""}).status_code == 422
    assert client.get(f"/v1/manuals/{manual}/pages/1.png", params={"path": "/etc/passwd"}).status_code == 422
    assert client.get("/v1/manuals/..%2F..%2Fetc%2Fpasswd/pages/1.png").status_code in (404, 422)


@pytest.fixture
def own_manual(library: Library, tmp_path: Path) -> tuple[Path, Path]:
    """A manual indexed on its own, for tests that change or remove its PDF."""
    folder = tmp_path / "manuals"
    folder.mkdir()
    shutil.copy(library.folder / HYDRA, folder / HYDRA)
    build_index([folder], tmp_path / "own.sqlite", embedder=library.embedder)
    return folder / HYDRA, tmp_path / "own.sqlite"


def test_a_pdf_changed_or_removed_since_indexing_is_409_but_a_touched_one_is_served(library, own_manual, tmp_path):
    pdf, index = own_manual
    url = f"/v1/manuals/{library.manual_id(HYDRA, index)}/pages/2.png"
    with serve(index, tmp_path / "service") as client:
        served = client.get(url, params={"entry": "E102"})
        assert served.status_code == 200
        os.utime(pdf, (1_000_000_000, 1_000_000_000))  # copied or touched: same content, other mtime
        assert client.get(url, params={"entry": "E102"}).content == served.content
        pdf.write_bytes(pdf.read_bytes() + b"\n%% a new revision\n")
        changed_pdf = client.get(url, params={"entry": "E102"})
        assert changed_pdf.status_code == 409 and "changed since it was indexed" in changed_pdf.json()["detail"]
        pdf.unlink()
        missing = client.get(url)
        assert missing.status_code == 409 and "no longer where it was indexed" in missing.json()["detail"]
        assert str(pdf.parent) not in missing.text  # the server's folders are none of the tablet's business


def test_a_manual_reindexed_with_new_content_gets_a_new_id_and_new_images(library, own_manual, tmp_path):
    pdf, index = own_manual
    before = library.manual_id(HYDRA, index)
    images = PageImages(index, tmp_path / "cache")
    old_image = images.render_page(before, 2, "E102")
    pdf.write_bytes(pdf.read_bytes() + b"\n%% a new revision\n")
    build_index([pdf], index, embedder=library.embedder)
    after = library.manual_id(HYDRA, index)
    new_image = images.render_page(after, 2, "E102")
    assert after != before and new_image.name.startswith(after[:16]) and old_image.name.startswith(before[:16])
    with serve(index, tmp_path / "service") as client:
        assert client.get(f"/v1/manuals/{before}/pages/2.png").status_code == 404
        assert client.get(f"/v1/manuals/{after}/pages/2.png").status_code == 200


def test_without_a_manual_index_page_images_are_503_naming_the_command_that_builds_one(library, tmp_path):
    with run_service(tmp_path / "service", library.index) as running, running.client() as client:
        index = running.config.state_path(running.config.knowledge.index_file)
        index.rename(index.with_name("elsewhere.sqlite"))
        response = client.get(f"/v1/manuals/{library.manual_id(HYDRA)}/pages/1.png")
    assert response.status_code == 503 and "fixloop index build" in response.json()["detail"]
