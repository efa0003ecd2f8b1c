"""SQLite store for work orders, their outbox to the MES and inbound webhook replay records.

One file shared by threads and processes (the service, outbox workers, the CLI):
WAL so readers never wait, a busy timeout so writers queue instead of failing,
and every write in a `BEGIN IMMEDIATE` transaction so a writer takes the lock
before it reads what it is about to change. A new connection per operation
keeps threads and forked processes from sharing one.

Idempotency lives in the schema: the primary key is derived from device, fault
key (`E-102` and `E102` are one fault) and occurrence, and a partial unique
index allows one active order per device and fault key. A second writer's INSERT hits a constraint and returns the
order that won; there is no check-then-insert window.
"""

from __future__ import annotations

import builtins  # `WorkOrderStore.list` shadows `list` in the annotations that follow it
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowledge.codes import fault_key
from tools.text_fields import person_name, stored_text
from tools.work_orders.model import (
    ACTIVE_STATUSES,
    CLOSED_STATUSES,
    ISOLATING_STATUS,
    PRIORITIES,
    TRANSITIONS,
    ChecklistConflict,
    ChecklistTick,
    Fix,
    FixHistory,
    IllegalTransition,
    IsolationConfirmation,
    IsolationRequired,
    IsolationRule,
    OutboxRow,
    Part,
    PastFix,
    RecordedReading,
    ReportedFix,
    ReportNotFound,
    WorkOrder,
    WorkOrderError,
    WorkOrderNotFound,
    alarm_occurrence,
    check_confirmer,
    check_fix,
    normalize_fault_code,
    order_id,
)

_ACTIVE_SQL = ", ".join(f"'{s}'" for s in ACTIVE_STATUSES)
# `PRAGMA user_version` once stored fault keys follow `fault_key` (cue words dropped).
FAULT_KEY_VERSION = 1
# `PRAGMA user_version` once the table has what a fault's history is read from (`_add_fix_history`).
FIX_HISTORY_VERSION = 2
# Added to `work_orders` after its first release: what a closed order records (`Fix`, when and by whom).
FIX_COLUMNS = {
    "closed_at": "TEXT",
    "closed_by": "TEXT",
    "cause": "TEXT",
    "remedy": "TEXT",
    "parts": "TEXT NOT NULL DEFAULT '[]'",
    "note": "TEXT",
}
# Past fixes are read newest first per fault and device from a partial index of done orders, so a chronic
# fault's long history costs no more than a new one's; recurrence is counted over a range of creation times,
# an index that also serves every (device_id, fault_key) lookup the index it replaces did.
FIX_HISTORY_INDEXES = (
    (
        "CREATE INDEX IF NOT EXISTS work_orders_fixes ON work_orders (fault_key, device_id, closed_at, id) "
        "WHERE status = 'done'"
    ),
    "CREATE INDEX IF NOT EXISTS work_orders_by_fault_time ON work_orders (device_id, fault_key, created_at)",
    "DROP INDEX IF EXISTS work_orders_by_fault_key",
)
# The history queries, each an index search with no sort (`status = 'done'` spelled as in the partial index).
PAST_FIXES_SQL = (
    "SELECT * FROM work_orders WHERE status = 'done' AND fault_key = ? AND device_id = ? "
    "ORDER BY closed_at DESC, id DESC LIMIT ?"
)
REPORTED_FIXES_SQL = (
    "SELECT * FROM reported_fixes WHERE fault_key = ? AND device_id = ? AND withdrawn_at IS NULL "
    "ORDER BY closed_at DESC, id DESC LIMIT ?"
)
# `PRAGMA user_version` once orders record who confirmed the device isolated (`_add_isolation`).
ISOLATION_VERSION = 3
ISOLATION_COLUMNS = {
    "isolation_confirmed_at": "TEXT",
    "isolation_confirmed_by": "TEXT",
    "isolation_reading": "TEXT",
}
ISOLATION_RULE = "isolation"
# `PRAGMA user_version` once reported fixes are one per person and answer, confirmed or withdrawn
# (`_add_report_trust`).
REPORT_TRUST_VERSION = 4
RECENT_ORDERS_SQL = "SELECT count(*) FROM work_orders WHERE device_id = ? AND fault_key = ? AND created_at >= ?"
# One report per person and answer (`closed_by` is who reported it); a withdrawn one stays, out of every
# history, so its id is never handed to another report.
REPORTED_FIXES_TABLE = """CREATE TABLE IF NOT EXISTS reported_fixes (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    fault_code TEXT NOT NULL,
    fault_key TEXT NOT NULL,
    remedy TEXT NOT NULL,
    closed_at TEXT NOT NULL,
    closed_by TEXT NOT NULL,
    confirmed_at TEXT,
    confirmed_by TEXT,
    withdrawn_at TEXT,
    UNIQUE (run_id, closed_by)
);"""
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS work_orders (
    id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL,
    fault_code TEXT NOT NULL,
    fault_key TEXT NOT NULL,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    priority TEXT NOT NULL CHECK (priority IN ({", ".join(f"'{p}'" for p in PRIORITIES)})),
    status TEXT NOT NULL CHECK (status IN ({", ".join(f"'{s}'" for s in TRANSITIONS)})),
    created_by TEXT NOT NULL,
    source_run_id TEXT NOT NULL,
    occurrence TEXT NOT NULL,
    alarm TEXT,
    evidence TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS work_orders_one_active_key
    ON work_orders (device_id, fault_key) WHERE status IN ({_ACTIVE_SQL});
CREATE TABLE IF NOT EXISTS outbox (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id TEXT NOT NULL UNIQUE,
    work_order_id TEXT REFERENCES work_orders (id),  -- NULL for plant events such as an opened PLC breaker
    event_type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_status_code INTEGER,
    last_error TEXT,
    created_at REAL NOT NULL,
    queued_at REAL NOT NULL,
    delivered_at REAL
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, next_attempt_at);
{REPORTED_FIXES_TABLE}
CREATE INDEX IF NOT EXISTS reported_fixes_by_fault ON reported_fixes (fault_key, device_id, closed_at, id);
-- The remedy's steps ticked on the tablet; client_tick_id (plant-unique) applies a resent tick once.
CREATE TABLE IF NOT EXISTS checklist_ticks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    client_tick_id TEXT NOT NULL UNIQUE,
    work_order_id TEXT NOT NULL REFERENCES work_orders (id),
    step_key TEXT NOT NULL,
    text TEXT NOT NULL,
    done INTEGER NOT NULL CHECK (done IN (0, 1)),
    by TEXT NOT NULL,
    at TEXT NOT NULL,
    ticked_at TEXT,
    reading TEXT
);
CREATE INDEX IF NOT EXISTS checklist_ticks_by_order ON checklist_ticks (work_order_id, seq);
-- The plant's rules on moving orders, one row each while on (`isolation`: see `IsolationRule`).
CREATE TABLE IF NOT EXISTS plant_rules (
    name TEXT PRIMARY KEY,
    set_by TEXT NOT NULL,
    set_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS inbound_webhooks (
    webhook_id TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('processing', 'done')),
    status_code INTEGER,
    response TEXT,
    received_at REAL NOT NULL
);
COMMIT;
"""


class WorkOrderStore:
    def __init__(self, path: Path, busy_timeout_ms: int = 5000, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._timeout_s = busy_timeout_ms / 1000
        self._clock = clock
        con = self._open()
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA)
            _rekey(con)
            _add_fix_history(con)
            _add_isolation(con)
            _add_report_trust(con)
        finally:
            con.close()

    # -- connections -----------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=self._timeout_s, isolation_level=None)
        con.row_factory = sqlite3.Row
        # Orders are few and must survive a power cut on the edge box, not only a crash.
        con.execute("PRAGMA synchronous=FULL")
        con.execute("PRAGMA foreign_keys=ON")
        return con

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        con = self._open()
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        con = self._open()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    # -- work orders -----------------------------------------------------

    def create_or_get(
        self,
        *,
        device_id: str,
        fault_code: str,
        title: str,
        summary: str,
        priority: str,
        created_by: str,
        run_id: str,
        alarm: dict[str, Any] | None = None,
        evidence: Sequence[dict[str, Any]] = (),
    ) -> tuple[WorkOrder, bool]:
        """The order for this fault occurrence: new (True) or the one that already exists (False).

        An MES alarm is keyed on its event id, so a redelivered alarm returns its
        order even after that order was closed; otherwise the occurrence is the
        n-th order for the fault. Either way an active order for the same device
        and fault code wins.
        """
        fault_code = normalize_fault_code(fault_code)
        key = fault_key(fault_code)
        title, summary = _checked("title", stored_text, title), _checked("summary", stored_text, summary)
        if priority not in PRIORITIES:
            raise WorkOrderError(f"priority {priority!r} is not one of {', '.join(PRIORITIES)}")
        stamp = self._iso_now()
        with self._write() as con:
            occurrence = alarm_occurrence(alarm)
            if occurrence is None:
                (count,) = con.execute(
                    "SELECT count(*) FROM work_orders WHERE device_id = ? AND fault_key = ?", (device_id, key)
                ).fetchone()
                occurrence = f"episode:{count + 1}"
            new_id = order_id(device_id, fault_code, occurrence)
            inserted = con.execute(
                """INSERT INTO work_orders (id, device_id, fault_code, fault_key, title, summary, priority, status,
                       created_by, source_run_id, occurrence, alarm, evidence, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT DO NOTHING""",
                (
                    new_id,
                    device_id,
                    fault_code,
                    key,
                    title,
                    summary,
                    priority,
                    created_by,
                    run_id,
                    occurrence,
                    _dumps(alarm) if alarm else None,
                    _dumps(list(evidence)),
                    stamp,
                    stamp,
                ),
            ).rowcount
            if inserted:
                order = _order(con.execute("SELECT * FROM work_orders WHERE id = ?", (new_id,)).fetchone())
                self._enqueue(con, order, "work_order.created", created_by)
                return order, True
            row = con.execute(
                f"""SELECT * FROM work_orders
                    WHERE id = ? OR (device_id = ? AND fault_key = ? AND status IN ({_ACTIVE_SQL}))
                    ORDER BY id = ? DESC LIMIT 1""",
                (new_id, device_id, key, new_id),
            ).fetchone()
            return _with_checklists(con, [row])[0], False

    def get(self, work_order_id: str) -> WorkOrder | None:
        with self._read() as con:
            row = con.execute("SELECT * FROM work_orders WHERE id = ?", (work_order_id,)).fetchone()
            return _with_checklists(con, [row])[0] if row else None

    def active_for(self, device_id: str, fault_code: str) -> WorkOrder | None:
        with self._read() as con:
            row = con.execute(
                f"SELECT * FROM work_orders WHERE device_id = ? AND fault_key = ? AND status IN ({_ACTIVE_SQL})",
                (device_id, fault_key(normalize_fault_code(fault_code))),
            ).fetchone()
            return _with_checklists(con, [row])[0] if row else None

    def list(self, statuses: Sequence[str] = (), device_id: str | None = None, limit: int = 100) -> list[WorkOrder]:
        """The newest orders in any of `statuses` (all when empty), filtered in SQL so `limit` counts matches."""
        where: list[str] = []
        params: list[Any] = []
        if statuses:
            unknown = [s for s in statuses if s not in TRANSITIONS]
            if unknown:
                raise WorkOrderError(f"status {unknown[0]!r} is not one of {', '.join(TRANSITIONS)}")
            where.append(f"status IN ({', '.join('?' for _ in statuses)})")
            params.extend(statuses)
        if device_id:
            where.append("device_id = ?")
            params.append(device_id)
        sql = "SELECT * FROM work_orders" + (" WHERE " + " AND ".join(where) if where else "")
        with self._read() as con:
            rows = con.execute(sql + " ORDER BY created_at DESC, id LIMIT ?", (*params, limit)).fetchall()
            return _with_checklists(con, rows)

    def set_status(
        self,
        work_order_id: str,
        status: str,
        actor: str,
        fix: Fix | None = None,
        isolation: IsolationConfirmation | None = None,
    ) -> WorkOrder:
        """Move an order along its lifecycle. Entering a closed status stamps `closed_at` and `closed_by` and
        keeps `fix` (cause, remedy, parts, note; closing without one stays allowed); a fix on any other move
        is refused (`check_fix`). Entering in_progress may record `isolation` (who confirmed the device
        isolated, and its zero-energy reading), stamped with the move's time; on any other move it is refused.
        Without it the move is refused while the plant's isolation rule is on (`isolation_rule`), checked in
        the move's transaction; whether the reading allows the confirmation is the caller's to decide."""
        if status not in TRANSITIONS:
            raise WorkOrderError(f"status {status!r} is not one of {', '.join(TRANSITIONS)}")
        check_fix(status, fix)
        if isolation is not None and status != ISOLATING_STATUS:
            raise WorkOrderError(
                f"isolation is confirmed when an order moves to {ISOLATING_STATUS}, not when it moves to {status}"
            )
        with self._write() as con:
            row = con.execute("SELECT status FROM work_orders WHERE id = ?", (work_order_id,)).fetchone()
            if row is None:
                raise WorkOrderNotFound(f"no work order {work_order_id!r}")
            current = row["status"]
            if status not in TRANSITIONS[current]:
                allowed = ", ".join(TRANSITIONS[current]) or "nothing (final)"
                raise IllegalTransition(
                    f"work order {work_order_id} is {current}; it cannot move to {status} (allowed: {allowed})"
                )
            if status == ISOLATING_STATUS and isolation is None:
                _check_isolation_rule(con, work_order_id)
            stamp = self._iso_now()
            con.execute(
                "UPDATE work_orders SET status = ?, updated_at = ? WHERE id = ?", (status, stamp, work_order_id)
            )
            if isolation is not None:
                reading = isolation.reading.model_dump_json() if isolation.reading else None
                con.execute(
                    "UPDATE work_orders SET isolation_confirmed_at = ?, isolation_confirmed_by = ?, "
                    "isolation_reading = ? WHERE id = ?",
                    (stamp, isolation.by, reading, work_order_id),
                )
            if status in CLOSED_STATUSES:
                fix = fix or Fix()
                con.execute(
                    "UPDATE work_orders SET closed_at = ?, closed_by = ?, cause = ?, remedy = ?, parts = ?, "
                    "note = ? WHERE id = ?",
                    (
                        stamp,
                        actor,
                        fix.cause,
                        fix.remedy,
                        _dumps([p.model_dump() for p in fix.parts]),
                        fix.note,
                        work_order_id,
                    ),
                )
            # The event carries the order whole: its isolation confirmation and its checklist so far.
            order = _with_checklists(
                con, [con.execute("SELECT * FROM work_orders WHERE id = ?", (work_order_id,)).fetchone()]
            )[0]
            self._enqueue(con, order, "work_order.status_changed", actor)
            return order

    def tick(
        self,
        work_order_id: str,
        *,
        client_tick_id: str,
        step_key: str,
        text: str,
        done: bool,
        by: str,
        ticked_at: str | None = None,
        reading: RecordedReading | None = None,
    ) -> tuple[WorkOrder, bool]:
        """Record a tick of a checklist step on an active order, with who and when (and the reading of the
        sensor the step names). Applied once per `client_tick_id`: sent again (an offline tablet's queue after
        a lost reply) it changes nothing and returns the order (False); the same id with another order, step
        or state is refused (`ChecklistConflict`), as is a tick on a closed order."""
        text, by = _checked("text", stored_text, text), _checked("by", person_name, by)
        with self._write() as con:
            row = con.execute("SELECT status FROM work_orders WHERE id = ?", (work_order_id,)).fetchone()
            if row is None:
                raise WorkOrderNotFound(f"no work order {work_order_id!r}")
            earlier = con.execute(
                "SELECT work_order_id, step_key, done FROM checklist_ticks WHERE client_tick_id = ?", (client_tick_id,)
            ).fetchone()
            if earlier is not None:
                if (earlier["work_order_id"], earlier["step_key"], bool(earlier["done"])) != (
                    work_order_id,
                    step_key,
                    done,
                ):
                    raise ChecklistConflict(
                        f"tick {client_tick_id!r} was applied to {earlier['step_key']} of {earlier['work_order_id']} "
                        f"(done={bool(earlier['done'])}); a new tick needs a new client_tick_id"
                    )
                return self._loaded(con, work_order_id), False
            if row["status"] not in ACTIVE_STATUSES:
                raise ChecklistConflict(f"work order {work_order_id} is {row['status']}: its checklist is closed")
            tick = ChecklistTick(
                client_tick_id=client_tick_id,
                step_key=step_key,
                text=text,
                done=done,
                by=by,
                at=self._iso_now(),
                ticked_at=ticked_at,
                reading=reading,
            )
            con.execute(
                """INSERT INTO checklist_ticks (client_tick_id, work_order_id, step_key, text, done, by, at, ticked_at,
                       reading) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    tick.client_tick_id,
                    work_order_id,
                    tick.step_key,
                    tick.text,
                    int(tick.done),
                    tick.by,
                    tick.at,
                    tick.ticked_at,
                    tick.reading.model_dump_json() if tick.reading else None,
                ),
            )
            return self._loaded(con, work_order_id), True

    @staticmethod
    def _loaded(con: sqlite3.Connection, work_order_id: str) -> WorkOrder:
        return _with_checklists(
            con, [con.execute("SELECT * FROM work_orders WHERE id = ?", (work_order_id,)).fetchone()]
        )[0]

    def fix_history(
        self, device_id: str, fault_code: str, *, same_model: Sequence[str], limit: int, window_s: float
    ) -> FixHistory:
        """How this fault was fixed before on `device_id` and on the `same_model` machines (the `limit` newest
        done orders of each group), and how many orders it had on `device_id` in the last `window_s` seconds."""
        key = fault_key(normalize_fault_code(fault_code))
        since = _iso(self._clock() - window_s)
        others = [d for d in same_model if d != device_id]

        def newest(con: sqlite3.Connection, devices: Sequence[str]) -> builtins.list[PastFix]:
            # Per machine and kind, each query reads `limit` index entries; one `IN` over all of them would
            # read and sort their whole histories.
            fixes: builtins.list[PastFix] = []
            for device in devices:
                fixes.extend(_order(row) for row in con.execute(PAST_FIXES_SQL, (key, device, limit)))
                fixes.extend(_reported(row) for row in con.execute(REPORTED_FIXES_SQL, (key, device, limit)))
            return sorted(fixes, key=lambda fix: (fix.closed_at or "", fix.id), reverse=True)[:limit]

        with self._read() as con:
            mine, theirs = newest(con, [device_id]), newest(con, others)
            (recent,) = con.execute(RECENT_ORDERS_SQL, (device_id, key, since)).fetchone()
        return FixHistory(mine, theirs, recent)

    def report_fix(self, *, run_id: str, device_id: str, fault_code: str, remedy: str, actor: str) -> ReportedFix:
        """Record what `actor` said fixed `fault_code` after the answer of `run_id`, as their own report beside
        anyone else's on that answer. Said again it replaces their earlier report (a correction, or an offline
        tablet sending it again); a confirmation stays only while the text is the one confirmed."""
        fault_code = normalize_fault_code(fault_code)
        remedy, actor = _checked("fix", stored_text, remedy), _checked("by", person_name, actor)
        stamp = self._iso_now()
        with self._write() as con:
            mine = con.execute(
                "SELECT * FROM reported_fixes WHERE run_id = ? AND closed_by = ?", (run_id, actor)
            ).fetchone()
            if mine is None:
                (earlier,) = con.execute("SELECT count(*) FROM reported_fixes WHERE run_id = ?", (run_id,)).fetchone()
                report_id = f"FB-{run_id}" if earlier == 0 else f"FB-{run_id}-{earlier + 1}"
                con.execute(
                    """INSERT INTO reported_fixes (id, run_id, device_id, fault_code, fault_key, remedy, closed_at,
                           closed_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                    (report_id, run_id, device_id, fault_code, fault_key(fault_code), remedy, stamp, actor),
                )
            elif mine["remedy"] != remedy or mine["withdrawn_at"] is not None:
                con.execute(
                    "UPDATE reported_fixes SET remedy = ?, closed_at = ?, confirmed_at = NULL, confirmed_by = NULL, "
                    "withdrawn_at = NULL WHERE id = ?",
                    (remedy, stamp, mine["id"]),
                )
            return self._report(con, run_id, actor)

    def withdraw_report(self, *, run_id: str, actor: str) -> ReportedFix | None:
        """Take `actor`'s report on the answer of `run_id` out of every fault history; the report withdrawn, or
        None when they had none standing (withdrawing twice changes nothing)."""
        with self._write() as con:
            mine = con.execute(
                "SELECT * FROM reported_fixes WHERE run_id = ? AND closed_by = ? AND withdrawn_at IS NULL",
                (run_id, actor),
            ).fetchone()
            if mine is None:
                return None
            con.execute("UPDATE reported_fixes SET withdrawn_at = ? WHERE id = ?", (self._iso_now(), mine["id"]))
            return _reported(mine)

    def confirm_report(self, *, run_id: str, reporter: str, by: str) -> ReportedFix:
        """`by` vouches for `reporter`'s report on the answer of `run_id`: from now on it is a recorded fix.
        Confirmed again it keeps its first confirmation; nobody confirms their own report."""
        by = _checked("by", person_name, by)
        with self._write() as con:
            report = self._report(con, run_id, reporter)
            check_confirmer(reporter, by)
            if report.confirmed:
                return report
            stamp = self._iso_now()
            con.execute(
                "UPDATE reported_fixes SET confirmed_at = ?, confirmed_by = ? WHERE id = ?", (stamp, by, report.id)
            )
            return report.model_copy(update={"confirmed_at": stamp, "confirmed_by": by})

    @staticmethod
    def _report(con: sqlite3.Connection, run_id: str, actor: str) -> ReportedFix:
        row = con.execute(
            "SELECT * FROM reported_fixes WHERE run_id = ? AND closed_by = ? AND withdrawn_at IS NULL", (run_id, actor)
        ).fetchone()
        if row is None:
            raise ReportNotFound(f"no reported fix by {actor!r} on run {run_id!r}")
        return _reported(row)

    # -- the plant's rules -------------------------------------------------

    def isolation_rule(self) -> IsolationRule | None:
        """The plant's isolation rule while it is on; None while off."""
        with self._read() as con:
            return _isolation_rule(con)

    def require_isolation(self, by: str) -> IsolationRule:
        """Turn the isolation rule on for every process sharing this file, `by` a person or a config file; on
        already, it stays as first set."""
        with self._write() as con:
            con.execute(
                "INSERT INTO plant_rules (name, set_by, set_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (ISOLATION_RULE, _checked("by", stored_text, by), self._iso_now()),
            )
            rule = _isolation_rule(con)
        assert rule is not None  # written just now, or before, in this transaction
        return rule

    def release_isolation(self) -> IsolationRule | None:
        """Turn the isolation rule off; the rule as it was (None: it was off)."""
        with self._write() as con:
            rule = _isolation_rule(con)
            con.execute("DELETE FROM plant_rules WHERE name = ?", (ISOLATION_RULE,))
        return rule

    # -- outbox ----------------------------------------------------------

    def _enqueue(self, con: sqlite3.Connection, order: WorkOrder, event_type: str, actor: str) -> None:
        # Each status is entered at most once (the lifecycle has no cycles), so this id is stable and unique.
        _insert_event(
            con,
            f"msg_{order.id}_{order.status}",
            event_type,
            order.model_dump(mode="json"),
            actor,
            self._clock(),
            order.id,
        )

    def notify(self, webhook_id: str, event_type: str, data: dict[str, Any], actor: str) -> bool:
        """Queue a plant event for the MES (e.g. a PLC breaker opened); the same webhook id is queued once,
        so several processes reporting one occurrence send one delivery. True if newly queued."""
        with self._write() as con:
            return _insert_event(con, webhook_id, event_type, data, actor, self._clock(), None)

    def claim_due(self, now: float, limit: int, lease_s: float) -> builtins.list[OutboxRow]:
        """Pending rows due by `now`, pushed `lease_s` ahead so another worker skips them meanwhile."""
        with self._write() as con:
            rows = con.execute(
                "SELECT * FROM outbox WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY row_id LIMIT ?",
                (now, limit),
            ).fetchall()
            con.executemany(
                "UPDATE outbox SET next_attempt_at = ? WHERE row_id = ?",
                [(now + lease_s, row["row_id"]) for row in rows],
            )
        # `next_attempt_at` is the lease this worker now holds; `renew_lease` checks it is still ours.
        return [OutboxRow.model_validate({**dict(row), "next_attempt_at": now + lease_s}) for row in rows]

    def renew_lease(self, row: OutboxRow, until: float) -> OutboxRow | None:
        """Extend a claimed row's lease right before posting it; None when its lease lapsed and another
        worker claimed it meanwhile (that worker posts it, so this one must not)."""
        with self._write() as con:
            renewed = con.execute(
                "UPDATE outbox SET next_attempt_at = ? WHERE row_id = ? AND status = 'pending' AND next_attempt_at = ?",
                (until, row.row_id, row.next_attempt_at),
            ).rowcount
        return row.model_copy(update={"next_attempt_at": until}) if renewed else None

    def record_attempt(
        self,
        row_id: int,
        *,
        status: str,
        next_attempt_at: float,
        status_code: int | None,
        error: str | None,
        now: float,
    ) -> None:
        with self._write() as con:
            con.execute(
                """UPDATE outbox SET status = ?, attempts = attempts + 1, next_attempt_at = ?, last_status_code = ?,
                       last_error = ?, delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at END
                   WHERE row_id = ?""",
                (status, next_attempt_at, status_code, error, status, now, row_id),
            )

    def outbox(self, statuses: Sequence[str] = ("pending", "failed"), limit: int = 100) -> builtins.list[OutboxRow]:
        marks = ", ".join("?" for _ in statuses)
        with self._read() as con:
            rows = con.execute(
                f"SELECT * FROM outbox WHERE status IN ({marks}) ORDER BY row_id LIMIT ?", (*statuses, limit)
            ).fetchall()
        return [OutboxRow.model_validate(dict(row)) for row in rows]

    def requeue(self, row_ids: Sequence[int] | None = None) -> int:
        """Make failed rows (all, or the given ones) due now, with a fresh give-up period; returns how many."""
        now = self._clock()
        with self._write() as con:
            if row_ids is None:
                cur = con.execute(
                    "UPDATE outbox SET status = 'pending', next_attempt_at = ?, queued_at = ? WHERE status = 'failed'",
                    (now, now),
                )
                return cur.rowcount
            requeued = 0
            for row_id in row_ids:
                row = con.execute("SELECT status FROM outbox WHERE row_id = ?", (row_id,)).fetchone()
                if row is None:
                    raise WorkOrderNotFound(f"no outbox row {row_id}")
                if row["status"] == "delivered":
                    raise WorkOrderError(f"outbox row {row_id} was already delivered")
                requeued += con.execute(
                    "UPDATE outbox SET status = 'pending', next_attempt_at = ?, queued_at = ? WHERE row_id = ?",
                    (now, now, row_id),
                ).rowcount
            return requeued

    # -- inbound webhook replay records ------------------------------------

    def claim_webhook(self, webhook_id: str, now: float, stale_after_s: float, keep_s: float) -> dict[str, Any] | None:
        """Claim an inbound webhook-id for processing.

        Returns None when the caller owns it now; the stored response
        (`{"status_code", "body"}`) when it was handled before; raises
        `WebhookInProgress` while another request is still handling it.
        """
        with self._write() as con:
            con.execute("DELETE FROM inbound_webhooks WHERE received_at < ?", (now - keep_s,))
            # A claim left by a process that died mid-request is taken over after `stale_after_s`.
            con.execute(
                "DELETE FROM inbound_webhooks WHERE state = 'processing' AND received_at < ?", (now - stale_after_s,)
            )
            inserted = con.execute(
                "INSERT INTO inbound_webhooks (webhook_id, state, received_at) VALUES (?, 'processing', ?) "
                "ON CONFLICT DO NOTHING",
                (webhook_id, now),
            ).rowcount
            if inserted:
                return None
            row = con.execute("SELECT * FROM inbound_webhooks WHERE webhook_id = ?", (webhook_id,)).fetchone()
        if row["state"] == "processing":
            raise WebhookInProgress(f"webhook {webhook_id!r} is being processed by another request")
        return {"status_code": row["status_code"], "body": json.loads(row["response"])}

    def finish_webhook(self, webhook_id: str, status_code: int, body: Any) -> None:
        with self._write() as con:
            con.execute(
                "UPDATE inbound_webhooks SET state = 'done', status_code = ?, response = ? WHERE webhook_id = ?",
                (status_code, _dumps(body), webhook_id),
            )

    def release_webhook(self, webhook_id: str) -> None:
        """Forget a claim whose handling failed, so the sender's retry is processed afresh."""
        with self._write() as con:
            con.execute("DELETE FROM inbound_webhooks WHERE webhook_id = ? AND state = 'processing'", (webhook_id,))

    def _iso_now(self) -> str:
        return _iso(self._clock())


class WebhookInProgress(WorkOrderError):
    pass


def _rekey(con: sqlite3.Connection) -> None:
    """Once per file: orders written before a fault's identity ignored its cue word (`ALARM:1` is `1`,
    `fault 123` is `123`) get today's key, so the one-active-order rule holds across the upgrade."""
    if con.execute("PRAGMA user_version").fetchone()[0] >= FAULT_KEY_VERSION:
        return
    con.execute("BEGIN IMMEDIATE")
    if _upgraded_meanwhile(con, FAULT_KEY_VERSION):
        return
    for row in con.execute("SELECT id, fault_code, fault_key FROM work_orders").fetchall():
        key = fault_key(row["fault_code"])
        if key != row["fault_key"]:
            # Two active orders the old keys kept apart stay apart until one of them closes.
            with suppress(sqlite3.IntegrityError):
                con.execute("UPDATE work_orders SET fault_key = ? WHERE id = ?", (key, row["id"]))
    con.execute(f"PRAGMA user_version = {FAULT_KEY_VERSION}")
    con.execute("COMMIT")


def _add_fix_history(con: sqlite3.Connection) -> None:
    """Once per file, new or old: the columns a closed order records and the indexes a fault's history is
    read with."""
    _add_columns(con, FIX_HISTORY_VERSION, FIX_COLUMNS, FIX_HISTORY_INDEXES)


def _add_isolation(con: sqlite3.Connection) -> None:
    """Once per file, new or old: the columns an order's isolation confirmation is recorded in."""
    _add_columns(con, ISOLATION_VERSION, ISOLATION_COLUMNS)


def _add_report_trust(con: sqlite3.Connection) -> None:
    """Once per file: a file whose reported fixes were one per answer (a second person's replaced the
    first) gets the table of one report per person, with its confirmation and withdrawal; the reports
    it held keep their ids and stay unverified."""
    if con.execute("PRAGMA user_version").fetchone()[0] >= REPORT_TRUST_VERSION:
        return
    con.execute("BEGIN IMMEDIATE")
    if _upgraded_meanwhile(con, REPORT_TRUST_VERSION):
        return
    try:
        if "confirmed_by" not in {row["name"] for row in con.execute("PRAGMA table_info(reported_fixes)")}:
            con.execute("ALTER TABLE reported_fixes RENAME TO reported_fixes_before_trust")
            con.execute(REPORTED_FIXES_TABLE)
            con.execute(
                "INSERT INTO reported_fixes (id, run_id, device_id, fault_code, fault_key, remedy, closed_at, "
                "closed_by) SELECT id, run_id, device_id, fault_code, fault_key, remedy, closed_at, closed_by "
                "FROM reported_fixes_before_trust"
            )
            con.execute("DROP TABLE reported_fixes_before_trust")
            con.execute(
                "CREATE INDEX IF NOT EXISTS reported_fixes_by_fault ON reported_fixes (fault_key, device_id, closed_at, id)"
            )
        con.execute(f"PRAGMA user_version = {REPORT_TRUST_VERSION}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _add_columns(
    con: sqlite3.Connection, version: int, columns: dict[str, str], statements: Sequence[str] = ()
) -> None:
    """Bring a file below `version` up to it: the `columns` it lacks, then `statements`. The columns are
    checked inside the write lock, so two processes opening an old file at once add them once."""
    if con.execute("PRAGMA user_version").fetchone()[0] >= version:
        return
    con.execute("BEGIN IMMEDIATE")
    if _upgraded_meanwhile(con, version):
        return
    try:
        present = {row["name"] for row in con.execute("PRAGMA table_info(work_orders)")}
        for name, declaration in columns.items():
            if name not in present:
                con.execute(f"ALTER TABLE work_orders ADD COLUMN {name} {declaration}")
        for statement in statements:
            con.execute(statement)
        con.execute(f"PRAGMA user_version = {version}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _upgraded_meanwhile(con: sqlite3.Connection, version: int) -> bool:
    """Inside the write lock: another process opening the file at the same time got there first. Its later
    upgrades may have run too, and writing this one's version then would take the file back down."""
    if con.execute("PRAGMA user_version").fetchone()[0] < version:
        return False
    con.execute("COMMIT")
    return True


def _checked(field: str, check: Callable[[str], str], value: str) -> str:
    """`value` as `check` keeps it, or the refusal naming `field`."""
    try:
        return check(value)
    except ValueError as exc:
        raise WorkOrderError(f"{field}: {exc}") from None


def _isolation_rule(con: sqlite3.Connection) -> IsolationRule | None:
    row = con.execute("SELECT set_by, set_at FROM plant_rules WHERE name = ?", (ISOLATION_RULE,)).fetchone()
    return IsolationRule.model_validate(dict(row)) if row else None


def _check_isolation_rule(con: sqlite3.Connection, work_order_id: str) -> None:
    rule = _isolation_rule(con)
    if rule is not None:
        raise IsolationRequired(
            f"work order {work_order_id} cannot move to {ISOLATING_STATUS} without isolation_confirmed: true and "
            f"by (who isolated the device): this plant requires isolation (turned on {rule.set_at} by "
            f"{rule.set_by}; `fixloop work-orders isolation-rule off` turns it off)"
        )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _insert_event(
    con: sqlite3.Connection,
    webhook_id: str,
    event_type: str,
    data: dict[str, Any],
    actor: str,
    now: float,
    work_order_id: str | None,
) -> bool:
    body = _dumps({"type": event_type, "timestamp": _iso(now), "actor": actor, "data": data})
    cursor = con.execute(
        """INSERT INTO outbox (webhook_id, work_order_id, event_type, body, status, next_attempt_at, created_at,
               queued_at)
           VALUES (?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (webhook_id) DO NOTHING""",
        (webhook_id, work_order_id, event_type, body, now, now, now),
    )
    return cursor.rowcount == 1


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _reported(row: sqlite3.Row) -> ReportedFix:
    data = dict(row)
    del data["fault_key"], data["withdrawn_at"]
    return ReportedFix.model_validate(data)


def _with_checklists(con: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> builtins.list[WorkOrder]:
    """The orders of `rows` with their checklist ticks, read in one query."""
    orders = [_order(row) for row in rows]
    if not orders:
        return orders
    ticks: dict[str, builtins.list[ChecklistTick]] = {}
    marks = ", ".join("?" for _ in orders)
    for row in con.execute(
        f"SELECT * FROM checklist_ticks WHERE work_order_id IN ({marks}) ORDER BY seq", [o.id for o in orders]
    ):
        data = dict(row)
        del data["seq"]  # the order ticks were applied in: the list's order
        data.update(done=bool(data["done"]), reading=_json(data["reading"]))
        ticks.setdefault(data.pop("work_order_id"), []).append(ChecklistTick.model_validate(data))
    return [order.model_copy(update={"checklist": ticks.get(order.id, [])}) for order in orders]


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


def _order(row: sqlite3.Row) -> WorkOrder:
    data = dict(row)
    del data["fault_key"]  # derived from fault_code; kept as a column only for the unique index
    data["alarm"] = json.loads(data["alarm"]) if data["alarm"] else None
    data["evidence"] = json.loads(data["evidence"])
    data["isolation_reading"] = _json(data["isolation_reading"])
    # Parts were checked when the order was closed; one stored before today's bounds must still read back.
    data["parts"] = [Part.model_construct(**part) for part in json.loads(data["parts"])]
    return WorkOrder.model_validate(data)
