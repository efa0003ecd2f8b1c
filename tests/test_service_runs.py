"""The run workers: every kind of run, streamed or headless, shares the `max_concurrent_runs` limit."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from edge.loop import RunRequest
from edge.service.runs import RunManager

COOLANT = "What is the coolant level on cnc-7 right now?"


def test_a_headless_alarm_run_waits_for_a_free_worker(service):
    runs = RunManager(service.service.agent, service.service.run_store, workers=1)
    started, released = threading.Event(), threading.Event()

    def held(event: dict[str, Any]) -> None:
        # A technician's run that keeps the only worker busy until the test lets it go.
        started.set()
        released.wait(30)

    try:
        runs.start(RunRequest(question=COOLANT), held)
        assert started.wait(10)
        alarm = RunRequest(question=COOLANT, actor="mes")
        with ThreadPoolExecutor(max_workers=1) as caller:
            waiting = caller.submit(runs.run_sync, alarm)
            with pytest.raises(TimeoutError):
                waiting.result(timeout=2)
            assert runs.get(alarm.run_id) is not None  # queued, and visible as a run in flight
            assert service.service.run_store.get(alarm.run_id) is None
            released.set()
            record = waiting.result(timeout=30)
        assert record.run_id == alarm.run_id and record.termination.reason == "final_answer"
        assert service.service.run_store.get(alarm.run_id) is not None
        assert runs.get(alarm.run_id) is None
    finally:
        released.set()
        runs.close()
