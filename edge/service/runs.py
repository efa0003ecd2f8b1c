"""Runs in flight: the synchronous loop on worker threads, its events bridged to asyncio.

Each run gets its own worker thread, request, cancel flag and event sink, so
concurrent runs share nothing but the agent (whose planners and tools are
built to be shared). A run finishes and is stored whether or not anyone is
still listening: a tablet that drops off Wi-Fi mid-run loses the stream,
not the run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from edge.agent import Agent
from edge.loop import EventSink, RunRequest
from edge.run_record import RunRecord
from edge.run_store import RunStore, work_order_ref
from edge.service import metrics

log = logging.getLogger("fixloop.service")

# Sent after the loop's own events, once the record is stored: "GET /v1/runs/{id}" works from here on.
STORED = "stored"
FAILED = "error"


@dataclass
class LiveRun:
    request: RunRequest
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    record: RunRecord | None = None
    error: str | None = None


class RunManager:
    def __init__(self, agent: Agent, store: RunStore, workers: int,
                 on_record: Callable[[RunRecord], None] = metrics.observe_run):
        self.agent = agent
        self.store = store
        self._on_record = on_record
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run")
        self._live: dict[str, LiveRun] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> LiveRun | None:
        with self._lock:
            return self._live.get(run_id)

    def start(self, request: RunRequest, sink: EventSink) -> LiveRun:
        live = LiveRun(request)
        with self._lock:
            self._live[request.run_id] = live
        self._pool.submit(self._execute, live, sink)
        return live

    def run_sync(self, request: RunRequest) -> RunRecord:
        """A headless run (MES alarms): stored and counted like any other, and queued behind
        `max_concurrent_runs` like any other. Blocks the calling thread, so call it off the event loop."""
        live = LiveRun(request)
        with self._lock:
            self._live[request.run_id] = live
        try:
            self._pool.submit(self._execute, live, lambda event: None).result()
        finally:
            # Normally _execute has already removed it; not if the pool refused or cancelled the run.
            with self._lock:
                self._live.pop(request.run_id, None)
        if live.record is None:
            raise RuntimeError(live.error or "run failed")
        return live.record

    def _execute(self, live: LiveRun, sink: EventSink) -> None:
        metrics.ACTIVE_RUNS.inc()
        try:
            record = self.agent.run(live.request, sink, live.cancel)
            self.store.save(record)
            live.record = record
            self._on_record(record)
            sink({"type": STORED, "run_id": record.run_id, "work_order": work_order_event(record)})
        except Exception as exc:  # the stream must end with a reason, not hang
            log.exception("run %s failed", live.request.run_id)
            live.error = f"{type(exc).__name__}: {exc}"
            sink({"type": FAILED, "run_id": live.request.run_id, "error": live.error})
        finally:
            metrics.ACTIVE_RUNS.dec()
            with self._lock:
                self._live.pop(live.request.run_id, None)
            live.done.set()

    def close(self) -> None:
        with self._lock:
            for live in self._live.values():
                live.cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


class EventBridge:
    """An event sink for a worker thread that feeds an async iterator on the event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def __call__(self, event: dict[str, Any]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:
            pass  # the event loop is gone (shutdown): the run still finishes and is stored

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            event = await self._queue.get()
            yield event
            if event["type"] in (STORED, FAILED):
                return


def work_order_event(record: RunRecord) -> dict[str, Any] | None:
    """The work order the run proposed or touched, for the app's card."""
    ref = work_order_ref(record)
    return {**ref[1], "step": ref[0].n} if ref else None
