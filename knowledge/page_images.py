"""Manual pages as PNG images for the tablet, the cited entry highlighted, cached on disk.

    images = PageImages(index_path, cache_dir)
    path = images.render_page(manual_id, 4, entry="E102")

A manual is addressed by its id in the index (the SHA-256 of its PDF), never by a path. The
page is rendered from the PDF the index read, and refused when that file is gone or its content
has changed since. The entry is highlighted where the index recorded it (`records.boxes`, schema
4): blocks of running text, rows of tables, and the lines Tesseract found on OCR'd pages. An index
built before boxes were kept, and a scanned page OCR could not read, give the page without a
highlight.

Images are cached under names made of the manual's content hash, the page and a digest of what
is drawn (size, boxes, style), so a manual re-indexed with other content gets new images. Writes
go to a temporary file renamed into place; the least recently served images leave first once
the cache outgrows its bound.

Memory is bounded under bursts: pages are drawn by one small pool for the whole process
(RENDER_WORKERS threads, each holding one page of pixels), requests for a page being drawn share
its render, and a server awaits `render_later` instead of blocking a thread of its own per request.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import struct
import threading
import time
import uuid
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf

from knowledge.codes import code_key
from knowledge.ingest.extract import ManualError, file_sha256

WIDTH_PX = 1400  # 1.75x a portrait tablet's 800 px: print stays sharp under pinch-zoom
MAX_HEIGHT_PX = 2400  # a long narrow page is fitted to this height instead (rendering time grows with pixels)
MAX_CACHE_BYTES = 256 * 1024 * 1024
PRUNE_TO = 0.9  # of the bound, so that one new image does not prune again at once
STALE_TMP_S = 3600.0  # a temporary file this old was left by a process that died mid-write
# Multiplied into the paper under the entry, channel by channel (a lookup table: 5x as fast as
# float arithmetic): white turns light yellow, black print stays black.
TINT = (np.arange(256)[:, None] * np.array([1.0, 0.93, 0.55])).astype(np.uint8)
MARK = np.array([232, 120, 0], dtype=np.uint8)  # a bar in the margin, to find the entry on a small screen
PAD_PT = 2.0
MARK_PX = (12, 6)  # gap to the entry, bar width
STYLE = "tint-1"  # part of every cache key: a new look must not be served from old images

# PyMuPDF is not thread-safe: one document operation at a time in this process.
_PYMUPDF = threading.Lock()
# Pages drawn at once in this process. Each holds a page of pixels and its PNG (~10 MB at 1400 px);
# the lock above serializes the drawing anyway, so a second worker only overlaps the PNG encoding.
# Fixed, so a burst of requests queues here instead of growing threads and memory with the burst.
RENDER_WORKERS = 2
_RENDERS = ThreadPoolExecutor(max_workers=RENDER_WORKERS, thread_name_prefix="page-render")


class PageImageError(Exception):
    """A page image that cannot be served; the message says why, for the technician."""


class IndexUnavailable(PageImageError):
    """There is no readable manual index."""


class ManualNotFound(PageImageError):
    """No manual of that id in the index (never indexed, or re-indexed with other content since)."""


class PageNotFound(PageImageError):
    """The manual has no such page."""


class EntryNotFound(PageImageError):
    """The manual has no entry for that fault code."""


class SourceUnavailable(PageImageError):
    """The PDF the index read is missing or has changed since: the page cannot be shown as cited."""


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in PDF points of the unrotated page


@dataclass(frozen=True)
class PageRef:
    """A page resolved against the index: what to render, and the cache key that names it."""

    file: str
    pdf: Path
    page: int
    boxes: tuple[Box, ...]
    key: str

    @property
    def etag(self) -> str:
        return f'"{self.key}"'


@dataclass(frozen=True)
class _Manual:
    sha256: str
    file: str
    path: Path
    pages: int
    size: int
    mtime: float


class PageImages:
    def __init__(
        self, index_path: Path, cache_dir: Path, width_px: int = WIDTH_PX, max_cache_bytes: int = MAX_CACHE_BYTES
    ):
        self.index_path = Path(index_path)
        self.cache_dir = Path(cache_dir)
        self.width_px = width_px
        self.max_cache_bytes = max_cache_bytes
        self._lock = threading.Lock()
        self._cache_bytes: int | None = None  # known after the first scan of the cache folder
        # Sources whose stat no longer matches the index but whose content was hashed and found
        # the same (a copy, a touch): path -> (size, mtime_ns, sha256). Hashed once, not per request.
        self._verified: dict[Path, tuple[int, int, str]] = {}
        self._rendering: dict[str, Future[Path]] = {}  # cache key -> its render in the pool

    def render_page(self, manual_id: str, page: int, entry: str | None = None) -> Path:
        """The PNG of a page of an indexed manual, with `entry` (a fault code of that manual) highlighted."""
        return self.render(self.locate(manual_id, page, entry))

    def locate(self, manual_id: str, page: int, entry: str | None = None) -> PageRef:
        """Resolve a request without rendering: errors are raised here, and the key is known for ETags."""
        manual, boxes = self._read_index(manual_id, page, entry)
        self._check_source(manual)
        drawn = json.dumps([manual.sha256, page, self.width_px, boxes, STYLE])
        digest = hashlib.sha256(drawn.encode()).hexdigest()[:24]
        return PageRef(
            file=manual.file,
            pdf=manual.path,
            page=page,
            boxes=tuple(boxes),
            key=f"{manual.sha256[:16]}-p{page}-{digest}",
        )

    def render(self, ref: PageRef) -> Path:
        return self.cached(ref) or self.render_later(ref).result()

    def cached(self, ref: PageRef) -> Path | None:
        """The page's image if it is in the cache (marked as served now), else None."""
        path = self._path(ref)
        try:
            _served(path)
        except FileNotFoundError:
            return None
        return path

    def render_later(self, ref: PageRef) -> Future[Path]:
        """The page's image, drawn in the render pool unless cached meanwhile; concurrent requests for one
        page share one render."""
        with self._lock:
            pending = self._rendering.get(ref.key)
            if pending is None:
                pending = self._rendering[ref.key] = _RENDERS.submit(self._render_once, ref)
        return pending

    def _render_once(self, ref: PageRef) -> Path:
        try:
            path = self.cached(ref)
            if path is None:
                path = self._path(ref)
                self._store(path, self._draw(ref))
            return path
        finally:
            # Stored first: a request arriving once this render is forgotten finds the image in the cache.
            with self._lock:
                del self._rendering[ref.key]

    def _path(self, ref: PageRef) -> Path:
        return self.cache_dir / f"{ref.key}.png"

    # -- the index -----------------------------------------------------------

    def _read_index(self, manual_id: str, page: int, entry: str | None) -> tuple[_Manual, list[Box]]:
        if not self.index_path.is_file():
            raise IndexUnavailable("no manual index has been built yet; an operator must run `fixloop index build`")
        try:
            conn = sqlite3.connect(f"file:{self.index_path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"the manual index cannot be opened ({exc})") from None
        try:
            row = conn.execute(
                "SELECT sha256, file, path, pages, size, mtime FROM manuals WHERE sha256 = ?", (manual_id,)
            ).fetchone()
            if row is None:
                raise ManualNotFound(
                    f"no manual {manual_id!r} in the index (it may have been re-indexed: "
                    "ask the question again for a fresh reference)"
                )
            manual = _Manual(row[0], row[1], Path(row[2]), row[3], row[4], row[5])
            if not 1 <= page <= manual.pages:
                raise PageNotFound(f"{manual.file} has no page {page} (it has {manual.pages})")
            return manual, self._boxes(conn, manual, page, entry) if entry is not None else []
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"the manual index cannot be read ({exc})") from None
        finally:
            conn.close()

    @staticmethod
    def _boxes(conn: sqlite3.Connection, manual: _Manual, page: int, entry: str) -> list[Box]:
        columns = {name for _, name, *_ in conn.execute("PRAGMA table_info(records)")}
        boxes = "boxes" if "boxes" in columns else "'[]'"  # an index built before boxes were kept
        row = conn.execute(
            f"SELECT {boxes} FROM records WHERE manual_sha256 = ? AND kind = 'entry' AND code_key = ?",
            (manual.sha256, code_key(entry)),
        ).fetchone()
        if row is None:
            raise EntryNotFound(f"{manual.file} has no entry {entry!r}")
        return [(x0, y0, x1, y1) for on, x0, y0, x1, y1 in json.loads(row[0] or "[]") if on == page]

    def _check_source(self, manual: _Manual) -> None:
        try:
            stat = manual.path.stat()
        except OSError:
            raise SourceUnavailable(
                f"the PDF of {manual.file} is no longer where it was indexed; an operator must re-index the manuals"
            ) from None
        if (stat.st_size, stat.st_mtime) == (manual.size, manual.mtime):
            return
        seen = (stat.st_size, stat.st_mtime_ns, manual.sha256)
        if self._verified.get(manual.path) == seen:
            return
        try:
            same = file_sha256(manual.path) == manual.sha256
        except ManualError:
            same = False
        if not same:
            raise SourceUnavailable(
                f"{manual.file} has changed since it was indexed; an operator must re-index the manuals"
            )
        self._verified[manual.path] = seen

    # -- drawing -------------------------------------------------------------

    def _draw(self, ref: PageRef) -> bytes:
        return _png(self._pixels(ref))

    def _pixels(self, ref: PageRef) -> np.ndarray:
        """The page rendered and highlighted, as PNG scanlines (RGB rows, each led by its filter byte)."""
        with _PYMUPDF:
            try:
                doc = pymupdf.open(ref.pdf, filetype="pdf")
            except (pymupdf.FileDataError, RuntimeError) as exc:
                raise SourceUnavailable(f"{ref.file} cannot be opened ({exc})") from None
            try:
                page = doc[ref.page - 1]
                zoom = min(self.width_px / page.rect.width, MAX_HEIGHT_PX / page.rect.height)
                matrix = pymupdf.Matrix(zoom, zoom)
                pixmap = page.get_pixmap(matrix=matrix, alpha=False, colorspace=pymupdf.csRGB)
                # Boxes are in the unrotated page's space, the image is of the page as displayed.
                to_pixels = page.rotation_matrix * matrix
                pixels = np.frombuffer(pixmap.samples_mv, dtype=np.uint8).reshape(pixmap.height, pixmap.width, 3)
                # Rect + tuple moves the edges out (not a concatenation, whatever RUF005 thinks).
                _highlight(
                    pixels,
                    [
                        (pymupdf.Rect(box) + (-PAD_PT, -PAD_PT, PAD_PT, PAD_PT)) * to_pixels  # noqa: RUF005
                        for box in ref.boxes
                    ],
                )
                scanlines = np.zeros((pixmap.height, 1 + 3 * pixmap.width), dtype=np.uint8)  # filter 0: none
                scanlines[:, 1:] = pixels.reshape(pixmap.height, -1)
                return scanlines
            finally:
                doc.close()
                # MuPDF keeps decoded fonts and images in its store (up to 256 MB) keyed by the objects of
                # the document they came from; once it is closed nothing can use them again.
                pymupdf.TOOLS.store_shrink(100)

    # -- the cache -----------------------------------------------------------

    def _store(self, path: Path, png: bytes) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with tmp.open("wb") as handle:
                handle.write(png)
                handle.flush()
                os.fsync(handle.fileno())  # renamed before its data is on disk, a crash would leave an empty image
            _served(tmp)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        with self._lock:
            if self._cache_bytes is not None:
                self._cache_bytes += len(png)
            if self._cache_bytes is None or self._cache_bytes > self.max_cache_bytes:
                self._cache_bytes = self._prune(keep=path)

    def _prune(self, keep: Path) -> int:
        """Least recently served first, down to PRUNE_TO of the bound; returns the bytes left."""
        images = []
        now = time.time()
        for entry in os.scandir(self.cache_dir):
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue  # pruned by another process meanwhile
            if entry.name.endswith(".tmp"):
                if now - stat.st_mtime > STALE_TMP_S:
                    Path(entry.path).unlink(missing_ok=True)
            elif entry.name.endswith(".png"):
                images.append((stat.st_mtime_ns, stat.st_size, Path(entry.path)))
        total = sum(size for _, size, _ in images)
        if total <= self.max_cache_bytes:
            return total
        for _, size, image in sorted(images):
            if total <= PRUNE_TO * self.max_cache_bytes:
                break
            if image != keep:
                image.unlink(missing_ok=True)
                total -= size
        return total


def _served(path: Path) -> None:
    """Mark an image as served now: the last to be pruned. The time is set from the fine clock: the
    kernel stamps writes from a coarse one (ms), which would order images served within a tick at random."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def _highlight(pixels: np.ndarray, rects: list[pymupdf.Rect]) -> None:
    """Tint the paper under the rects (their union: overlaps are not tinted twice) and mark the margin."""
    bounds = pymupdf.IRect(0, 0, pixels.shape[1], pixels.shape[0])
    boxes = [box for box in (rect.irect & bounds for rect in rects) if not box.is_empty]
    if not boxes:
        return
    area = pymupdf.IRect(
        min(b.x0 for b in boxes), min(b.y0 for b in boxes), max(b.x1 for b in boxes), max(b.y1 for b in boxes)
    )
    mask = np.zeros((area.height, area.width), dtype=bool)
    for box in boxes:
        mask[box.y0 - area.y0 : box.y1 - area.y0, box.x0 - area.x0 : box.x1 - area.x0] = True
    region = pixels[area.y0 : area.y1, area.x0 : area.x1]
    for channel in range(3):
        values = region[..., channel]
        values[mask] = TINT[values[mask], channel]
    gap, width = MARK_PX
    for box in boxes:
        x1 = box.x0 - gap
        if x1 - width >= 0:
            pixels[box.y0 : box.y1, x1 - width : x1] = MARK


def _png(scanlines: np.ndarray) -> bytes:
    """An RGB PNG deflated at zlib's fastest level: twice as fast as MuPDF's encoder for files about
    10% larger, and zlib lets go of the GIL (and needs no PyMuPDF lock) while it works."""
    height, width = scanlines.shape[0], (scanlines.shape[1] - 1) // 3
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits per channel, RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + b"".join(
        _chunk(kind, data)
        for kind, data in ((b"IHDR", header), (b"IDAT", zlib.compress(scanlines.tobytes(), 1)), (b"IEND", b""))
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
