"""Run records in SQLite: every run's whole trace, plus columns to query it by.

The full `RunRecord` is kept as JSON (steps, timings, tokens, observations);
the columns beside it are what operators filter on: termination reason,
steps, device, session, the fault codes the run dealt with. A fault code
gets its own row in `run_codes` so "which codes cost the most steps" is one
GROUP BY. A run asked with an idempotency key (`client_request_id`) is found
by it, so a repeated ask gets the stored run instead of a second one.
Confirmations of parked work orders are appended, never rewritten into the
record: the record says what the run did, the confirmation what a person did
afterwards. So is a technician's feedback on the answer (helpful or not, what
actually fixed it): one row per run and person, replaced when they change it,
with the past fix its fix became and who confirmed that report, if anyone.

One file shared by the service's worker threads and the CLI: WAL, a busy
timeout and a connection per operation, as in the work-order store. Writes
from one process take turns on a lock before they ask SQLite for its write
lock: dozens of runs finishing at once then queue in order instead of
racing for the database, where a loser past the busy timeout lost its run.
"""

from __future__ import annotations

import builtins  # `RunStore.list` shadows `list` in the annotations that follow it
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from edge.run.record import RunRecord, Step, TerminationReason
from knowledge.codes import code_key
from tools.work_orders.tool import WorkOrderTool

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    session_id TEXT,
    device_id TEXT,
    actor TEXT NOT NULL,
    question TEXT NOT NULL,
    planner TEXT NOT NULL,
    degraded INTEGER NOT NULL,
    started_ms INTEGER NOT NULL,
    elapsed_ms REAL NOT NULL,
    steps INTEGER NOT NULL,
    reason TEXT,
    confidence REAL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    format_errors INTEGER NOT NULL,
    work_order_id TEXT,
    work_order_status TEXT,
    client_request_id TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_time ON runs (started_ms);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs (session_id, started_ms);
CREATE INDEX IF NOT EXISTS runs_by_device ON runs (device_id, started_ms);
CREATE INDEX IF NOT EXISTS runs_by_reason ON runs (reason);
CREATE TABLE IF NOT EXISTS run_codes (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    fault_code TEXT NOT NULL,
    PRIMARY KEY (run_id, fault_code)
);
CREATE TABLE IF NOT EXISTS confirmations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    work_order_id TEXT NOT NULL,
    work_order_status TEXT NOT NULL,
    created INTEGER NOT NULL,
    confirmed_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    actor TEXT NOT NULL,
    helpful INTEGER NOT NULL,
    fix TEXT,
    given_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, actor)
);
CREATE INDEX IF NOT EXISTS feedback_by_time ON feedback (given_ms);
"""

# `PRAGMA user_version` once `runs` has its idempotency keys, unique (`_add_client_request_ids`).
CLIENT_REQUEST_ID_VERSION = 1
# `PRAGMA user_version` once feedback rows name their past fix and its confirmation (`_add_feedback_reports`).
FEEDBACK_REPORT_VERSION = 2
FEEDBACK_REPORT_COLUMNS = {"report_id": "TEXT", "confirmed_by": "TEXT", "confirmed_ms": "INTEGER"}
WORK_ORDER_TOOL = WorkOrderTool.name
SQLITE_MAX_INT = 2**63 - 1


class RunSummary(BaseModel):
    """One row of `runs list` / `GET /v1/runs`: enough to pick a run, not its trace."""

    run_id: str
    session_id: str | None
    device_id: str | None
    actor: str
    question: str
    planner: str
    degraded: bool
    started_ms: int
    elapsed_ms: float
    steps: int
    reason: str | None
    confidence: float | None
    prompt_tokens: int
    completion_tokens: int
    format_errors: int
    fault_codes: list[str]
    work_order_id: str | None
    work_order_status: str | None


class RunFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: TerminationReason | None = None
    device_id: str | None = None
    session_id: str | None = None
    actor: str | None = None
    fault_code: str | None = None
    degraded: bool | None = None
    # Bounded so that no value reaches SQLite as an integer it cannot hold (OverflowError).
    min_steps: int | None = Field(default=None, ge=0, le=SQLITE_MAX_INT)
    since_ms: int | None = Field(default=None, ge=-SQLITE_MAX_INT, le=SQLITE_MAX_INT)
    limit: int = Field(default=50, ge=1, le=1000)


class CodeSteps(BaseModel):
    fault_code: str
    runs: int
    mean_steps: float
    max_steps: int
    # Runs past the field report's warning line (> 5 steps: the prompt or a tool needs work).
    over_five: int
    not_answered: int


class Confirmation(BaseModel):
    run_id: str
    work_order_id: str
    work_order_status: str
    created: bool
    confirmed_ms: int


class Feedback(BaseModel):
    """A technician's word on one answer; `fix` is what actually fixed it, in their words: an unverified
    report until someone allowed to vouch for it confirms it (`confirmed_by`)."""

    run_id: str
    actor: str
    helpful: bool
    fix: str | None
    given_ms: int
    # The past fix `fix` became (`FB-<run id>…`), on a run about one device and one fault code.
    report_id: str | None = None
    confirmed_by: str | None = None
    confirmed_ms: int | None = None


class FeedbackRow(Feedback):
    """One row of `fixloop runs feedback`: the feedback with the run it is about."""

    question: str
    device_id: str | None
    fault_codes: list[str]
    planner: str


class FeedbackFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: str | None = None
    helpful: bool | None = None
    since_ms: int | None = Field(default=None, ge=-SQLITE_MAX_INT, le=SQLITE_MAX_INT)
    limit: int = Field(default=50, ge=1, le=1000)


class RunStore:
    def __init__(self, path: Path, busy_timeout_ms: int = 5000):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._timeout_s = busy_timeout_ms / 1000
        self._write_lock = threading.Lock()
        with self._connect() as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA)
            _add_client_request_ids(con)
            _add_feedback_reports(con)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=self._timeout_s, isolation_level=None)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA foreign_keys=ON")
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock, self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def save(self, record: RunRecord, client_request_id: str | None = None) -> None:
        """Insert or replace one record and its code rows in a single transaction. A `client_request_id`
        another run holds fails it (IntegrityError) rather than replacing that run."""
        ref = work_order_ref(record)
        order = ref[1] if ref else {}
        row = {
            "run_id": record.run_id,
            "request_id": record.request_id,
            "session_id": record.session_id,
            "device_id": device_of(record),
            "actor": record.actor,
            "question": record.question,
            "planner": record.planner,
            "degraded": int(record.degraded),
            "started_ms": record.started_ms,
            "elapsed_ms": record.elapsed_ms,
            "steps": len(record.steps),
            "reason": record.termination.reason if record.termination else None,
            "confidence": record.termination.confidence if record.termination else None,
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "format_errors": sum(1 for step in record.steps if step.format_error),
            "work_order_id": order.get("work_order_id"),
            "work_order_status": order.get("work_order_status"),
            "client_request_id": client_request_id,
            "record": record.model_dump_json(),
        }
        columns = ", ".join(row)
        marks = ", ".join(f":{name}" for name in row)
        updates = ", ".join(f"{name} = excluded.{name}" for name in row if name != "run_id")
        with self._transaction() as con:
            con.execute("DELETE FROM run_codes WHERE run_id = ?", (record.run_id,))
            con.execute(
                f"INSERT INTO runs ({columns}) VALUES ({marks}) ON CONFLICT (run_id) DO UPDATE SET {updates}", row
            )
            con.executemany(
                "INSERT INTO run_codes (run_id, fault_code) VALUES (?, ?)",
                [(record.run_id, code) for code in fault_codes_of(record)],
            )

    def get(self, run_id: str) -> RunRecord | None:
        with self._connect() as con:
            row = con.execute("SELECT record FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return RunRecord.model_validate_json(row["record"]) if row else None

    def by_client_request_id(self, client_request_id: str) -> RunRecord | None:
        with self._connect() as con:
            row = con.execute("SELECT record FROM runs WHERE client_request_id = ?", (client_request_id,)).fetchone()
        return RunRecord.model_validate_json(row["record"]) if row else None

    def list(self, where: RunFilter | None = None) -> list[RunSummary]:
        where = where or RunFilter()
        clauses, params = _clauses(where)
        sql = (
            f"SELECT runs.*, (SELECT group_concat(fault_code, ',') FROM run_codes c WHERE c.run_id = runs.run_id)"
            f" AS codes FROM runs {'WHERE ' + ' AND '.join(clauses) if clauses else ''}"
            f" ORDER BY started_ms DESC LIMIT ?"
        )
        with self._connect() as con:
            rows = con.execute(sql, [*params, where.limit]).fetchall()
        return [_summary(row) for row in rows]

    def session_records(self, session_id: str, limit: int = 5) -> builtins.list[RunRecord]:
        """The session's latest runs, oldest first: the order a summary is read in."""
        with self._connect() as con:
            rows = con.execute(
                "SELECT record FROM runs WHERE session_id = ? ORDER BY started_ms DESC LIMIT ?", (session_id, limit)
            ).fetchall()
        return [RunRecord.model_validate_json(row["record"]) for row in reversed(rows)]

    def codes_by_steps(self, limit: int = 20, since_ms: int | None = None) -> builtins.list[CodeSteps]:
        sql = """
            SELECT c.fault_code, COUNT(*) AS runs, AVG(r.steps) AS mean_steps, MAX(r.steps) AS max_steps,
                   SUM(r.steps > 5) AS over_five, SUM(COALESCE(r.reason, '') != 'final_answer') AS not_answered
            FROM run_codes c JOIN runs r ON r.run_id = c.run_id
            WHERE r.started_ms >= ?
            GROUP BY c.fault_code ORDER BY mean_steps DESC, runs DESC LIMIT ?"""
        with self._connect() as con:
            rows = con.execute(sql, (since_ms or 0, limit)).fetchall()
        return [CodeSteps(**dict(row)) for row in rows]

    def add_confirmation(self, run_id: str, work_order: dict[str, Any]) -> Confirmation:
        confirmation = Confirmation(
            run_id=run_id,
            work_order_id=str(work_order["work_order_id"]),
            work_order_status=str(work_order["work_order_status"]),
            created=bool(work_order.get("created")),
            confirmed_ms=int(time.time() * 1000),
        )
        with self._transaction() as con:
            con.execute(
                "INSERT INTO confirmations (run_id, work_order_id, work_order_status, created, confirmed_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    run_id,
                    confirmation.work_order_id,
                    confirmation.work_order_status,
                    int(confirmation.created),
                    confirmation.confirmed_ms,
                ),
            )
            con.execute(
                "UPDATE runs SET work_order_id = ?, work_order_status = ? WHERE run_id = ?",
                (confirmation.work_order_id, confirmation.work_order_status, run_id),
            )
        return confirmation

    def confirmations(self, run_id: str) -> builtins.list[Confirmation]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT run_id, work_order_id, work_order_status, created, confirmed_ms"
                " FROM confirmations WHERE run_id = ? ORDER BY id",
                (run_id,),
            ).fetchall()
        return [Confirmation(**{**dict(row), "created": bool(row["created"])}) for row in rows]

    def give_feedback(
        self, run_id: str, actor: str, helpful: bool, fix: str | None, report_id: str | None = None
    ) -> Feedback:
        """Store `actor`'s word on the run, replacing their earlier one; a confirmation of their fix stays only
        while the fix is the one confirmed. Raises LookupError for a run that is not stored."""
        now = int(time.time() * 1000)
        with self._transaction() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise LookupError(f"no stored run {run_id!r}")
            con.execute(
                "INSERT INTO feedback (run_id, actor, helpful, fix, given_ms, report_id) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, actor) DO UPDATE SET helpful = excluded.helpful, given_ms = excluded.given_ms,"
                " report_id = excluded.report_id,"
                " confirmed_by = CASE WHEN fix IS excluded.fix THEN confirmed_by END,"
                " confirmed_ms = CASE WHEN fix IS excluded.fix THEN confirmed_ms END, fix = excluded.fix",
                (run_id, actor, int(helpful), fix, now, report_id),
            )
            return self._feedback(con, run_id, actor)

    def confirm_fix(self, run_id: str, actor: str, by: str) -> Feedback:
        """`by` confirmed the fix `actor` gave on the run (the first confirmation stays). Raises LookupError
        when `actor` gave no fix on it."""
        with self._transaction() as con:
            updated = con.execute(
                "UPDATE feedback SET confirmed_by = coalesce(confirmed_by, ?), confirmed_ms = coalesce(confirmed_ms, ?)"
                " WHERE run_id = ? AND actor = ? AND fix IS NOT NULL",
                (by, int(time.time() * 1000), run_id, actor),
            ).rowcount
            if not updated:
                raise LookupError(f"no fix given by {actor!r} on run {run_id!r}")
            return self._feedback(con, run_id, actor)

    @staticmethod
    def _feedback(con: sqlite3.Connection, run_id: str, actor: str) -> Feedback:
        row = con.execute("SELECT * FROM feedback WHERE run_id = ? AND actor = ?", (run_id, actor)).fetchone()
        return Feedback(**{**dict(row), "helpful": bool(row["helpful"])})

    def feedback_by(self, run_id: str, actor: str) -> Feedback | None:
        with self._connect() as con:
            row = con.execute("SELECT 1 FROM feedback WHERE run_id = ? AND actor = ?", (run_id, actor)).fetchone()
            return self._feedback(con, run_id, actor) if row else None

    def feedback(self, where: FeedbackFilter | None = None) -> builtins.list[FeedbackRow]:
        """Newest first."""
        where = where or FeedbackFilter()
        clauses, params = _conditions(
            ("r.device_id = ?", where.device_id),
            ("f.helpful = ?", None if where.helpful is None else int(where.helpful)),
            ("f.given_ms >= ?", where.since_ms),
        )
        sql = (
            "SELECT f.*, r.question, r.device_id, r.planner,"
            " (SELECT group_concat(fault_code, ' ') FROM run_codes c WHERE c.run_id = f.run_id) AS codes"
            " FROM feedback f JOIN runs r USING (run_id)"
            + (" WHERE " + " AND ".join(clauses) if clauses else "")
            + " ORDER BY f.given_ms DESC, f.run_id LIMIT ?"
        )
        with self._connect() as con:
            rows = con.execute(sql, (*params, where.limit)).fetchall()
        return [
            FeedbackRow(
                **{key: row[key] for key in dict(row) if key not in ("helpful", "codes")},
                helpful=bool(row["helpful"]),
                fault_codes=(row["codes"] or "").split(),
            )
            for row in rows
        ]

    def feedback_of(self, run_id: str) -> builtins.list[Feedback]:
        with self._connect() as con:
            rows = con.execute("SELECT * FROM feedback WHERE run_id = ? ORDER BY given_ms, actor", (run_id,)).fetchall()
        return [Feedback(**{**dict(row), "helpful": bool(row["helpful"])}) for row in rows]


def _add_client_request_ids(con: sqlite3.Connection) -> None:
    """Once per file, new or old: the idempotency key column and its unique index. The column is checked
    inside the write lock, so two processes opening an old file at once add it once."""
    if con.execute("PRAGMA user_version").fetchone()[0] >= CLIENT_REQUEST_ID_VERSION:
        return
    con.execute("BEGIN IMMEDIATE")
    try:
        if "client_request_id" not in {row["name"] for row in con.execute("PRAGMA table_info(runs)")}:
            con.execute("ALTER TABLE runs ADD COLUMN client_request_id TEXT")
        con.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS runs_by_client_request ON runs (client_request_id)"
            " WHERE client_request_id IS NOT NULL"
        )
        con.execute(f"PRAGMA user_version = {CLIENT_REQUEST_ID_VERSION}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _add_feedback_reports(con: sqlite3.Connection) -> None:
    """Once per file, new or old: the feedback columns naming the past fix a fix became and its confirmation.
    Rows given before keep their fixes as unverified reports."""
    if con.execute("PRAGMA user_version").fetchone()[0] >= FEEDBACK_REPORT_VERSION:
        return
    con.execute("BEGIN IMMEDIATE")
    try:
        present = {row["name"] for row in con.execute("PRAGMA table_info(feedback)")}
        for name, declaration in FEEDBACK_REPORT_COLUMNS.items():
            if name not in present:
                con.execute(f"ALTER TABLE feedback ADD COLUMN {name} {declaration}")
        con.execute(f"PRAGMA user_version = {FEEDBACK_REPORT_VERSION}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def fault_codes_of(record: RunRecord) -> list[str]:
    """Codes the run was about: as a tool resolved them (the top manual hit, the order), else as asked."""
    codes: list[str] = []
    for step in record.steps:
        obs = step.observation
        resolved = (
            next(
                (
                    str(item.fields["fault_code"])
                    for item in obs.content
                    if item.kind == "ref" and item.fields.get("fault_code")
                ),
                None,
            )
            if obs is not None and obs.status in ("ok", "degraded")
            else None
        )
        if resolved:
            codes.append(resolved)
        elif isinstance(step.args, dict) and isinstance(step.args.get("fault_code"), str):
            codes.append(step.args["fault_code"])
    # Keyed like the manual index and the work orders, so `E-102` and `E102` are one code in every query.
    return list(dict.fromkeys(key for key in map(code_key, codes) if key))


def device_of(record: RunRecord) -> str | None:
    """The machine the run was about: as asked, else the first one a tool was called for."""
    if record.device_id:
        return record.device_id
    for step in record.steps:
        if isinstance(step.args, dict) and isinstance(step.args.get("device_id"), str):
            return step.args["device_id"]
    return None


def work_order_ref(record: RunRecord) -> tuple[Step, dict[str, Any]] | None:
    """The last work order the run touched (created, returned or parked for confirmation) and its step."""
    for step in reversed(record.steps):
        if step.action == WORK_ORDER_TOOL and step.observation is not None:
            for item in step.observation.content:
                if item.kind == "ref" and "work_order_status" in item.fields:
                    return step, item.fields
    return None


def _conditions(*pairs: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """The SQL conditions of a filter and their parameters: each (condition, value) whose value is set."""
    kept = [(condition, value) for condition, value in pairs if value is not None]
    return [condition for condition, _ in kept], [value for _, value in kept]


def _clauses(where: RunFilter) -> tuple[list[str], list[Any]]:
    return _conditions(
        *((f"{column} = ?", getattr(where, column)) for column in ("reason", "device_id", "session_id", "actor")),
        ("degraded = ?", None if where.degraded is None else int(where.degraded)),
        ("steps >= ?", where.min_steps),
        ("started_ms >= ?", where.since_ms),
        (
            "run_id IN (SELECT run_id FROM run_codes WHERE fault_code = ?)",
            None if where.fault_code is None else code_key(where.fault_code),
        ),
    )


def _summary(row: sqlite3.Row) -> RunSummary:
    data = {
        key: value
        for key, value in dict(row).items()
        if key not in ("record", "request_id", "client_request_id", "codes")
    }
    data["degraded"] = bool(data["degraded"])
    data["fault_codes"] = row["codes"].split(",") if row["codes"] else []
    return RunSummary(**data)
