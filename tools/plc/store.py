"""The PLC tool's SQLite file: last good reading per sensor, its history, and breaker state.

Shared by the tool (service process) and the poller (its own process in
production), so it runs in WAL mode and every change is one short transaction.
Breaker rows exist only while a breaker is counting or open; no row = closed.

History rows are numbered per sensor (`seq`) as they are written, so both limits prune with one
index seek per write: rows older than the retention window by time, rows past the cap by number.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tools.plc.config import PlcConfig

SCHEMA = """
CREATE TABLE IF NOT EXISTS readings (
    device_id TEXT NOT NULL,
    sensor TEXT NOT NULL,
    value REAL NOT NULL,
    ts_ms INTEGER NOT NULL,
    PRIMARY KEY (device_id, sensor)
);
CREATE TABLE IF NOT EXISTS history (
    device_id TEXT NOT NULL,
    sensor TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts_ms INTEGER NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (device_id, sensor, seq)
) WITHOUT ROWID;
-- Covers the time-range query (value included) and the pruning by age.
CREATE INDEX IF NOT EXISTS history_by_time ON history (device_id, sensor, ts_ms, value);
CREATE TABLE IF NOT EXISTS breakers (
    device_id TEXT NOT NULL,
    sensor TEXT NOT NULL,              -- '*' is the whole PLC unit
    failures INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    opened_at_ms INTEGER,
    PRIMARY KEY (device_id, sensor)
);
"""


@dataclass(frozen=True)
class CachedReading:
    value: float
    ts_ms: int


class HistoryPoint(NamedTuple):
    """One reading of a sensor's history (a JSON array `[ts_ms, value]` when serialized)."""

    ts_ms: int
    value: float


@dataclass(frozen=True)
class HistoryLimits:
    retention_ms: int
    max_rows: int

    @classmethod
    def of(cls, config: PlcConfig) -> HistoryLimits:
        return cls(retention_ms=int(config.history_retention_s * 1000), max_rows=config.history_max_rows)


DEFAULT_HISTORY = HistoryLimits.of(PlcConfig())


@dataclass(frozen=True)
class BreakerRow:
    device_id: str
    sensor: str
    failures: int
    state: str
    opened_at_ms: int | None


# Writers of the shared WAL file wait this long for each other; every transaction is short, so
# only a stalled disk or a stuck process makes anyone wait the full time.
BUSY_TIMEOUT_S = 5.0


class PlcStore:
    def __init__(self, path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S, history: HistoryLimits = DEFAULT_HISTORY):
        self.history_limits = history
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # One connection guarded by a lock: the tool is called from a thread pool.
        self._db = sqlite3.connect(path, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- readings ----------------------------------------------------------

    def put_reading(self, device_id: str, sensor: str, value: float, ts_ms: int) -> None:
        """Store a good live value and append it to the sensor's history; a successful read also clears
        that sensor's and unit's breakers."""
        limits = self.history_limits
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO readings (device_id, sensor, value, ts_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (device_id, sensor) DO UPDATE SET value = excluded.value, ts_ms = excluded.ts_ms "
                "WHERE excluded.ts_ms >= readings.ts_ms",
                (device_id, sensor, value, ts_ms),
            )
            last = self._db.execute(
                "SELECT seq FROM history WHERE device_id = ? AND sensor = ? ORDER BY seq DESC LIMIT 1",
                (device_id, sensor),
            ).fetchone()
            seq = last[0] + 1 if last else 1
            self._db.execute(
                "INSERT INTO history (device_id, sensor, seq, ts_ms, value) VALUES (?, ?, ?, ?, ?)",
                (device_id, sensor, seq, ts_ms, value),
            )
            # Two statements, not one with OR: SQLite would scan the sensor's rows for the OR.
            self._db.execute(
                "DELETE FROM history WHERE device_id = ? AND sensor = ? AND ts_ms < ?",
                (device_id, sensor, ts_ms - limits.retention_ms),
            )
            self._db.execute(
                "DELETE FROM history WHERE device_id = ? AND sensor = ? AND seq <= ?",
                (device_id, sensor, seq - limits.max_rows),
            )
            self._db.execute("DELETE FROM breakers WHERE device_id = ? AND sensor IN (?, '*')", (device_id, sensor))

    def get_reading(self, device_id: str, sensor: str) -> CachedReading | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value, ts_ms FROM readings WHERE device_id = ? AND sensor = ?", (device_id, sensor)
            ).fetchone()
        return CachedReading(value=row[0], ts_ms=row[1]) if row else None

    def history(self, device_id: str, sensor: str, since_ms: int, until_ms: int) -> list[HistoryPoint]:
        """The sensor's readings with since_ms <= ts_ms <= until_ms, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT ts_ms, value FROM history WHERE device_id = ? AND sensor = ? AND ts_ms BETWEEN ? AND ? "
                "ORDER BY ts_ms",
                (device_id, sensor, since_ms, until_ms),
            ).fetchall()
        return list(map(HistoryPoint._make, rows))

    # -- breakers ----------------------------------------------------------

    def breakers_for(self, device_id: str, sensor: str) -> list[BreakerRow]:
        """The unit's row first, then the sensor's (either may be missing)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT device_id, sensor, failures, state, opened_at_ms FROM breakers "
                "WHERE device_id = ? AND sensor IN ('*', ?) ORDER BY sensor = '*' DESC",
                (device_id, sensor),
            ).fetchall()
        return [BreakerRow(*row) for row in rows]

    def all_breakers(self) -> list[BreakerRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT device_id, sensor, failures, state, opened_at_ms FROM breakers ORDER BY device_id, sensor"
            ).fetchall()
        return [BreakerRow(*row) for row in rows]

    def claim_probe(self, row: BreakerRow, now_ms: int) -> bool:
        """Open -> half-open, for exactly one caller across threads and processes.

        The window restarts at the claim, so a prober that dies mid-probe only
        delays the next probe by one window instead of wedging the breaker.
        """
        with self._lock, self._db:
            cursor = self._db.execute(
                "UPDATE breakers SET state = 'half_open', opened_at_ms = ? WHERE device_id = ? AND sensor = ? "
                "AND opened_at_ms = ?",
                (now_ms, row.device_id, row.sensor, row.opened_at_ms),
            )
            return cursor.rowcount == 1

    def count_failure(self, device_id: str, sensor: str, threshold: int, now_ms: int) -> tuple[BreakerRow, bool]:
        """Add one consecutive failure; returns the new row and whether this call opened it from closed.

        A failed half-open probe re-opens the breaker for a new window without
        counting as a fresh opening (operations was already told).
        """
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute(
                "SELECT failures, state FROM breakers WHERE device_id = ? AND sensor = ?", (device_id, sensor)
            ).fetchone()
            failures, state = (row[0] + 1, row[1]) if row else (1, "closed")
            opened_now = state == "closed" and failures >= threshold
            if state == "half_open" or opened_now:
                new_state, opened_at = "open", now_ms
            elif state == "open":
                # Another process still counts a read it started before the breaker opened.
                new_state, opened_at = "open", None
            else:
                new_state, opened_at = "closed", None
            self._db.execute(
                "INSERT INTO breakers (device_id, sensor, failures, state, opened_at_ms) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (device_id, sensor) DO UPDATE SET failures = excluded.failures, state = excluded.state, "
                "opened_at_ms = COALESCE(excluded.opened_at_ms, breakers.opened_at_ms)",
                (device_id, sensor, failures, new_state, opened_at),
            )
            final = self._db.execute(
                "SELECT device_id, sensor, failures, state, opened_at_ms FROM breakers WHERE device_id = ? AND sensor = ?",
                (device_id, sensor),
            ).fetchone()
        return BreakerRow(*final), opened_now

    def clear_breakers(self, device_id: str, sensor: str) -> None:
        """A PLC that answered (even with a Modbus exception) is communicating."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM breakers WHERE device_id = ? AND sensor IN (?, '*')", (device_id, sensor))
