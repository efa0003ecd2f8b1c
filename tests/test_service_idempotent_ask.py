"""A question sent twice with one idempotency key (`client_request_id`) is one run, over real HTTP.

A tablet whose POST reached the service but whose answer was lost (the Wi-Fi dropped right after sending)
sends the question again with the same key: the service streams the run that key started, from its first
event, live or replayed from its record, and starts no second one. The model is the scripted LLM server,
slow enough that a repeat lands mid-run.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from edge.run.loop import RunRequest
from edge.run.record import RunRecord
from edge.run.store import RunStore
from tests.fixtures.service import RunningService, read_sse, run_service
from tests.fixtures.tablet import by_fault_code
from tests.fixtures.wifi import LONG_QUESTION, long_run

STEP_S = 0.3  # the scripted model's time per step: a run lasts about 1.5 s


@pytest.fixture(scope="module")
def keyed_service(tmp_path_factory, demo_index) -> Iterator[RunningService]:
    script = by_fault_code({"E101": long_run(STEP_S)})
    with run_service(tmp_path_factory.mktemp("keyed"), demo_index, script, loop={"max_wall_s": 30.0}) as running:
        yield running


def ask(service: RunningService, key: str, question: str = LONG_QUESTION, until: str | None = None) -> dict[str, Any]:
    """POST the question with the key: status, run and session ids, and the events (up to `until`)."""
    body = {"question": question, "device_id": "press-3", "client_request_id": key}
    with service.client() as client, client.stream("POST", "/v1/runs", json=body) as response:
        if response.status_code != 200:
            response.read()
            return {"status": response.status_code, "detail": response.json()["detail"]}
        return {
            "status": 200,
            "run_id": response.headers["x-run-id"],
            "session_id": response.headers["x-session-id"],
            "events": read_sse(response.iter_lines(), until=until),
        }


def runs_of(service: RunningService, session_id: str) -> list[str]:
    with service.client() as client:
        return [run["run_id"] for run in client.get("/v1/runs", params={"session_id": session_id}).json()]


def assert_whole_run(asked: dict[str, Any]) -> None:
    ids = [n for n, _ in asked["events"]]
    assert ids == list(range(len(ids))) and asked["events"][-1][1]["type"] == "stored"
    assert {event["run_id"] for _, event in asked["events"]} == {asked["run_id"]}


def test_the_same_key_twice_mid_run_streams_the_one_run_to_both(keyed_service):
    first_part = ask(keyed_service, "tablet-1-q-0001", until="action")
    again = ask(keyed_service, "tablet-1-q-0001")
    assert again["run_id"] == first_part["run_id"] and again["session_id"] == first_part["session_id"]
    assert_whole_run(again)
    assert again["events"][: len(first_part["events"])] == first_part["events"]  # from the start, not from now
    assert runs_of(keyed_service, again["session_id"]) == [again["run_id"]]


def test_a_key_repeated_after_its_run_was_stored_replays_the_record_and_starts_nothing(keyed_service):
    first = ask(keyed_service, "tablet-1-q-0002")
    assert_whole_run(first)
    before = len(keyed_service.llm.requests)
    again = ask(keyed_service, "tablet-1-q-0002")
    assert (again["run_id"], again["session_id"]) == (first["run_id"], first["session_id"])
    # The record marks an observation a later prompt cut (`truncated`); the live event went out before.
    assert [_uncut(event) for _, event in again["events"]] == [_uncut(event) for _, event in first["events"]]
    assert len(keyed_service.llm.requests) == before  # the model was not asked again
    assert runs_of(keyed_service, first["session_id"]) == [first["run_id"]]


def test_the_same_key_with_another_question_or_device_is_refused_naming_the_run(keyed_service):
    running = ask(keyed_service, "tablet-1-q-0003", until="run_started")
    live_conflict = ask(keyed_service, "tablet-1-q-0003", question="Press-3 shows E102, what now?")
    assert live_conflict["status"] == 409
    assert "tablet-1-q-0003" in live_conflict["detail"] and running["run_id"] in live_conflict["detail"]

    stored = ask(keyed_service, "tablet-1-q-0003")
    assert_whole_run(stored)
    with keyed_service.client() as client:
        other_device = client.post(
            "/v1/runs", json={"question": LONG_QUESTION, "device_id": "cnc-7", "client_request_id": "tablet-1-q-0003"}
        )
    assert other_device.status_code == 409 and running["run_id"] in other_device.json()["detail"]
    assert runs_of(keyed_service, running["session_id"]) == [running["run_id"]]


@pytest.mark.parametrize("key", ["short", "has space in it", "x" * 65, "ünïcode-key"])
def test_a_malformed_key_is_refused_naming_the_field(keyed_service, key):
    with keyed_service.client() as client:
        response = client.post("/v1/runs", json={"question": LONG_QUESTION, "client_request_id": key})
    assert response.status_code == 422
    assert [error["loc"] for error in response.json()["detail"]] == [["body", "client_request_id"]]


def test_concurrent_copies_of_one_post_start_one_run(keyed_service):
    copies = 6
    barrier = threading.Barrier(copies)
    results: list[dict[str, Any]] = []

    def post() -> None:
        barrier.wait()
        results.append(ask(keyed_service, "tablet-2-q-0001"))

    threads = [threading.Thread(target=post) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == copies and {result["status"] for result in results} == {200}
    assert len({result["run_id"] for result in results}) == 1
    for result in results:
        assert_whole_run(result)
        assert result["events"] == results[0]["events"]
    assert runs_of(keyed_service, results[0]["session_id"]) == [results[0]["run_id"]]


def record(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, request_id="req-1", question=LONG_QUESTION, planner="llm", started_ms=1)


def test_a_run_store_from_before_keys_gains_them_and_a_key_stays_with_its_run(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path).save(record("run-old"))
    with sqlite3.connect(path) as con:  # back to the file as the release before keys left it
        con.execute("DROP INDEX runs_by_client_request")
        con.execute("ALTER TABLE runs DROP COLUMN client_request_id")
        con.execute("PRAGMA user_version = 0")

    store = RunStore(path)
    assert store.get("run-old") is not None
    store.save(record("run-new"), "tablet-1-q-0001")
    assert store.by_client_request_id("tablet-1-q-0001").run_id == "run-new"
    with pytest.raises(sqlite3.IntegrityError):
        store.save(record("run-other"), "tablet-1-q-0001")
    assert store.by_client_request_id("tablet-1-q-0001").run_id == "run-new"
    assert store.get("run-other") is None and store.get("run-new") is not None


def test_copies_of_one_ask_reaching_the_run_manager_together_start_one_run(keyed_service):
    """The same race without HTTP between the copies: they reach the key lookup microseconds apart."""
    runs = keyed_service.service.runs
    copies = 8
    barrier = threading.Barrier(copies)
    started: list[str] = []

    def start() -> None:
        barrier.wait()
        started.append(runs.start(RunRequest(question=LONG_QUESTION, device_id="press-3"), "tablet-3-q-0001").run_id)

    threads = [threading.Thread(target=start) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(started) == copies and len(set(started)) == 1
    (run_id,) = set(started)
    live = runs.get(run_id)
    assert live is None or live.done.wait(30)
    assert keyed_service.service.run_store.by_client_request_id("tablet-3-q-0001").run_id == run_id


def _uncut(event: dict[str, Any]) -> dict[str, Any]:
    if "observation" not in event:
        return event
    return {**event, "observation": {**event["observation"], "truncated": None}}
