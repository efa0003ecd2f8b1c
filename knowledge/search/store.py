"""Opening the index file and reading it: every SQL statement and every lock of a search.

The file is opened read-only as a `Snapshot`, reopened when a rebuild has swapped a new file in. A snapshot's
connection serves every thread, one statement at a time under the lock; what searches work out from its rows
(the maps by page and by vector, word counts, the code linker) is kept with it, so a swap starts them afresh.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from knowledge.codes import is_named, scope_key
from knowledge.ingest.safety import read_statements
from knowledge.manual_names import ManualNames
from knowledge.models import SafetyStatement, Scope
from knowledge.onnx_encoder import OnnxEncoder, encoder_path
from knowledge.search.rows import Group, IndexRow, Ranking, entry_pages, in_scope, keeps, page_rows
from knowledge.text import FTS_TOKENIZER

if TYPE_CHECKING:
    from knowledge.code_linker import CodeLinker

# The columns selected are IndexRow's, so each row is one.
_ROWS = (
    "SELECT r.id, r.kind, r.manual_sha256, r.code, r.code_key, r.canonical_id, r.title, r.symptom, r.cause,"
    " r.steps, r.snippet, r.page, r.pages, r.ocr, r.fault, r.vendor, r.model, r.vendor_key, r.model_key,"
    " r.version, r.language, m.file, m.title AS manual_title, m.valid_for"
    " FROM records r JOIN manuals m ON m.sha256 = r.manual_sha256"
)


class IndexMissing(Exception):
    """There is no usable index file yet."""


@dataclass
class Snapshot:
    """One index file as it was opened. Its record ids stay its rows, whatever a rebuild swaps in meanwhile."""

    signature: tuple[int, int, int]
    path: Path
    identity: str  # the embedding model searches embed questions with
    conn: sqlite3.Connection
    lock: threading.RLock
    rows: dict[int, IndexRow]
    model: str  # the embedding model the build embedded the rows with
    names: ManualNames
    schema: str = ""
    opinion: str = ""  # the second opinion's model, whose vectors the build stored ("": none)
    # Manuals (sha256) that are scans: OCR read half their pages or more, or could not read them.
    scans: frozenset[str] = frozenset()
    # Each manual's machine as the build read it (vendor and model), to ask at it.
    machines: dict[str, Scope] = field(default_factory=dict)
    # What searches work out from it, on first use.
    _vector_ids: np.ndarray | None = field(default=None, init=False)
    _vectors: np.ndarray | None = field(default=None, init=False)
    _in_scope: dict[tuple[str, str], np.ndarray] = field(default_factory=dict, init=False)
    _entry_pages: dict[Group, set[tuple[str, int]]] | None = field(default=None, init=False)
    _page_rows: dict[tuple[str, int], list[IndexRow]] | None = field(default=None, init=False)
    _scope_codes: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict, init=False)
    _numbered: dict[str, frozenset[int]] | None = field(default=None, init=False)
    _doc_counts: dict[str, int] = field(default_factory=dict, init=False)
    _linker: CodeLinker | None = field(default=None, init=False)
    _encoder: OnnxEncoder | None = field(default=None, init=False)
    _encoder_checked: bool = field(default=False, init=False)

    # -- rows --------------------------------------------------------------

    def codes(self) -> set[str]:
        """Every code the entries print (a symptom's entry prints none)."""
        return {
            row["code"]
            for row in self.rows.values()
            if row["kind"] == "entry" and row["code"] and not is_named(row["code"])
        }

    def entry_pages(self) -> dict[Group, set[tuple[str, int]]]:
        """Each entry group's pages (`rows.entry_pages`), made on first use."""
        if self._entry_pages is None:
            self._entry_pages = entry_pages(self.rows.values())
        return self._entry_pages

    def page_rows(self) -> dict[tuple[str, int], list[IndexRow]]:
        """Each page's passages (`rows.page_rows`), made on first use."""
        if self._page_rows is None:
            self._page_rows = page_rows(self.rows.values())
        return self._page_rows

    def codes_in(self, scope: Scope) -> dict[str, str]:
        """Code key → code as printed, of the entries in a scope (kept: a typo's near codes are looked for in
        every entry)."""
        key = (scope_key(scope.vendor), scope_key(scope.model))
        with self.lock:
            if key not in self._scope_codes:
                self._scope_codes[key] = {
                    row["code_key"]: row["code"]
                    for row in self.rows.values()
                    if row["kind"] == "entry" and row["code"] and in_scope(row, scope)
                }
            return self._scope_codes[key]

    def scanned(self, scope: Scope, named: frozenset[str]) -> bool:
        """Whether an asked manual (one `named`, sha256, else the scope's) is a scan (`scans`): a code OCR misread is
        printed nowhere in it, so its text cannot say a code is not its own (a few pictures OCR read in a text
        manual leave its tables as printed)."""
        if named:
            return bool(named & self.scans)
        return bool(scope.vendor or scope.model) and any(self.in_scope_manual(sha, scope) for sha in self.scans)

    def in_scope_manual(self, sha256: str, scope: Scope, own: bool = False) -> bool:
        """Whether a scope keeps a manual's rows (`rows.in_scope`). `own`: and the build read the manual as some
        machine's, so that it is the scope's own, not one of no machine in particular that nothing rules out."""
        machine = self.machines[sha256]
        vendor, model = scope_key(machine.vendor), scope_key(machine.model)
        return keeps(scope, vendor, model) and (not own or bool(vendor or model))

    def numbered_codes(self) -> dict[str, frozenset[int]]:
        """Each manual's entries whose codes are numbers alone (`01`, `16`), as numbers; made on first use."""
        with self.lock:
            if self._numbered is None:
                numbered: dict[str, set[int]] = {}
                for row in self.rows.values():
                    if row["kind"] == "entry" and row["code_key"].isdigit():
                        numbered.setdefault(row["manual_sha256"], set()).add(int(row["code_key"]))
                self._numbered = {sha: frozenset(numbers) for sha, numbers in numbered.items()}
        return self._numbered

    # -- codes -------------------------------------------------------------

    def ids_by_code_key(self, key: str) -> list[int]:
        return self._entry_ids("SELECT id FROM records WHERE code_key = ? AND kind = 'entry' ORDER BY id", key)

    def ids_by_loose_key(self, key: str) -> list[int]:
        return self._entry_ids("SELECT id FROM records WHERE loose_key = ? AND kind = 'entry' ORDER BY id", key)

    def ids_by_pattern(self, key: str) -> list[int]:
        """Entries whose placeholder code (`XX204`) the key fits. `+id`: ordered by the id column itself, SQLite
        scanned the whole table (60 ms at 50,000 rows) instead of the few rows the code_pattern index holds."""
        return self._entry_ids(
            "SELECT id FROM records WHERE code_pattern > '' AND ? GLOB code_pattern ORDER BY +id", key
        )

    def _entry_ids(self, sql: str, key: str) -> list[int]:
        with self.lock:
            return [i for (i,) in self.conn.execute(sql, (key,))]

    def siblings(self, row: IndexRow) -> list[IndexRow]:
        """The entries of an entry's machine and code: its versions and language editions."""
        with self.lock:
            return [
                self.rows[i]
                for (i,) in self.conn.execute(
                    "SELECT id FROM records WHERE vendor_key = ? AND model_key = ? AND code_key = ? AND kind = 'entry'"
                    " ORDER BY id",
                    (row["vendor_key"], row["model_key"], row["code_key"]),
                )
            ]

    def manual_versions(self, vendor: str, model: str) -> set[str]:
        """The versions of a machine's manuals."""
        with self.lock:
            return {
                v
                for (v,) in self.conn.execute(
                    "SELECT DISTINCT version FROM manuals WHERE vendor = ? AND model = ? AND version != ''",
                    (vendor, model),
                )
            }

    def linker(self) -> CodeLinker:
        """The code linker of the index's codes (spaCy: loaded on the first question that needs it)."""
        with self.lock:
            if self._linker is None:
                from knowledge.code_linker import CodeLinker

                self._linker = CodeLinker(self.codes())
            return self._linker

    def linked_codes(self, text: str, language: str) -> list[str]:
        """The codes the linker reads in a question, as the index knows them, loosely typed."""
        with self.lock:
            return [m.code for m in self.linker().mentions(text, language)]

    # -- words -------------------------------------------------------------

    def counts(self, words: list[str]) -> dict[str, int]:
        """How many rows hold each word, looked up under the stem the index stored it as (`motors` is counted
        as `motor`); kept."""
        with self.lock:
            unknown = [w for w in words if w not in self._doc_counts]
            if unknown:
                self.conn.execute("DELETE FROM temp.stems")
                self.conn.executemany("INSERT INTO temp.stems (rowid, word) VALUES (?, ?)", enumerate(unknown))
                self._doc_counts.update(dict.fromkeys(unknown, 0))
                self._doc_counts.update(
                    (unknown[row], doc)
                    for row, doc in self.conn.execute(
                        "SELECT s.doc, coalesce(v.doc, 0) FROM temp.stem_of s LEFT JOIN temp.vocab v ON v.term = s.term"
                    )
                )
            return {w: self._doc_counts[w] for w in words}

    def bm25(self, words: list[str], scope: Scope, limit: int, columns: tuple[float, float]) -> Ranking:
        """The rows holding any of the words, best first by BM25 with these weights of a row's head and body
        (as BM25 counts them: higher is better, SQLite's `bm25()` is their negative)."""
        expression = " OR ".join(_phrase(w) for w in words)
        score = f"bm25(records_fts, {columns[0]!r}, {columns[1]!r})"
        scoped = bool(scope.vendor or scope.model)
        sql = (
            f"SELECT r.id, -{score} FROM records_fts JOIN records r ON r.id = records_fts.rowid"
            " WHERE records_fts MATCH ? AND r.vendor_key IN ('', ?) AND r.model_key IN ('', ?)"
            if scoped
            else f"SELECT rowid, -{score} FROM records_fts WHERE records_fts MATCH ? AND '' = ? AND '' = ?"
        )
        params = (expression, scope_key(scope.vendor), scope_key(scope.model)) if scoped else (expression, "", "")
        with self.lock:
            return [(i, s) for i, s in self.conn.execute(f"{sql} ORDER BY {score} LIMIT {int(limit)}", params)]

    def index_terms(self, ids: list[int]) -> list[set[str]]:
        """The index terms of some rows (head and body), in the order given, read in one query."""
        with self.lock:
            stored = {
                i: f"{head} {body}"
                for i, head, body in self.conn.execute(
                    f"SELECT id, lex_head, lex_body FROM records WHERE id IN ({','.join('?' * len(ids))})", ids
                )
            }
        return [set(stored[i].split()) for i in ids]

    def body_terms(self, rows: list[IndexRow]) -> list[tuple[IndexRow, list[str]]]:
        """Rows with the terms of their text the index stored (what `terms` made of it)."""
        ids = [row["id"] for row in rows]
        with self.lock:
            stored = dict(
                self.conn.execute(f"SELECT id, lex_body FROM records WHERE id IN ({','.join('?' * len(ids))})", ids)
            )
        return [(row, stored[row["id"]].split()) for row in rows]

    # -- meaning -----------------------------------------------------------

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The embedded rows' ids and vectors, read under the lock once and without it after that (as
        `encoder`)."""
        ids, vectors = self._vector_ids, self._vectors  # set in this order, and never again
        if ids is None or vectors is None:
            with self.lock:
                return self._read_vectors()
        return ids, vectors

    def _read_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        if self._vector_ids is None or self._vectors is None:
            if self.model != self.identity:
                raise IndexMissing(
                    f"{self.path} was embedded with {self.model!r}, not {self.identity!r}; "
                    "rebuild it with `fixloop index build`"
                )
            pairs = self.conn.execute("SELECT id, vector FROM records WHERE vector IS NOT NULL ORDER BY id").fetchall()
            self._vector_ids = np.array([i for i, _ in pairs], dtype=np.int64)
            self._vectors = (
                np.vstack([np.frombuffer(v, dtype=np.float32) for _, v in pairs])
                if pairs
                else np.zeros((0, 1), dtype=np.float32)
            )
        return self._vector_ids, self._vectors

    def encoder(self) -> OnnxEncoder | None:
        """The ONNX export the build left beside the index, if it did (else PyTorch embeds). Looked for under the
        lock once, then read without it: the question's thread must not wait while a word search holds the lock
        (at 50,000 rows that wait was a few ms before every encode)."""
        if not self._encoder_checked:
            with self.lock:
                if not self._encoder_checked:
                    path = encoder_path(self.path, self.identity)
                    self._encoder = OnnxEncoder(path) if path.exists() else None
                    self._encoder_checked = True
        return self._encoder

    @property
    def encoder_loaded(self) -> bool:
        return self._encoder is not None

    def in_scope(self, scope: Scope, ids: np.ndarray) -> np.ndarray:
        """The positions among the embedded rows that a scope keeps (without the lock: two threads may both work
        out a scope's positions, alike)."""
        key = (scope_key(scope.vendor), scope_key(scope.model))
        if key not in self._in_scope:
            self._in_scope[key] = np.flatnonzero([in_scope(self.rows[int(i)], scope) for i in ids])
        return self._in_scope[key]

    def opinion_vectors(self, ids: list[int], model: str) -> tuple[list[int], list[bytes]]:
        """The second opinion's stored vectors of those rows that have one (knowledge.ingest.opinion_vectors),
        read by their ids: a search reads its candidates' alone."""
        self.require_opinion(model)
        with self.lock:
            pairs = self.conn.execute(
                f"SELECT id, opinion FROM records WHERE id IN ({','.join('?' * len(ids))}) AND opinion IS NOT NULL",
                ids,
            ).fetchall()
        return [i for i, _ in pairs], [blob for _, blob in pairs]

    def require_opinion(self, model: str) -> None:
        """Raises `IndexMissing` unless the build stored the second opinion's vectors of this model."""
        if self.opinion != model:
            raise IndexMissing(
                f"{self.path} holds no second-opinion vectors of {model!r} (index schema {self.schema or '?'}, "
                f"built {'with ' + repr(self.opinion) if self.opinion else 'without them'}); rebuild it with "
                "`fixloop index build` while [knowledge] second_opinion is on, or turn second_opinion off"
            )

    # -- hazards -----------------------------------------------------------

    def statements(self, manual_sha256: str) -> list[SafetyStatement]:
        """The hazard statements a manual prints (knowledge.ingest.safety), in page order."""
        with self.lock:
            return read_statements(self.conn, manual_sha256)


class Store:
    """The index file at `path`, opened on first use and reopened when a rebuild has swapped a new file in.
    `identity`: the embedding model searches embed questions with (the rows' must be the same)."""

    def __init__(self, path: Path, identity: str):
        self.path = path
        self.identity = identity
        self._lock = threading.RLock()
        self._snapshot: Snapshot | None = None

    @property
    def opened(self) -> Snapshot | None:
        """The snapshot open now, if any (without looking at the file)."""
        return self._snapshot

    def current(self) -> Snapshot:
        """The open index, reopened when a rebuild has swapped a new file in."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            raise IndexMissing(f"no manual index at {self.path}; build it with `fixloop index build PDF...`") from None
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if self._snapshot is None or self._snapshot.signature != signature:
                # The replaced snapshot is not closed here: a search in another thread may still be
                # reading it. Its connection closes when the last holder lets go (see `_open`).
                self._snapshot = self._open(signature)
            return self._snapshot

    def close(self) -> None:
        """Close the open index file; a later call reopens it."""
        with self._lock:
            if self._snapshot is not None:
                self._snapshot.conn.close()
                self._snapshot = None

    def _open(self, signature: tuple[int, int, int]) -> Snapshot:
        conn = None
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            rows = {row["id"]: cast(IndexRow, dict(row)) for row in conn.execute(_ROWS)}
            manuals = {
                row["sha256"]: dict(row)
                for row in conn.execute(
                    "SELECT sha256, file, title, vendor, model, version, device, pages, ocr_pages, scanned_pages"
                    " FROM manuals"
                )
            }
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise IndexMissing(
                f"{self.path} is not a usable manual index ({exc}); rebuild it with `fixloop index build`"
            ) from None
        conn.row_factory = None
        # Document counts per term, for leaving out words on every page, and a scratch table that
        # stems words as the index did (in this connection's own temporary database: the index
        # file is opened read-only).
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, records_fts, row)")
        conn.execute(f"CREATE VIRTUAL TABLE temp.stems USING fts5(word, tokenize='{FTS_TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE temp.stem_of USING fts5vocab(temp, stems, instance)")
        snap = Snapshot(
            signature=signature,
            path=self.path,
            identity=self.identity,
            conn=conn,
            lock=self._lock,
            rows=rows,
            model=meta.get("model", ""),
            schema=meta.get("schema", ""),
            opinion=meta.get("opinion", ""),
            scans=frozenset(sha for sha, manual in manuals.items() if _is_scan(manual)),
            machines={
                sha: Scope(vendor=manual["vendor"] or "", model=manual["model"] or "")
                for sha, manual in manuals.items()
            },
            names=ManualNames(manuals.values(), printed_in=lambda word: _manuals_printing(conn, self._lock, word)),
        )
        weakref.finalize(snap, conn.close)
        return snap


def _manuals_printing(conn: sqlite3.Connection, lock: threading.RLock, word: str) -> set[str]:
    """The manuals (sha256) whose rows hold a word (a snapshot's names ask; the connection, not the snapshot, so
    that the snapshot is let go of, and its connection closed, when its last holder lets go)."""
    with lock:
        return {
            sha
            for (sha,) in conn.execute(
                "SELECT DISTINCT r.manual_sha256 FROM records_fts JOIN records r ON r.id = records_fts.rowid"
                " WHERE records_fts MATCH ?",
                (_phrase(word),),
            )
        }


def _is_scan(manual: dict[str, Any]) -> bool:
    unread = set(json.loads(manual["ocr_pages"] or "[]")) | set(json.loads(manual["scanned_pages"] or "[]"))
    return bool(manual["pages"]) and 2 * len(unread) >= manual["pages"]


def _phrase(word: str) -> str:
    """A word as an FTS5 query matches it: quoted, so `AND` or `-` in it are no operators."""
    return '"' + word.replace('"', "") + '"'
