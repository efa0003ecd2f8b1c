"""OCR for scanned manual pages: which pages need it, and Tesseract to read them.

A page is OCR'd when its text layer does not hold the words it shows: it shows images (a scan) and its
layer is empty or garbage, its lettering is drawn as vector outlines (no text layer at all), or its layer is
glyphs that map to no text (private-use code points, U+FFFD, symbol strings). Each page is
rendered with PyMuPDF to grayscale pixels and read by Tesseract in this process (tesserocr's
Tesseract 5.5, with Debian's traineddata), one page per core at a time: a model is loaded once
per core and kept, not once per page by a `tesseract` process, and Tesseract 5.5 reads a page
with about 1.3x less CPU than Debian's 5.3 CLI (docs/manual-search.md).

Each page is read twice at most: first quickly (English alone, 200 dpi, plain automatic layout),
and again carefully (the manual's languages, 300 dpi, orientation detection) only when the quick
read is unsure of its words, as it is on Chinese text, pages scanned upside down and drawings.
On English scans the quick read costs 1.4-2.1x less CPU than the careful one and reads as well;
over all the scanned pages of the development corpus OCR runs 1.4x faster (scripts/bench_ocr.py).
"""

from __future__ import annotations

import os
import queue
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pymupdf
import tesserocr

LANGUAGES = "eng+chi_sim"
PAGE_TIMEOUT_S = 60
# The careful read. Automatic layout with orientation detection: reads landscape pages scanned
# sideways or upside down; on upright pages it reads as well as plain automatic layout ("3").
PAGE_SEGMENTATION = "1"
# The quick read: English alone (Tesseract runs a second model over every word it is unsure
# of, and no stray CJK is read from dashes), at 200 dpi, without orientation detection.
QUICK_LANGUAGE = "eng"
QUICK_SEGMENTATION = "3"
QUICK_DPI = 200
# A quick read is kept when its words' mean confidence reaches this. On the development corpus
# English pages read upright score 0.69-0.96; Chinese pages read as English, pages scanned
# upside down and drawings 0.24-0.53 (a drawing and a Chinese page full of Latin codes, 0.63).
MIN_QUICK_CONFIDENCE = 0.65
# Where a gutter between two columns (or two printed pages set side by side) is looked for, in the middle share
# of a page's width, by OCR and by the text layer's reading order (pdf._reading_order) alike.
# Two printed pages scanned side by side, or two columns, are read a side at a time (`_sides`): read whole,
# Tesseract joined Chinese lines of the two across a gutter of 0.35 inch, and `_join` glued their characters
# into one run ('待油' + '清单').
GUTTER_ZONE = (0.3, 0.7)
MIN_GUTTER = 0.01  # of the page's width: a space between words is half that, a column's gutter 2-4%
MIN_SIDE_INK = 0.15  # of the page's dark pixels on each side, as pdf._reading_order asks of characters
DARK = 128  # a grayscale pixel this dark or darker is ink
MAX_SPECKS = 0.001  # of a pixel column that may be dark (specks of a scan) in a gutter
# Latin debris in a Chinese line (`_reread_debris`): words of letters read below this confidence (on a 79-dpi
# Chinese scan 45-55 where the line's Chinese read 80-96), one or more in a row, are read again in Chinese alone.
CHINESE = "chi_sim"
DEBRIS_CONFIDENCE = 60.0
LINE_SEGMENTATION = "7"  # a crop of one line
CELL_SEGMENTATION = "6"  # a table cell: one block of text, its lines in order
INSTALL_HINT = "install the Debian packages tesseract-ocr tesseract-ocr-chi-sim, or run `make test` / `make demo`"
# Where Debian's tesseract-ocr-* packages put the traineddata (5.x, then 4.x); TESSDATA_PREFIX, when set,
# is the only place looked in, as for Tesseract itself.
TESSDATA_DIRS = ("/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata", "/usr/share/tessdata")

# A running header and a page number come to ~20-40 letters; a page with less says nothing.
MIN_WORD_CHARS = 40
# On the development corpus good text layers have >= 72% of their characters in words,
# the garbage of an old OCR layer over drawings <= 45%.
MIN_WORD_SHARE = 0.5
# A logo in the page header covers ~0.2% of the page; text set as images, 2% and more.
MIN_IMAGE_COVERAGE = 0.01
# A scan enlarged more than this many times is rendered smoothed (`render`); in blocks of two pixels (150 dpi read
# at 300) it reads as well unsmoothed.
MIN_ENLARGEMENT = 2.0
MIN_SCAN_COVERAGE = 0.5  # a page (or cell) is a scan, whose resolution tells how to render it, when images cover this
# Lettering drawn as vector outlines: a glyph is a filled path of ~4-20 segments no taller than a heading.
# 400 segments is about the 40 characters a page must hold to say anything (MIN_WORD_CHARS); the arrowheads
# and dots of a drawing are a few dozen segments, and its lines are stroked, not filled.
MAX_GLYPH_HEIGHT = 36.0  # points
MIN_OUTLINE_SEGMENTS = 400
# Why a page is read by OCR (`unread_layer`).
SCANNED, OUTLINES, UNUSABLE = "scanned", "outlines", "unusable"
# Dot leaders of a contents page and rules of a form are layout, neither word nor garbage.
_LEADERS = re.compile(r"([.·…_\-])(?:\s*\1){2,}")
_CODE_HEAD = re.compile(r"[A-Za-z]{1,4}-?\d*")
_CODE_TAIL = re.compile(r"-?\d+")


class OcrError(Exception):
    """OCR could not run or failed on a page; the message names the page and the reason."""


class _PageFailed(OcrError):
    """One page could not be read (not rendered, or too slowly); the others can."""


class _PageTimeout(_PageFailed):
    """Tesseract gave up on a page or a cell after PAGE_TIMEOUT_S."""


OcrWord = tuple[str, tuple[float, float, float, float]]  # a word and its bbox in PDF points


@dataclass(frozen=True)
class OcrPage:
    text: str  # lines joined by "\n", paragraphs by a blank line
    confidence: float  # mean word confidence, 0..1; 0 when no words were found
    lines: list[tuple[str, tuple[float, float, float, float]]]  # bbox in PDF points, as page.get_text()
    words: list[OcrWord] = field(default_factory=list)  # the same, word by word


def ocr_available() -> bool:
    """Whether the traineddata for LANGUAGES are installed."""
    return not _missing_languages(LANGUAGES)


def tessdata() -> Path | None:
    """The folder of Tesseract's traineddata: TESSDATA_PREFIX, else the first of Debian's that holds any."""
    if os.environ.get("TESSDATA_PREFIX"):
        return Path(os.environ["TESSDATA_PREFIX"])
    return next((Path(d) for d in TESSDATA_DIRS if any(Path(d).glob("*.traineddata"))), None)


def shows_images(page: pymupdf.Page) -> bool:
    """Whether images cover enough of the page to hold content (not just a logo)."""
    area = page.rect * page.derotation_matrix  # image boxes are in unrotated coordinates
    covered = sum((pymupdf.Rect(info["bbox"]) & area).get_area() for info in page.get_image_info())
    return bool(covered >= MIN_IMAGE_COVERAGE * area.get_area())  # PyMuPDF's areas are untyped


def unread_layer(page: pymupdf.Page, text: str) -> str | None:
    """Why a page must be read by OCR, or None when its text layer (`text`: the page's, between its running
    header and footer) holds its words: SCANNED, it shows images and its layer holds no words; UNUSABLE, its
    layer is glyphs that map to no text; OUTLINES, its lettering is drawn as filled paths. The text is judged
    first, so a page with words enough costs nothing more; a drawing's paths are read only on a page without."""
    words, glyphs = _word_counts(text)
    if words >= MIN_WORD_CHARS and words >= MIN_WORD_SHARE * glyphs:
        return None
    if shows_images(page):
        return SCANNED
    # Tokens enough that are no words (OCR debris, private-use glyphs, U+FFFD, symbol strings): the
    # rendered page shows what the font draws for them.
    if glyphs >= MIN_WORD_CHARS and words < MIN_WORD_SHARE * glyphs:
        return UNUSABLE
    return OUTLINES if outlined(page) else None


def outlined(page: pymupdf.Page) -> bool:
    """Whether a page draws lettering as paths: many segments of filled glyph-sized paths."""
    segments = 0
    for path in page.get_cdrawings():
        if "f" in path["type"] and path["rect"][3] - path["rect"][1] <= MAX_GLYPH_HEIGHT:
            segments += len(path["items"])
            if segments >= MIN_OUTLINE_SEGMENTS:
                return True
    return False


def _word_counts(text: str) -> tuple[int, int]:
    """The characters of a text layer's words, and of all its tokens (dot leaders are neither)."""
    tokens = _LEADERS.sub(" ", text).split()
    return sum(_word_chars(token) for token in tokens), sum(map(len, tokens))


def _word_chars(token: str) -> int:
    # Private-use glyphs and U+FFFD are not alphanumeric; one CJK character is a word.
    letters = sum(c.isalnum() for c in token)
    wordlike = letters >= 2 or any(c.isalnum() and c >= "\u3000" for c in token)
    return letters if wordlike and 2 * letters >= len(token) else 0


def quick_dpi_for(text: str) -> int | None:
    """The quick read's resolution for a manual's scanned pages, judged by its text layer; None (no
    quick read) when that layer is Chinese: its scans are Chinese too, and a quick English read of a
    Chinese page is unsure of its words every time, so the page is read twice."""
    return None if _chinese(text) else QUICK_DPI


def languages_for(text: str) -> str:
    """Tesseract languages for a manual's scanned pages, judged by its text layer: English
    alone when that layer has no Chinese (2.3x faster, and no stray CJK read from dashes)."""
    if sum(c.isalnum() for c in text) < MIN_WORD_CHARS:
        return LANGUAGES  # nothing to judge by
    return LANGUAGES if _chinese(text) else "eng"


def _chinese(text: str) -> bool:
    return sum("\u3400" <= c <= "\u9fff" for c in text) >= 10


@dataclass(frozen=True)
class OcrRun:
    pages: dict[int, OcrPage]  # by 1-based page number
    unread: dict[int, str] = field(default_factory=dict)  # pages OCR could not read, each with why


def ocr_pages(
    pdf_path: Path, numbers: list[int], languages: str = LANGUAGES, dpi: int = 300, quick_dpi: int | None = QUICK_DPI
) -> OcrRun:
    """OCR the given 1-based pages of a PDF, one page per core at a time. A page is read
    quickly first when `languages` include English (`quick_dpi=None`: never), and read again
    in `languages` at `dpi` with orientation detection when the quick read is unsure.

    A page Tesseract gives up on after PAGE_TIMEOUT_S (as under load) is read once more after the
    others; one that fails again, or cannot be rendered, is left unread alone (`OcrRun.unread`) and
    the other pages keep their text. What no page can get past (no traineddata, an engine that does
    not load) raises OcrError."""
    if not numbers:
        return OcrRun({})
    which = f"{pdf_path.name}: cannot OCR page {numbers[0]}" + (
        f" and {len(numbers) - 1} more" if len(numbers) > 1 else ""
    )
    missing = _missing_languages(languages)
    if missing:
        raise OcrError(f"{which}: no tesseract data for {', '.join(missing)} in {tessdata()}; {INSTALL_HINT}")
    careful = (languages, PAGE_SEGMENTATION, dpi)
    quick = (
        (QUICK_LANGUAGE, QUICK_SEGMENTATION, quick_dpi)
        if quick_dpi and QUICK_LANGUAGE in languages.split("+")
        else None
    )
    with pymupdf.open(pdf_path) as doc:
        bad = [n for n in numbers if not 1 <= n <= doc.page_count]
        if bad:
            raise OcrError(f"{pdf_path.name}: no page {bad[0]} (the PDF has {doc.page_count})")
        pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)

        def submit(number: int, how: tuple[str, str, int]) -> Future[OcrPage]:
            # Render in this thread (a PyMuPDF document is not thread-safe) while earlier pages are read.
            page = doc[number - 1]
            try:
                image = render(page, how[2])
            except (RuntimeError, pymupdf.mupdf.FzErrorBase) as exc:
                failed: Future[OcrPage] = Future()
                failed.set_exception(_PageFailed(f"page {number}: cannot render it ({exc})"))
                return failed
            to_points = pymupdf.Matrix(72 / how[2], 72 / how[2]) * page.derotation_matrix
            return pool.submit(_read, image, number, how, to_points)

        def settle(reads: dict[int, tuple[str, str, int]]) -> tuple[dict[int, OcrPage], dict[int, str]]:
            """The pages read, and why the others were not; a page that timed out is read again the
            same way, once, after the rest."""
            futures = {number: submit(number, how) for number, how in reads.items()}
            read: dict[int, OcrPage] = {}
            failed: dict[int, str] = {}
            for number, future in futures.items():
                try:
                    read[number] = future.result()
                except _PageTimeout:
                    futures[number] = submit(number, reads[number])
                except _PageFailed as exc:
                    failed[number] = str(exc)
            for number in reads.keys() - read.keys() - failed.keys():
                try:
                    read[number] = futures[number].result()
                except _PageFailed as exc:
                    failed[number] = f"{exc} (read twice)" if isinstance(exc, _PageTimeout) else str(exc)
            return read, failed

        try:
            pages, unread = settle(dict.fromkeys(numbers, quick or careful))
            # A page the careful read fails keeps its quick read: unsure text beats none.
            unsure = [n for n, page in pages.items() if quick and page.confidence < MIN_QUICK_CONFIDENCE]
            pages.update(settle(dict.fromkeys(unsure, careful))[0])
            return OcrRun(dict(sorted(pages.items())), unread)
        except OcrError as exc:
            raise OcrError(f"{pdf_path.name}: {exc}") from None
        finally:
            pool.shutdown(cancel_futures=True)


def render(page: pymupdf.Page, dpi: int, clip: pymupdf.Rect | None = None) -> np.ndarray:
    """A page (or `clip` of it, in PDF points) as grayscale pixels at `dpi`. MuPDF enlarges a scan of lower
    resolution by repeating its pixels, and Tesseract reads the stair-steps of those blocks as strokes: of pages
    of 9-pt Chinese made as the tests make them, scanned at 70-120 dpi and read at 300, it read 2-7% of some
    (Latin debris instead), and a 72-dpi table's codes `EF1`, `Uv2` not at all. Averaged over a box a little
    wider than one scan pixel (the odd number of pixels next above it: 5 for 79 dpi at 300), the blocks become
    the ramps of a smooth enlargement and those pages read 61-98% alike (docs/manual-search.md)."""
    image = grayscale(page, dpi, clip)
    scan = scan_dpi(page, clip)
    if not scan or dpi <= MIN_ENLARGEMENT * scan:
        return image
    return _box_blur(image, 2 * ((int(dpi / scan) + 1) // 2) + 1)


def grayscale(page: pymupdf.Page, dpi: int, clip: pymupdf.Rect | None = None) -> np.ndarray:
    """A page (or `clip` of it, in PDF points) as MuPDF renders it: grayscale pixels at `dpi`, unsmoothed."""
    pixmap = page.get_pixmap(dpi=dpi, clip=clip, colorspace=pymupdf.csGRAY, alpha=False)
    return np.frombuffer(pixmap.samples, dtype=np.uint8).reshape(pixmap.height, pixmap.stride)[:, : pixmap.width]


def scan_dpi(page: pymupdf.Page, clip: pymupdf.Rect | None = None) -> float | None:
    """The resolution of a scanned page (or of `clip` of it): pixels per inch of the longer side (which a
    quarter turn does not change) of the image that covers most of it; None unless images cover at least half
    of it (a logo's resolution says nothing about lettering drawn beside it)."""
    area = (clip or page.rect) * page.derotation_matrix  # image boxes are in unrotated coordinates
    covering = []
    for info in page.get_image_info():
        box = pymupdf.Rect(info["bbox"])
        if (box & area).get_area() and max(box.width, box.height) > 0:
            dpi = 72 * max(info["width"], info["height"]) / max(box.width, box.height)
            covering.append(((box & area).get_area(), dpi))
    if sum(covered for covered, _ in covering) < MIN_SCAN_COVERAGE * area.get_area():
        return None
    return float(max(covering)[1])


def _box_blur(image: np.ndarray, size: int) -> np.ndarray:
    """The mean of each pixel's `size` x `size` square (edges repeated), by running sums: two passes."""
    half = size // 2
    out = np.pad(image, half, mode="edge").astype(np.int32)
    for axis in (0, 1):
        sums = np.cumsum(out, axis=axis)
        sums = np.concatenate([np.zeros_like(sums.take([0], axis=axis)), sums], axis=axis)
        n = out.shape[axis]
        out = sums.take(range(size, n + 1), axis=axis) - sums.take(range(0, n + 1 - size), axis=axis)
    return (out // (size * size)).astype(np.uint8)


def ocr_cells(
    images: list[np.ndarray], languages: str, dpi: int, segmentation: str = CELL_SEGMENTATION, whitelist: str = ""
) -> list[str]:
    """The text of each image (a table cell: grayscale pixels), read as one block of text (or as
    `segmentation` says), of `whitelist`'s characters alone when given, the cells shared among the cores."""
    if not images:
        return []
    workers = min(os.cpu_count() or 1, len(images))
    chunks = [list(range(n, len(images), workers)) for n in range(workers)]
    texts: list[str] = [""] * len(images)

    def read(chunk: list[int]) -> None:
        with _engine(languages) as engine:
            for n in chunk:
                lines: dict[tuple[str, str, str], list[str]] = {}
                # |: a rule the cell's crop kept an edge of.
                tsv = _recognize(engine, images[n], segmentation, dpi, "£€|", "a table cell", whitelist)
                for fields in _words(tsv):
                    lines.setdefault((fields[2], fields[3], fields[4]), []).append(fields[11].strip())
                texts[n] = "\n".join(_join(words) for words in lines.values())

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(read, chunks))
    return texts


def _missing_languages(languages: str) -> list[str]:
    folder = tessdata()
    return [lang for lang in languages.split("+") if folder is None or not (folder / f"{lang}.traineddata").is_file()]


# Loaded Tesseract engines by (process, traineddata folder, languages), each used by one thread at a time and
# kept for the next page: loading English and Chinese takes longer than reading a small page. A forked worker
# loads its own.
_ENGINES: dict[tuple[int, str, str], queue.SimpleQueue[tesserocr.PyTessBaseAPI]] = {}
_ENGINES_LOCK = threading.Lock()


@contextmanager
def _engine(languages: str) -> Iterator[tesserocr.PyTessBaseAPI]:
    folder = f"{tessdata()}/"
    with _ENGINES_LOCK:
        idle = _ENGINES.setdefault((os.getpid(), folder, languages), queue.SimpleQueue())
    try:
        engine = idle.get_nowait()
    except queue.Empty:
        try:
            engine = tesserocr.PyTessBaseAPI(path=folder, lang=languages)
        except RuntimeError as exc:
            raise OcrError(f"tesseract cannot load {languages} from {folder} ({exc}); {INSTALL_HINT}") from None
    try:
        yield engine
    finally:
        idle.put(engine)


def _recognize(
    engine: tesserocr.PyTessBaseAPI,
    image: np.ndarray,
    segmentation: str,
    dpi: int,
    blacklist: str,
    what: str,
    whitelist: str = "",
) -> str:
    """Tesseract's TSV of a grayscale image; `what`: the image, as an error names it when Tesseract gives up
    after PAGE_TIMEOUT_S."""
    engine.SetPageSegMode(int(segmentation))
    engine.SetVariable("tessedit_char_blacklist", blacklist)
    engine.SetVariable("tessedit_char_whitelist", whitelist)  # set every time: engines are kept and shared
    # tobytes() lays out a cropped view row after row, as a contiguous copy would: one copy, not two.
    engine.SetImageBytes(image.tobytes(), image.shape[1], image.shape[0], 1, image.shape[1])
    engine.SetSourceResolution(dpi)
    if not engine.Recognize(timeout=int(PAGE_TIMEOUT_S * 1000)):
        raise _PageTimeout(f"{what}: tesseract took longer than {PAGE_TIMEOUT_S} s")
    return str(engine.GetTSVText(0))


def _words(tsv: str) -> Iterator[list[str]]:
    """The word rows (level 5, with text) of Tesseract's TSV, each split into its 12 fields."""
    for row in tsv.splitlines():
        fields = row.split("\t", 11)
        if len(fields) == 12 and fields[0] == "5" and fields[11].strip():
            yield fields


def _read(image: np.ndarray, number: int, how: tuple[str, str, int], to_points: pymupdf.Matrix) -> OcrPage:
    """One page's grayscale pixels read by tesseract with (languages, page segmentation mode, dpi), a side at a
    time when a gutter parts it (`_sides`)."""
    languages, segmentation, dpi = how
    rows = []
    with _engine(languages) as engine:
        for side, (x0, x1) in enumerate(_sides(image)):
            # £€: what it reads for the E of "E102"; manuals quote no prices.
            tsv = _recognize(engine, image[:, x0:x1], segmentation, dpi, "£€", f"page {number}")
            for fields in _words(tsv):
                fields[2], fields[6] = f"{side}.{fields[2]}", str(int(fields[6]) + x0)  # its block, its left
                rows.append(fields)
    if CHINESE in languages.split("+"):
        rows = _reread_debris(image, rows, dpi)
    return _parse_tsv(iter(rows), to_points)


def _reread_debris(image: np.ndarray, rows: list[list[str]], dpi: int) -> list[list[str]]:
    """Tesseract's words with each run of Latin debris in a Chinese line read again as Chinese. Read in
    English and Chinese, a stretch of a Chinese line can come out as unsure Latin words ('as RRA' for
    显示屏上会有); read again from its own crop with the Chinese model alone, it is Chinese. The read again
    replaces the run when it holds Chinese and is surer of it."""
    lines: dict[tuple[str, str, str], list[list[str]]] = {}
    for fields in rows:
        lines.setdefault((fields[2], fields[3], fields[4]), []).append(fields)
    runs: list[list[list[str]]] = []
    for words in lines.values():
        if not any(_wide(c) for fields in words for c in fields[11]):
            continue
        run: list[list[str]] = []
        for word in [*words, None]:
            if word is not None and _debris(word):
                run.append(word)
                continue
            if run:
                runs.append(run)
            run = []
    if not runs:
        return rows
    replaced: dict[int, list[str] | None] = {}
    with _engine(CHINESE) as engine:
        for run in runs:
            x0, y0 = min(int(f[6]) for f in run), min(int(f[7]) for f in run)
            x1, y1 = max(int(f[6]) + int(f[8]) for f in run), max(int(f[7]) + int(f[9]) for f in run)
            margin = (y1 - y0) // 4
            crop = image[max(0, y0 - margin) : y1 + margin, max(0, x0 - margin) : x1 + margin]
            words = list(_words(_recognize(engine, crop, LINE_SEGMENTATION, dpi, "£€", "a line")))
            text = _join([w[11].strip() for w in words]) if words else ""
            sure = sum(float(w[10]) for w in words) / len(words) if words else 0.0
            if any(_wide(c) for c in text) and sure > sum(float(f[10]) for f in run) / len(run):
                replaced[id(run[0])] = [*run[0][:6], str(x0), str(y0), str(x1 - x0), str(y1 - y0), str(sure), text]
                replaced.update(dict.fromkeys((id(f) for f in run[1:]), None))
    kept = [replaced.get(id(word), word) for word in rows]
    return [word for word in kept if word is not None]


def _debris(fields: list[str]) -> bool:
    """Whether a word of a Chinese line is Latin debris: letters, no digits (a code, a value), read unsure."""
    text = fields[11].strip()
    return (
        float(fields[10]) < DEBRIS_CONFIDENCE
        and any(c.isalpha() for c in text)
        and not any(_wide(c) or c.isdigit() for c in text)
    )


def _sides(image: np.ndarray) -> list[tuple[int, int]]:
    """The pixel columns of a page's sides: two where a gutter no ink crosses, at least MIN_GUTTER wide, runs
    down the middle of the page with ink enough on both sides (two printed pages scanned side by side, or
    two columns), else the whole width."""
    height, width = image.shape
    dark = (image < DARK).sum(axis=0)
    lo, hi = int(GUTTER_ZONE[0] * width), int(GUTTER_ZONE[1] * width)
    blank = np.concatenate([[False], dark[lo:hi] <= MAX_SPECKS * height, [False]])
    edges = np.flatnonzero(blank[1:] != blank[:-1]).reshape(-1, 2)  # [start, end) of each blank run
    if not len(edges):
        return [(0, width)]
    start, end = max(edges.tolist(), key=lambda run: run[1] - run[0])
    cut = lo + (start + end) // 2
    left, ink = int(dark[:cut].sum()), int(dark.sum())
    if end - start < MIN_GUTTER * width or min(left, ink - left) < MIN_SIDE_INK * ink:
        return [(0, width)]
    return [(0, cut), (cut, width)]


def _parse_tsv(rows: Iterator[list[str]], to_points: pymupdf.Matrix) -> OcrPage:
    """Tesseract's words (`_words`) grouped into lines and paragraphs."""
    paragraphs: dict[tuple[str, str], dict[str, list[tuple[str, pymupdf.Rect]]]] = {}
    confidences = []
    for fields in rows:
        _, _, block, par, line, _, left, top, width, height, conf, word = fields
        x, y, w, h = int(left), int(top), int(width), int(height)
        words = paragraphs.setdefault((block, par), {}).setdefault(line, [])
        words.append((word.strip(), pymupdf.Rect(x, y, x + w, y + h)))
        confidences.append(float(conf))
    lines = []
    texts: list[list[str]] = []
    words_at: list[OcrWord] = []
    for paragraph in paragraphs.values():
        texts.append([])
        for words in paragraph.values():
            box = pymupdf.Rect(words[0][1])
            for _, rect in words[1:]:
                box |= rect
            words_at += [(word, tuple(rect * to_points)) for word, rect in words]
            text = _join([word for word, _ in words])
            texts[-1].append(text)
            lines.append((text, tuple(box * to_points)))
    return OcrPage(
        text="\n\n".join("\n".join(paragraph) for paragraph in texts),
        confidence=sum(confidences) / len(confidences) / 100 if confidences else 0.0,
        lines=lines,
        words=words_at,
    )


def _join(words: list[str]) -> str:
    # Tesseract puts spaces between Chinese words, which the text has none of; and its Chinese
    # model splits codes ("E 10 2", "Err -07"), which must stay whole to be looked up.
    chinese = any(_wide(c) for word in words for c in word)
    out = token = words[0]
    for word in words[1:]:
        glued = (_wide(token[-1]) and _wide(word[0])) or (chinese and _code_pieces(token, word))
        out += word if glued else " " + word
        token = token + word if glued else word
    return out


def _code_pieces(head: str, tail: str) -> bool:
    """Whether `tail` continues the code `head`: digits after a short letter prefix, split short."""
    if not (_CODE_HEAD.fullmatch(head) and _CODE_TAIL.fullmatch(tail)):
        return False
    return len(head) <= 2 or len(tail) <= 2 or head[-1] == "-" or tail[0] == "-"


def _wide(char: str) -> bool:
    return "\u2e80" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef"
