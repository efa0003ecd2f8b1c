"""OCR of scanned manual pages: speed and accuracy per engine, against today's Tesseract settings
(the baseline) measured in the same run.

    OMP_THREAD_LIMIT=1 .venv/bin/python scripts/bench_ocr.py --pdfs devcorpus-pdfs --truth devcorpus-pdfs/ocr_truth
    ... --engines baseline,library,rapidocr --sample 0 --per-page    # fewer engines, truth pages only
    ... --dump /tmp/ocr-out                                          # every engine's text, a file a page
    ... --pdfs devcorpus-pdfs --engines eng200-psm3,library --sample 200 --workers 1   # speed alone, no truth

Engines (--engines, comma-separated):
- baseline: Debian's `tesseract` CLI as knowledge/ingest/ocr.py ran it before the quick read: 300 dpi, --psm 1 (orientation
  detection), the manual's languages (`languages_for` its text layer: eng+chi_sim when it has none);
- tDPI-psmN: the same with other settings (t300-psm3, t250-psm3, t200-psm3, t200-psm1); engDPI-psmN
  reads English alone whatever the page (what a quick read gives without its check);
- library: knowledge.ingest.ocr.ocr_pages as knowledge.ingest.pdf runs it, in-process (tesserocr; no quick read of a manual whose text layer is
  Chinese; library-qDPI: a quick read at DPI for every manual);
- rapidocr: rapidocr_onnxruntime 1.4.x (PP-OCRv4 det/rec models inside the wheel, Chinese and English),
  the page rendered at 200 dpi; its workers refuse network connections, so a download would fail the run.

Truth (--truth DIR, git-ignored: vendor text): PDFSTEM-pN.txt, the page typed by hand one printed line
(or table-cell line) a line, and PDFSTEM-pN.tokens, key tokens (fault codes, fault names, remedy words)
one a line; the PDF is found under --pdfs. A page drawn as text with no images is first rasterised at
200 dpi into an image-only PDF, a scan of it.

Figures:
- pages/s per core = pages / CPU seconds (rendering, tesseract processes, models; not rapidocr's
  one-time model load, printed apart), over the truth pages plus --sample pages a manual that need OCR;
  wall pages/s with --workers processes at once (default: the cores) next to it;
- CER = the edits that turn each truth line into the closest stretch of the page's OCR text, over the
  truth's characters: lines are found anywhere, so reading order across columns and cells does not count;
  noise = the same from the OCR side (each OCR line against the truth): misreadings plus text that is not
  on the page (bleed-through, debris). Whitespace is collapsed, NFKC applied, spaces next to CJK dropped;
- tokens = the share of key tokens found (case-insensitive, whole words).
en and zh split pages by their truth's script. The PDFs are vendor documents: never commit them,
their page images or their text.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["OMP_THREAD_LIMIT"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pymupdf
import tesserocr
from rich.console import Console
from rich.table import Table

from knowledge.ingest import ocr
from knowledge.ingest.ocr import languages_for, ocr_pages, quick_dpi_for, shows_images, unread_layer

DEFAULT_ENGINES = "baseline,t300-psm3,t250-psm3,t200-psm3,eng200-psm3,library,rapidocr"
SCAN_DPI = 200  # a text page made a scan, as the tests make them
RAPIDOCR_DPI = 200  # rapidocr scales a page to at most 2000 px a side anyway
_CJK = re.compile(r"[\u2e80-\u9fff\uff00-\uffef]")
_SPACE_NEXT_TO_CJK = re.compile(
    r"\s+(?=[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef])|(?<=[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef])\s+"
)
_LOOKALIKES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "„": '"', "—": "-", "–": "-", "−": "-", "∼": "~"})


@dataclass(frozen=True)
class Page:
    key: str  # PDFSTEM-pN
    pdf: Path  # the PDF read (a rasterised copy for a text page)
    number: int
    languages: str  # the manual's, as knowledge.ingest.pdf judges them
    truth: list[str] | None = None  # lines
    tokens: list[str] | None = None

    @property
    def chinese(self) -> bool:
        text = "".join(self.truth or [])
        return len(_CJK.findall(text)) >= 0.3 * max(1, len(text.replace(" ", "")))


@dataclass
class Run:
    engine: str
    texts: dict[str, str] = field(default_factory=dict)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    load_s: float = 0.0  # one-time model load (rapidocr), not in cpu_s
    rereads: int | None = None  # the library's careful re-reads


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdfs", type=Path, required=True, help="folder searched for the truth pages' PDFs")
    ap.add_argument(
        "--truth", type=Path, help="folder of PDFSTEM-pN.txt / .tokens files (without: speed alone, every PDF)"
    )
    ap.add_argument("--engines", default=DEFAULT_ENGINES)
    ap.add_argument("--sample", type=int, default=2, help="pages a manual (needing OCR) added for speed only")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--per-page", action="store_true", help="print CER and tokens of every truth page")
    ap.add_argument("--dump", type=Path, help="write each engine's text of each page here")
    args = ap.parse_args()
    console = Console(width=max(Console().width, 150))
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    for name in engines:
        engine_runner(name)  # unknown names fail before anything runs
    if "rapidocr" in engines and importlib.util.find_spec("rapidocr_onnxruntime") is None:
        sys.exit(
            "bench_ocr: the rapidocr engine needs `pip install rapidocr_onnxruntime==1.4.4` (not a project "
            "dependency); or leave it out of --engines"
        )
    with tempfile.TemporaryDirectory(prefix="bench-ocr-") as tmp:
        pages = load_pages(args.pdfs, args.truth, args.sample, Path(tmp))
        truth_pages = [p for p in pages if p.truth is not None]
        console.print(
            f"{len(truth_pages)} truth pages ({sum(p.chinese for p in truth_pages)} Chinese), "
            f"{len(pages) - len(truth_pages)} more for speed; {args.workers} workers; "
            f"tesseract {ocr_version()}, OMP_THREAD_LIMIT=1"
        )
        runs = []
        for name in engines:
            started = time.perf_counter()
            runs.append(engine_runner(name)(pages, args.workers))
            console.print(f"  {name}: {time.perf_counter() - started:.0f} s")
            if args.dump:
                folder = args.dump / name
                folder.mkdir(parents=True, exist_ok=True)
                for key, text in runs[-1].texts.items():
                    (folder / f"{key}.txt").write_text(text, encoding="utf-8")
    report(console, runs, pages, args.workers, args.per_page)
    return 0


# --- pages ---------------------------------------------------------------------------------------------


def load_pages(pdfs: Path, truth: Path | None, sample: int, tmp: Path) -> list[Page]:
    by_stem = {path.stem: path for path in sorted(pdfs.rglob("*.pdf"))}
    wanted: dict[Path, dict[int, tuple[list[str], list[str]]]] = {}
    if truth is None:  # speed alone: the sampled scanned pages of every PDF
        wanted = {path: {} for path in by_stem.values()}
    for path in sorted(truth.glob("*-p*.txt")) if truth else []:
        stem, _, printed = path.stem.rpartition("-p")
        if stem not in by_stem:
            raise SystemExit(f"{path.name}: no {stem}.pdf under {pdfs}")
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        tokens_file = path.with_suffix(".tokens")
        tokens = tokens_file.read_text(encoding="utf-8").splitlines() if tokens_file.exists() else []
        wanted.setdefault(by_stem[stem], {})[int(printed)] = (lines, [t.strip() for t in tokens if t.strip()])
    if not wanted:
        raise SystemExit(f"no truth pages (PDFSTEM-pN.txt) in {truth}")
    pages = []
    for pdf, numbers in wanted.items():
        with pymupdf.open(pdf) as doc:
            languages = languages_for("\n".join(page.get_text() for page in doc))
            for number, (lines, tokens) in sorted(numbers.items()):
                page = doc[number - 1]
                source, at = (
                    (pdf, number) if shows_images(page) else (rasterised(page, tmp / f"{pdf.stem}-p{number}.pdf"), 1)
                )
                pages.append(Page(f"{pdf.stem}-p{number}", source, at, languages, lines, tokens))
            scanned = [p.number + 1 for p in doc if unread_layer(p, p.get_text()) and p.number + 1 not in numbers]
            for number in scanned[:: max(1, -(-len(scanned) // sample))][:sample] if sample else []:
                pages.append(Page(f"{pdf.stem}-p{number}", pdf, number, languages))
    return pages


def rasterised(page: pymupdf.Page, path: Path) -> Path:
    """An image-only PDF of the page: a scan of a text page."""
    pixmap = page.get_pixmap(dpi=SCAN_DPI, colorspace=pymupdf.csGRAY, alpha=False)
    doc = pymupdf.open()
    doc.new_page(width=page.rect.width, height=page.rect.height).insert_image(page.rect, pixmap=pixmap)
    doc.save(path)
    return path


def ocr_version() -> str:
    """Debian's `tesseract` (the CLI engines) and the one knowledge.ingest.ocr runs in-process (the library engines)."""
    done = subprocess.run(["tesseract", "--version"], capture_output=True, text=True)
    cli = (done.stdout or done.stderr).split()[1] if (done.stdout or done.stderr) else "?"
    return f"{cli} (CLI), {tesserocr.tesseract_version().split()[1]} (in-process)"


# --- engines -------------------------------------------------------------------------------------------


def engine_runner(name: str) -> Callable[[list[Page], int], Run]:
    if name == "baseline":
        return lambda pages, workers: run_tesseract(name, pages, workers, 300, "1", manual=True)
    if name == "library" or name.startswith("library-q"):
        quick_dpi = int(name.removeprefix("library-q")) if name != "library" else None
        return lambda pages, workers: run_library(name, pages, quick_dpi)
    if name == "rapidocr":
        return run_rapidocr
    settings = re.fullmatch(r"(t|eng)(\d+)-psm(\d+)", name)
    if settings:
        kind, dpi, psm = settings.groups()
        return lambda pages, workers: run_tesseract(name, pages, workers, int(dpi), psm, manual=kind == "t")
    raise SystemExit(f"unknown engine {name!r}; known: {DEFAULT_ENGINES}, tDPI-psmN, engDPI-psmN, library-qDPI")


def cpu_seconds() -> float:
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def run_tesseract(name: str, pages: list[Page], workers: int, dpi: int, psm: str, manual: bool) -> Run:
    """Render in this thread, one single-threaded Debian `tesseract` process a page per worker (as knowledge.ingest.ocr
    read pages before it ran Tesseract in-process)."""
    run = Run(name)
    cpu, wall = cpu_seconds(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-ocr-") as tmp, ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {}
        for page in pages:
            with pymupdf.open(page.pdf) as doc:
                png = Path(tmp) / f"{page.key}.png"
                pdf_page = doc[page.number - 1]
                pdf_page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False).save(png)
                to_points = pymupdf.Matrix(72 / dpi, 72 / dpi) * pdf_page.derotation_matrix
            how = (page.languages if manual else "eng", psm, dpi)
            futures[page.key] = pool.submit(_tesseract_cli, png, how, to_points)
        run.texts = {key: future.result().text for key, future in futures.items()}
    run.cpu_s, run.wall_s = cpu_seconds() - cpu, time.perf_counter() - wall
    return run


def _tesseract_cli(png: Path, how: tuple[str, str, int], to_points: pymupdf.Matrix) -> ocr.OcrPage:
    languages, psm, dpi = how
    command = ["tesseract", str(png), "stdout", "-l", languages, "--psm", psm, "--dpi", str(dpi)]
    command += ["-c", "tessedit_char_blacklist=£€", "tsv"]
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "OMP_THREAD_LIMIT": "1"}
    )
    return ocr._parse_tsv(ocr._words(done.stdout), to_points)


def run_library(name: str, pages: list[Page], quick_dpi: int | None) -> Run:
    """knowledge.ingest.ocr.ocr_pages a manual at a time, as knowledge.ingest.pdf calls it (its own pool, a page a core);
    `quick_dpi` None: the quick read as knowledge.ingest.pdf chooses it by the manual's text layer."""
    run = Run(name, rereads=0)
    read = ocr._read

    def counted(image: np.ndarray, number: int, how: tuple[str, str, int], to_points: pymupdf.Matrix) -> ocr.OcrPage:
        if how[0] != ocr.QUICK_LANGUAGE or how[1] != ocr.QUICK_SEGMENTATION:
            run.rereads = (run.rereads or 0) + 1
        return read(image, number, how, to_points)

    by_pdf: dict[tuple[Path, str], list[Page]] = {}
    for page in pages:
        by_pdf.setdefault((page.pdf, page.languages), []).append(page)
    ocr._read = counted
    cpu, wall = cpu_seconds(), time.perf_counter()
    try:
        for (pdf, languages), group in by_pdf.items():
            with pymupdf.open(pdf) as doc:
                quick = quick_dpi or quick_dpi_for("\n".join(page.get_text() for page in doc))
            found = ocr_pages(pdf, [p.number for p in group], languages, quick_dpi=quick)
            run.texts.update((p.key, found.pages[p.number].text) for p in group if p.number in found.pages)
    finally:
        ocr._read = read
    run.cpu_s, run.wall_s = cpu_seconds() - cpu, time.perf_counter() - wall
    return run


_RAPID = None
_RAPID_LOAD_S = 0.0


def _rapid_init() -> None:
    """A worker's start: no network from here on, one thread, the models loaded once."""
    import socket

    def refuse(*_: object, **__: object) -> None:
        raise OSError("bench_ocr: rapidocr tried to open a network connection")

    socket.socket.connect = refuse  # type: ignore[method-assign,assignment,unused-ignore]
    socket.create_connection = refuse  # type: ignore[method-assign,assignment,unused-ignore]
    started = time.process_time()
    import cv2
    from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]

    cv2.setNumThreads(1)
    global _RAPID, _RAPID_LOAD_S
    _RAPID = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
    _RAPID_LOAD_S = time.process_time() - started


def _rapid_loaded(_: int) -> float:
    time.sleep(0.5)  # so that every worker takes one of these
    return _RAPID_LOAD_S


def _rapid_page(job: tuple[str, int]) -> tuple[str, float]:
    started = time.process_time()
    with pymupdf.open(job[0]) as doc:
        png = doc[job[1] - 1].get_pixmap(dpi=RAPIDOCR_DPI, colorspace=pymupdf.csRGB, alpha=False).tobytes("png")
    result, _ = _RAPID(png)  # type: ignore[misc]
    return "\n".join(line[1] for line in result or []), time.process_time() - started


def run_rapidocr(pages: list[Page], workers: int) -> Run:
    """One worker process a core, each with the models loaded once and one ONNX Runtime thread."""
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError:
        raise SystemExit(
            "rapidocr: `pip install rapidocr_onnxruntime==1.4.4` into the venv (not a dependency)"
        ) from None
    run = Run("rapidocr")
    with multiprocessing.get_context("spawn").Pool(workers, initializer=_rapid_init) as pool:
        run.load_s = max(pool.map(_rapid_loaded, range(workers), chunksize=1))
        wall = time.perf_counter()
        done = pool.map(_rapid_page, [(str(p.pdf), p.number) for p in pages], chunksize=1)
        run.wall_s = time.perf_counter() - wall
    run.texts = {page.key: text for page, (text, _) in zip(pages, done)}
    run.cpu_s = sum(seconds for _, seconds in done)
    return run


# --- scoring -------------------------------------------------------------------------------------------


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_LOOKALIKES)
    text = re.sub(r"_{2,}", " ", text)
    return _SPACE_NEXT_TO_CJK.sub("", " ".join(text.split()))


def search_distance(pattern: str, text: str) -> int:
    """The fewest edits that turn `pattern` into some stretch of `text` (Myers' bit-vector search)."""
    m = len(pattern)
    if not m:
        return 0
    peq: dict[str, int] = {}
    for i, char in enumerate(pattern):
        peq[char] = peq.get(char, 0) | 1 << i
    mask, high = (1 << m) - 1, 1 << (m - 1)
    pv, mv, score = mask, 0, m
    best = m
    for char in text:
        eq = peq.get(char, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & high:
            score += 1
        elif mh & high:
            score -= 1
        ph = (ph << 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
        best = min(best, score)
    return best


def line_errors(lines: list[str], text: str) -> tuple[int, int]:
    """Edits to find each line in `text`, and the lines' characters."""
    lines = [normalize(line) for line in lines]
    text = normalize(text)
    return sum(search_distance(line, text) for line in lines if line), sum(map(len, lines))


def tokens_found(tokens: list[str], text: str) -> int:
    text = normalize(text).casefold()
    found = 0
    for token in tokens:
        token = normalize(token).casefold()
        head = r"(?<![0-9a-z])" if token[:1].isascii() and token[:1].isalnum() else ""
        tail = r"(?![0-9a-z])" if token[-1:].isascii() and token[-1:].isalnum() else ""
        found += re.search(head + re.escape(token) + tail, text) is not None
    return found


@dataclass
class Score:
    errors: int = 0
    chars: int = 0
    noise: int = 0
    ocr_chars: int = 0
    found: int = 0
    tokens: int = 0

    def add(self, page: Page, text: str) -> Score:
        errors, chars = line_errors(page.truth or [], text)
        noise, ocr_chars = line_errors(text.splitlines(), "\n".join(page.truth or []))
        self.errors, self.chars, self.noise, self.ocr_chars = (
            self.errors + errors,
            self.chars + chars,
            self.noise + noise,
            self.ocr_chars + ocr_chars,
        )
        self.found += tokens_found(page.tokens or [], text)
        self.tokens += len(page.tokens or [])
        return self

    def cer(self) -> str:
        return f"{self.errors / self.chars:.1%}" if self.chars else "-"

    def noise_share(self) -> str:
        return f"{self.noise / self.ocr_chars:.1%}" if self.ocr_chars else "-"

    def token_share(self) -> str:
        return f"{self.found}/{self.tokens} {self.found / self.tokens:.0%}" if self.tokens else "-"


def report(console: Console, runs: list[Run], pages: list[Page], workers: int, per_page: bool) -> None:
    truth_pages = [p for p in pages if p.truth is not None]
    base = next((r for r in runs if r.engine == "baseline"), None)
    table = Table(title=f"OCR: {len(pages)} pages for speed, {len(truth_pages)} truth pages for accuracy")
    for column in ("engine", "CPU s/page", "pages/s/core", "× baseline", f"wall pages/s ({workers} procs)"):
        table.add_column(column, justify="right" if column != "engine" else "left")
    for column in ("CER en", "CER zh", "noise", "tokens en", "tokens zh"):
        table.add_column(column, justify="right")
    for run in runs:
        en = Score()
        zh = Score()
        both = Score()
        for page in truth_pages:
            (zh if page.chinese else en).add(page, run.texts[page.key])
            both.add(page, run.texts[page.key])
        per_core = len(pages) / run.cpu_s if run.cpu_s else 0.0
        ratio = f"{per_core / (len(pages) / base.cpu_s):.2f}" if base and base.cpu_s else "-"
        name = run.engine + (f" ({run.rereads} re-read)" if run.rereads is not None else "")
        name += f" (+{run.load_s:.1f} s load)" if run.load_s else ""
        table.add_row(
            name,
            f"{run.cpu_s / len(pages):.2f}",
            f"{per_core:.2f}",
            ratio,
            f"{len(pages) / run.wall_s:.2f}" if run.wall_s else "-",
            en.cer(),
            zh.cer(),
            both.noise_share(),
            en.token_share(),
            zh.token_share(),
        )
    console.print(table)
    if per_page:
        detail = Table(title="per truth page: CER / tokens found")
        detail.add_column("page")
        for run in runs:
            detail.add_column(run.engine, justify="right")
        for page in truth_pages:
            cells = []
            for run in runs:
                score = Score().add(page, run.texts[page.key])
                cells.append(f"{score.cer()} {score.found}/{score.tokens}")
            detail.add_row(page.key[:40], *cells)
        console.print(detail)


if __name__ == "__main__":
    raise SystemExit(main())
