"""The run workers: every kind of run, streamed or headless, shares the `max_concurrent_runs` limit."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from edge.llm.scripted_server import ScriptedLlmServer
from edge.run.loop import RunRequest
from edge.run.store import RunStore
from edge.service.runs import RunManager

COOLANT = "What is the coolant level on cnc-7 right now?"


def test_a_headless_alarm_run_waits_for_a_free_worker(make_agent, tmp_path):
    started, released = threading.Event(), threading.Event()

    def model(body: dict[str, Any]) -> dict[str, Any]:
        # The technician's run keeps the only worker busy until the test lets its model answer.
        started.set()
        released.wait(30)
        return {"content": json.dumps({"thought": "done", "final_answer": "No reading needed.", "evidence": []})}

    with ScriptedLlmServer(model) as llm:
        agent = make_agent(llm={"url": llm.url, "timeout_s": 30.0}, loop={"max_wall_s": 30.0})
        store = RunStore(tmp_path / "runs.sqlite")
        runs = RunManager(agent, store, workers=1)
        try:
            runs.start(RunRequest(question=COOLANT))
            assert started.wait(10)
            alarm = RunRequest(question=COOLANT, actor="mes")
            with ThreadPoolExecutor(max_workers=1) as caller:
                waiting = caller.submit(runs.run_sync, alarm)
                with pytest.raises(TimeoutError):
                    waiting.result(timeout=2)
                assert runs.get(alarm.run_id) is not None  # queued, and visible as a run in flight
                assert store.get(alarm.run_id) is None
                released.set()
                record = waiting.result(timeout=30)
            assert record.run_id == alarm.run_id and record.termination.reason == "final_answer"
            assert store.get(alarm.run_id) is not None
            assert runs.get(alarm.run_id) is None
        finally:
            released.set()
            runs.close()
