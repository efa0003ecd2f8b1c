"""Runs in flight: the synchronous loop on worker threads, its events kept for whoever follows them.

Each run gets its own worker thread, request, cancel flag and event log, so
concurrent runs share nothing but the agent (whose planners and tools are
built to be shared). A run finishes and is stored whether or not anyone is
still listening: a tablet that drops off Wi-Fi mid-run loses the stream,
not the run, and picks it up again from the last event it got (`follow`):
from the run's event log while it runs, from its record once stored.

A question sent again because its answer was lost on the way (the POST reached the service, the
Wi-Fi dropped before the response did) carries the idempotency key it was first sent with: the
run that key started is streamed again instead of a second run starting (`start`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from edge.agent import Agent
from edge.run import (
    LAST_EVENTS,
    ErrorEvent,
    RunEvent,
    RunRecord,
    RunRequest,
    RunStore,
    events_from_record,
    stored_event,
)
from edge.service import metrics
from edge.service.errors import RequestKeyConflict, RunFinished, RunNotFound
from edge.service.schemas import RunView, TakeoverResult

log = logging.getLogger("fixloop.service")

# A takeover waits for the step in progress: one LLM request plus one tool call at most.
TAKEOVER_GRACE_S = 3.0

NumberedEvents = AsyncIterator[tuple[int, RunEvent]]


class EventLog:
    """A run's events in order, numbered from 0: appended by its worker thread, followed on the event
    loop by any number of streams, each from the event it starts at."""

    def __init__(self) -> None:
        self._events: list[RunEvent] = []
        self._lock = threading.Lock()
        self._wakers: set[Callable[[], None]] = set()

    def append(self, event: RunEvent) -> None:
        with self._lock:
            self._events.append(event)
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    def since(self, first: int) -> list[RunEvent]:
        return self._since(first)[0]

    def _since(self, first: int) -> tuple[list[RunEvent], bool]:
        """The events from number `first` on, and whether the run has said its last."""
        with self._lock:
            return self._events[first:], bool(self._events) and isinstance(self._events[-1], LAST_EVENTS)

    async def follow(self, first: int = 0) -> NumberedEvents:
        """The events from number `first` on, as they come, up to the run's last."""
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the event loop is gone (shutdown): the run still finishes
                loop.call_soon_threadsafe(arrived.set)

        with self._lock:
            self._wakers.add(wake)
        try:
            n = first
            while True:
                arrived.clear()  # before reading: an event appended after the read sets it again
                events, ended = self._since(n)
                for event in events:
                    yield n, event
                    n += 1
                if ended:
                    return
                await arrived.wait()
        finally:
            with self._lock:
                self._wakers.discard(wake)


@dataclass
class LiveRun:
    request: RunRequest
    client_request_id: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    events: EventLog = field(default_factory=EventLog)
    record: RunRecord | None = None
    error: str | None = None


@dataclass
class Asked:
    """What an ask streams: the run it started, or (`repeat`) the run its key started before, from event 0."""

    run_id: str
    session_id: str | None
    events: NumberedEvents
    repeat: bool = False


class RunManager:
    def __init__(
        self, agent: Agent, store: RunStore, workers: int, on_record: Callable[[RunRecord], None] = metrics.observe_run
    ):
        self.agent = agent
        self.store = store
        self._on_record = on_record
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run")
        self._live: dict[str, LiveRun] = {}
        self._live_by_key: dict[str, LiveRun] = {}
        self._lock = threading.Lock()
        # Asks with a key take turns from looking the key up to starting the run: two copies of one POST
        # arriving together start one run. Not `_lock`, which a finishing run needs while they read the store.
        self._keyed = threading.Lock()

    def get(self, run_id: str) -> LiveRun | None:
        with self._lock:
            return self._live.get(run_id)

    def running(self, run_id: str) -> bool:
        """Whether the run is live and not stored yet. A stored run leaves the live set a moment after its
        `stored` event is sent, and a client that read that event may confirm or view it at once."""
        live = self.get(run_id)
        return live is not None and live.record is None

    def start(self, request: RunRequest, client_request_id: str | None = None) -> Asked:
        """Start the run; unless `client_request_id` started one before: that run then, live or stored, and
        nothing new starts (the same key for another question or device raises `RequestKeyConflict`).
        A run that failed unstored frees its key. Blocks on the run store."""
        if client_request_id is None:
            return self._start(LiveRun(request))
        with self._keyed:
            earlier = self._started_by(client_request_id)
            if earlier is None:
                return self._start(LiveRun(request, client_request_id))
        # A live run's request and a stored run's record both say what was asked.
        first = earlier.request if isinstance(earlier, LiveRun) else earlier
        if (first.question, first.device_id) != (request.question, request.device_id):
            raise RequestKeyConflict(client_request_id, first.run_id, first.question, first.device_id)
        log.info("repeated ask %s: streaming run %s again", client_request_id, first.run_id)
        events = earlier.events.follow() if isinstance(earlier, LiveRun) else _numbered(events_from_record(earlier), 0)
        return Asked(first.run_id, first.session_id, events, repeat=True)

    def _started_by(self, client_request_id: str) -> LiveRun | RunRecord | None:
        """The run the key started. Live first: a run is stored before it leaves the live set, so this
        order cannot miss it."""
        with self._lock:
            live = self._live_by_key.get(client_request_id)
        return live if live is not None else self.store.by_client_request_id(client_request_id)

    def _start(self, live: LiveRun) -> Asked:
        request = live.request
        with self._lock:
            self._live[request.run_id] = live
            if live.client_request_id is not None:
                self._live_by_key[live.client_request_id] = live
        self._pool.submit(self._execute, live)
        return Asked(request.run_id, request.session_id, live.events.follow())

    def run_sync(self, request: RunRequest) -> RunRecord:
        """A headless run (MES alarms): stored and counted like any other, and queued behind
        `max_concurrent_runs` like any other. Blocks the calling thread, so call it off the event loop."""
        live = LiveRun(request)
        with self._lock:
            self._live[request.run_id] = live
        try:
            self._pool.submit(self._execute, live).result()
        finally:
            # Normally _execute has already removed it; not if the pool refused or cancelled the run.
            with self._lock:
                self._live.pop(request.run_id, None)
        if live.record is None:
            raise RuntimeError(live.error or "run failed")
        return live.record

    def _execute(self, live: LiveRun) -> None:
        metrics.ACTIVE_RUNS.inc()
        try:
            record = self.agent.run(live.request, live.events.append, live.cancel)
            self.store.save(record, live.client_request_id)
            live.record = record
            self._on_record(record)
            live.events.append(stored_event(record))
        except Exception as exc:  # the stream must end with a reason, not hang
            log.exception("run %s failed", live.request.run_id)
            live.error = f"{type(exc).__name__}: {exc}"
            live.events.append(ErrorEvent(run_id=live.request.run_id, error=live.error))
        finally:
            metrics.ACTIVE_RUNS.dec()
            with self._lock:
                self._live.pop(live.request.run_id, None)
                if live.client_request_id is not None:
                    self._live_by_key.pop(live.client_request_id, None)
            live.done.set()

    # Each lookup below asks the live set first: a run is stored before it leaves the live set,
    # so this order cannot miss it. They block on the run store: call them off the event loop.

    def view(self, run_id: str) -> RunView:
        if self.running(run_id):
            return RunView(run_id=run_id, running=True)
        record = self.store.get(run_id)
        if record is None:
            raise RunNotFound(run_id)
        return RunView(
            run_id=run_id,
            running=False,
            record=record,
            confirmations=self.store.confirmations(run_id),
            feedback=self.store.feedback_of(run_id),
        )

    def events(self, run_id: str) -> list[RunEvent]:
        """The run's events so far: all of them, ending with `stored`, once it is stored."""
        live = self.get(run_id)
        if live is not None:
            return live.events.since(0)
        record = self.store.get(run_id)
        if record is None:
            raise RunNotFound(run_id)
        return events_from_record(record)

    def follow(self, run_id: str, first: int = 0) -> NumberedEvents:
        """The run's events from number `first` on: as they come while it runs, replayed once it is stored."""
        live = self.get(run_id)
        if live is not None:
            return live.events.follow(first)
        return _numbered(self.events(run_id), first)

    def takeover(self, run_id: str) -> TakeoverResult:
        """Stop the run at its next step boundary and wait for it: what it knew, and what it was about to do."""
        live = self.get(run_id)
        # A run whose record is kept but that has not left the live set yet (its stream already said "stored")
        # is finished too: under load a takeover right after the answer landed in that window.
        if live is None or live.record is not None:
            record = (live.record if live is not None else None) or self.store.get(run_id)
            if record is None:
                raise RunNotFound(run_id)
            raise RunFinished(run_id, record.termination.reason if record.termination else "unknown")
        live.cancel.set()
        stopped = live.done.wait(TAKEOVER_GRACE_S + self.agent.config.llm.timeout_s)
        record = live.record
        termination = record.termination if record else None
        return TakeoverResult(
            run_id=run_id,
            stopped=stopped,
            record=record,
            taken_over=bool(termination and termination.reason == "takeover"),
            pending_action=termination.pending_action if termination else None,
        )

    def close(self) -> None:
        with self._lock:
            for live in self._live.values():
                live.cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


async def _numbered(events: list[RunEvent], first: int) -> NumberedEvents:
    for n, event in enumerate(events[first:], start=first):
        yield n, event
