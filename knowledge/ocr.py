"""OCR for scanned manual pages: which pages need it, and Tesseract (Debian's CLI) to read them.

A page is OCR'd when it shows images and its text layer is empty or garbage. Each page is
rendered with PyMuPDF to a grayscale PNG and read by one single-threaded `tesseract` process
per core: on a small edge box that is several times faster than Tesseract's own threading.

Each page is read twice at most: first quickly (English alone, 200 dpi, plain automatic layout),
and again carefully (the manual's languages, 300 dpi, orientation detection) only when the quick
read is unsure of its words, as it is on Chinese text, pages scanned upside down and drawings.
On English scans the quick read costs 1.4-2.1x less CPU than the careful one and reads as well;
over all the scanned pages of the development corpus OCR runs 1.4x faster (scripts/bench_ocr.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

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
CELL_SEGMENTATION = "6"  # a table cell: one block of text, its lines in order
INSTALL_HINT = "install the Debian packages tesseract-ocr tesseract-ocr-chi-sim, or run `make test` / `make demo`"

# A running header and a page number come to ~20-40 letters; a page with less says nothing.
MIN_WORD_CHARS = 40
# On the development corpus good text layers have >= 72% of their characters in words,
# the garbage of an old OCR layer over drawings <= 45%.
MIN_WORD_SHARE = 0.5
# A logo in the page header covers ~0.2% of the page; text set as images, 2% and more.
MIN_IMAGE_COVERAGE = 0.01
# Dot leaders of a contents page and rules of a form are layout, neither word nor garbage.
_LEADERS = re.compile(r"([.·…_\-])(?:\s*\1){2,}")
_CODE_HEAD = re.compile(r"[A-Za-z]{1,4}-?\d*")
_CODE_TAIL = re.compile(r"-?\d+")


class OcrError(Exception):
    """OCR could not run or failed on a page; the message names the page and the reason."""


OcrWord = tuple[str, tuple[float, float, float, float]]  # a word and its bbox in PDF points


@dataclass(frozen=True)
class OcrPage:
    text: str  # lines joined by "\n", paragraphs by a blank line
    confidence: float  # mean word confidence, 0..1; 0 when no words were found
    lines: list[tuple[str, tuple[float, float, float, float]]]  # bbox in PDF points, as page.get_text()
    words: list[OcrWord] = field(default_factory=list)  # the same, word by word


def ocr_available() -> bool:
    """Whether `tesseract` and the traineddata for LANGUAGES are installed."""
    return shutil.which("tesseract") is not None and not _missing_languages(LANGUAGES)


def shows_images(page: pymupdf.Page) -> bool:
    """Whether images cover enough of the page to hold content (not just a logo)."""
    area = page.rect * page.derotation_matrix  # image boxes are in unrotated coordinates
    covered = sum((pymupdf.Rect(info["bbox"]) & area).get_area() for info in page.get_image_info())
    return bool(covered >= MIN_IMAGE_COVERAGE * area.get_area())  # PyMuPDF's areas are untyped


def needs_ocr(text: str, has_images: bool) -> bool:
    """Whether a page that shows images has no usable text layer: almost no words, or mostly
    tokens that are no words (OCR debris, private-use glyphs, U+FFFD, symbol strings)."""
    if not has_images:
        return False
    tokens = _LEADERS.sub(" ", text).split()
    word_chars = sum(_word_chars(token) for token in tokens)
    return word_chars < MIN_WORD_CHARS or word_chars < MIN_WORD_SHARE * sum(map(len, tokens))


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


def ocr_pages(
    pdf_path: Path, numbers: list[int], languages: str = LANGUAGES, dpi: int = 300, quick_dpi: int | None = QUICK_DPI
) -> dict[int, OcrPage]:
    """OCR the given 1-based pages of a PDF, one tesseract process per core. A page is read
    quickly first when `languages` include English (`quick_dpi=None`: never), and read again
    in `languages` at `dpi` with orientation detection when the quick read is unsure."""
    if not numbers:
        return {}
    which = f"{pdf_path.name}: cannot OCR page {numbers[0]}" + (
        f" and {len(numbers) - 1} more" if len(numbers) > 1 else ""
    )
    if shutil.which("tesseract") is None:
        raise OcrError(f"{which}: tesseract is not on PATH; {INSTALL_HINT}")
    missing = _missing_languages(languages)
    if missing:
        raise OcrError(f"{which}: no tesseract data for {', '.join(missing)}; {INSTALL_HINT}")
    careful = (languages, PAGE_SEGMENTATION, dpi)
    quick = (
        (QUICK_LANGUAGE, QUICK_SEGMENTATION, quick_dpi)
        if quick_dpi and QUICK_LANGUAGE in languages.split("+")
        else None
    )
    with pymupdf.open(pdf_path) as doc, tempfile.TemporaryDirectory(prefix="fixloop-ocr-") as tmp:
        bad = [n for n in numbers if not 1 <= n <= doc.page_count]
        if bad:
            raise OcrError(f"{pdf_path.name}: no page {bad[0]} (the PDF has {doc.page_count})")
        pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)

        def submit(number: int, how: tuple[str, str, int]) -> Future[OcrPage]:
            # Render in this thread (a PyMuPDF document is not thread-safe) while earlier pages are read.
            page = doc[number - 1]
            png = Path(tmp) / f"page-{number}-{how[2]}.png"
            try:
                page.get_pixmap(dpi=how[2], colorspace=pymupdf.csGRAY, alpha=False).save(png)
            except (RuntimeError, pymupdf.mupdf.FzErrorBase) as exc:
                raise OcrError(f"page {number}: cannot render it ({exc})") from None
            to_points = pymupdf.Matrix(72 / how[2], 72 / how[2]) * page.derotation_matrix
            return pool.submit(_read, png, number, how, to_points)

        try:
            first = {number: submit(number, quick or careful) for number in dict.fromkeys(numbers)}
            pages: dict[int, OcrPage] = {}
            again: dict[int, Future[OcrPage]] = {}
            for number, future in first.items():
                pages[number] = future.result()
                if quick and pages[number].confidence < MIN_QUICK_CONFIDENCE:
                    again[number] = submit(number, careful)
            pages.update((number, future.result()) for number, future in again.items())
            return pages
        except OcrError as exc:
            raise OcrError(f"{pdf_path.name}: {exc}") from None
        finally:
            pool.shutdown(cancel_futures=True)


def ocr_cells(images: list[Path], languages: str, dpi: int) -> list[str]:
    """The text of each image (a table cell), read as one block of text. The cells go to one
    tesseract process per core as a list file: loading the models once per process, not per
    cell, is what makes a page of a hundred cells cost about as much as the page itself."""
    if not images:
        return []
    workers = min(os.cpu_count() or 1, len(images))
    chunks = [images[n::workers] for n in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        read = list(pool.map(lambda chunk: _read_list(chunk, languages, dpi), chunks))
    texts: dict[Path, str] = {}
    for chunk, found in zip(chunks, read):
        texts.update(zip(chunk, found))
    return [texts[image] for image in images]


def _read_list(images: list[Path], languages: str, dpi: int) -> list[str]:
    listing = images[0].with_suffix(".list")
    listing.write_text("".join(f"{image}\n" for image in images), encoding="utf-8")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    command = ["tesseract", str(listing), "stdout", "-l", languages, "--psm", CELL_SEGMENTATION, "--dpi", str(dpi)]
    command += ["-c", "tessedit_char_blacklist=£€|", "tsv"]  # | is a rule the cell's crop kept an edge of
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=PAGE_TIMEOUT_S * max(1, len(images) // 20)
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OcrError(f"table cells: tesseract did not run ({exc})") from None
    if done.returncode != 0:
        raise OcrError(f"table cells: tesseract failed: {done.stderr.strip()[-200:]}")
    lines: list[dict[tuple[str, str, str], list[str]]] = [{} for _ in images]
    for row in done.stdout.splitlines()[1:]:
        fields = row.split("\t", 11)
        if len(fields) < 12 or fields[0] != "5" or not fields[11].strip():
            continue
        image = int(fields[1]) - 1
        if 0 <= image < len(images):
            lines[image].setdefault((fields[2], fields[3], fields[4]), []).append(fields[11].strip())
    return ["\n".join(_join(words) for words in cell.values()) for cell in lines]


def _missing_languages(languages: str) -> list[str]:
    try:
        listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return languages.split("+")
    installed = set(listed.stdout.split()[1:])  # after the "List of available languages in ..." header
    return [lang for lang in languages.split("+") if lang not in installed]


def _read(png: Path, number: int, how: tuple[str, str, int], to_points: pymupdf.Matrix) -> OcrPage:
    """One page image read by tesseract with (languages, page segmentation mode, dpi); the image is removed."""
    languages, segmentation, dpi = how
    # One thread per process: N single-threaded processes beat OpenMP's threads ~7x on the edge box.
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    command = [
        "tesseract",
        str(png),
        "stdout",
        "-l",
        languages,
        "--psm",
        segmentation,
        "--dpi",
        str(dpi),
        "-c",
        "tessedit_char_blacklist=£€",  # what it reads for the E of "E102"; manuals quote no prices
        "tsv",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=PAGE_TIMEOUT_S)
        png.unlink(missing_ok=True)
    except subprocess.TimeoutExpired:
        raise OcrError(f"page {number}: tesseract took longer than {PAGE_TIMEOUT_S} s") from None
    except OSError as exc:
        raise OcrError(f"page {number}: cannot run tesseract ({exc.strerror or exc}); {INSTALL_HINT}") from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
        raise OcrError(f"page {number}: tesseract failed: {reason}")
    return _parse_tsv(done.stdout, to_points)


def _parse_tsv(tsv: str, to_points: pymupdf.Matrix) -> OcrPage:
    """Words of Tesseract's TSV (level 5 rows) grouped into lines and paragraphs."""
    paragraphs: dict[tuple[str, str], dict[str, list[tuple[str, pymupdf.Rect]]]] = {}
    confidences = []
    for row in tsv.splitlines()[1:]:
        fields = row.split("\t", 11)
        if len(fields) < 12 or fields[0] != "5" or not fields[11].strip():
            continue
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
