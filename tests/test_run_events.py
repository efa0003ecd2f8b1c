"""Run events: typed, replayable from the record, and resumable over real HTTP after the stream drops.

The loop runs against a scripted OpenAI-compatible server and the real tools; the service is uvicorn on
loopback, read with httpx streaming as a tablet would, disconnecting mid-run and reconnecting with
`Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from itertools import pairwise
from typing import Any

import httpx
import pytest

from edge.evaluation.adversarial import E102, SCENARIOS, Scenario, call, final
from edge.llm.scripted_server import ScriptedLlmServer
from edge.run.events import RUN_EVENT, RunEvent, StoredEvent, WarningEvent, events_from_record, stored_event
from edge.run.loop import RunRequest
from edge.run.store import RunStore
from edge.service.runs import EventLog
from tests.fixtures.service import read_sse, run_service

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
ORDER = "generate_work_order"
# Scenarios that take seconds by design (a stalling or slow server) add nothing to the event sequence.
QUICK = [s for s in SCENARIOS if not any("delay_s" in entry or "trickle_s" in entry for entry in s.script)]
THINK_S = 0.6  # the scripted model's time per step in the streaming tests: long enough to drop the stream mid-run
KEEP_ALIVE_S = 0.2  # well inside THINK_S: every stream below waits through keep-alive comments


def without_truncated(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An observation's `truncated` is set on the record's copy when a later prompt cuts it, after the
    event went out: it is the one field a replay may tell differently."""
    for event in events:
        if event["type"] == "observation":
            event["observation"].pop("truncated")
    return events


def as_json(events: list[RunEvent]) -> list[dict[str, Any]]:
    return without_truncated([RUN_EVENT.dump_python(event, mode="json") for event in events])


def streamed_and_replayed(make_agent, tmp_path, scenario: Scenario, stop_at: str | None = None):
    """The events a run emitted (and `stored`), and the events replayed from its record as stored in SQLite."""
    with ScriptedLlmServer(scenario.script) as llm:
        agent = make_agent(llm={"url": llm.url, **scenario.llm}, loop=scenario.loop)
        streamed: list[RunEvent] = []
        cancel = threading.Event()

        def sink(event: RunEvent) -> None:
            streamed.append(event)
            if event.type == stop_at:
                cancel.set()

        record = agent.run(RunRequest(question=scenario.question, device_id=scenario.device_id), sink, cancel)
    store = RunStore(tmp_path / "runs.sqlite")
    store.save(record)
    return [*streamed, stored_event(record)], events_from_record(store.get(record.run_id))


@pytest.mark.parametrize("scenario", QUICK, ids=[s.name for s in QUICK])
def test_a_stored_run_replays_as_the_events_it_streamed(make_agent, tmp_path, scenario):
    streamed, replayed = streamed_and_replayed(make_agent, tmp_path, scenario)
    assert as_json(replayed) == as_json(streamed)


def test_the_replay_covers_warnings_rejections_format_errors_and_a_takeover(make_agent, tmp_path):
    covering = [s for s in QUICK if s.name in ("invented sensor value", "three unreadable replies")]
    kinds = {event.type for s in covering for event in streamed_and_replayed(make_agent, tmp_path, s)[0]}
    assert kinds == {
        "run_started",
        "thought",
        "action",
        "observation",
        "format_error",
        "answer_rejected",
        "warning",
        "final_answer",
        "termination",
        "stored",
    }

    takeover = Scenario(
        "taken over",
        [call(MANUAL, fault_code="E102", device_id="press-3"), call(PLC, device_id="press-3", sensor="coolant_level")],
    )
    streamed, replayed = streamed_and_replayed(make_agent, tmp_path, takeover, stop_at="observation")
    assert streamed[-2].termination.reason == "takeover"
    assert as_json(replayed) == as_json(streamed)


def test_the_stream_carries_every_field_of_its_event_model(make_agent, tmp_path):
    scenario = Scenario(
        "grounded",
        [call(MANUAL, fault_code="E102", device_id="press-3"), final("E102: see the manual steps.", ["obs-1"])],
    )
    streamed, _ = streamed_and_replayed(make_agent, tmp_path, scenario)
    started = as_json(streamed)[0]
    assert started == {
        "type": "run_started",
        "run_id": streamed[0].run_id,
        "question": E102,
        "device_id": "press-3",
        "planner": "llm",
        "degraded": False,
    }
    assert list(as_json(streamed)[-1]) == ["type", "run_id", "work_order"]


def test_a_follower_gets_the_events_from_where_it_starts_and_stops_after_the_last():
    log = EventLog()

    async def follow(first: int) -> list[tuple[int, str]]:
        return [(n, event.type) async for n, event in log.follow(first)]

    async def scenario() -> tuple[list[tuple[int, str]], ...]:
        early, late = asyncio.create_task(follow(0)), asyncio.create_task(follow(1))
        await asyncio.sleep(0)
        # The worker thread appends while both wait.
        worker = threading.Thread(
            target=lambda: [
                log.append(event)
                for event in (
                    WarningEvent(run_id="run-1", text="one"),
                    WarningEvent(run_id="run-1", text="two"),
                    StoredEvent(run_id="run-1", work_order=None),
                )
            ]
        )
        worker.start()
        results = await asyncio.wait_for(asyncio.gather(early, late), 5)
        worker.join()
        # Past the end of a run that has ended: nothing, at once.
        return (*results, await asyncio.wait_for(follow(9), 1))

    early, late, past = asyncio.run(scenario())
    assert early == [(0, "warning"), (1, "warning"), (2, "stored")]
    assert late == [(1, "warning"), (2, "stored")]
    assert past == []


# -- over HTTP --------------------------------------------------------------------------------------------


def slow_script(body: dict[str, Any]) -> dict[str, Any]:
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    steps = [
        call(MANUAL, fault_code="E102", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="coolant_level"),
        call(PLC, device_id="press-3", sensor="motor_temp"),
        final("E102 is motor over-temperature protection: check the coolant.", ["obs-1", "obs-2"]),
    ]
    return {**steps[min(turn, len(steps) - 1)], "delay_s": THINK_S}


@pytest.fixture(scope="module")
def slow_service(tmp_path_factory, demo_index):
    with run_service(
        tmp_path_factory.mktemp("events"),
        demo_index,
        slow_script,
        keep_alive_s=KEEP_ALIVE_S,
        loop={"max_wall_s": 30.0},
        llm={"timeout_s": 10.0},
    ) as running:
        yield running


def ask_until(service, kind: str) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
    """Ask, read up to the first `kind` event, then drop the connection as a tablet leaving Wi-Fi does."""
    with (
        service.client() as client,
        client.stream("POST", "/v1/runs", json={"question": E102, "device_id": "press-3"}) as response,
    ):
        assert response.status_code == 200
        return response.headers["x-run-id"], read_sse(response.iter_lines(), until=kind)


def resume(service, run_id: str, last_id: int | None) -> httpx.Response:
    headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
    with service.client() as client, client.stream("GET", f"/v1/runs/{run_id}/stream", headers=headers) as response:
        response.read()
    return response


def stored_events(service, run_id: str) -> list[dict[str, Any]]:
    with service.client() as client:
        response = client.get(f"/v1/runs/{run_id}/events")
    assert response.status_code == 200
    return response.json()


def assert_whole_run(service, run_id: str, parts: list[list[tuple[int, dict[str, Any]]]]) -> None:
    """The parts read, one after another, are the run's events 0..n, each once, and end with `stored`."""
    ids = [n for part in parts for n, _ in part]
    data = [event for part in parts for _, event in part]
    assert ids == list(range(len(ids)))
    assert data[-1]["type"] == "stored" and {e["run_id"] for e in data} == {run_id}
    assert without_truncated(data) == without_truncated(stored_events(service, run_id))


def test_a_stream_dropped_mid_run_resumes_after_the_last_event_id_with_nothing_lost_or_repeated(slow_service):
    run_id, before = ask_until(slow_service, "observation")
    assert slow_service.service.runs.get(run_id) is not None  # still running: the resumed stream goes live

    with (
        slow_service.client() as client,
        client.stream("GET", f"/v1/runs/{run_id}/stream", headers={"Last-Event-ID": str(before[-1][0])}) as response,
    ):
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        after = read_sse(response.iter_lines())

    assert [e["type"] for _, e in after][-3:] == ["final_answer", "termination", "stored"]
    assert_whole_run(slow_service, run_id, [before, after])


def test_a_run_that_ended_while_the_tablet_was_away_is_replayed_from_its_record(slow_service):
    run_id, before = ask_until(slow_service, "action")
    deadline = time.monotonic() + 30
    while slow_service.service.runs.get(run_id) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert slow_service.service.run_store.get(run_id) is not None

    response = resume(slow_service, run_id, before[-1][0])
    after = read_sse(response.iter_lines())
    assert_whole_run(slow_service, run_id, [before, after])
    # Without Last-Event-ID the whole run comes again; after its last id, nothing does.
    assert_whole_run(slow_service, run_id, [read_sse(resume(slow_service, run_id, None).iter_lines())])
    assert read_sse(resume(slow_service, run_id, after[-1][0]).iter_lines()) == []


def test_several_drops_in_one_run_still_add_up_to_the_whole_run(slow_service):
    run_id, first = ask_until(slow_service, "run_started")
    parts = [first]
    for kind in ("action", "observation", "observation"):
        with (
            slow_service.client() as client,
            client.stream(
                "GET", f"/v1/runs/{run_id}/stream", headers={"Last-Event-ID": str(parts[-1][-1][0])}
            ) as response,
        ):
            parts.append(read_sse(response.iter_lines(), until=kind))
    parts.append(read_sse(resume(slow_service, run_id, parts[-1][-1][0]).iter_lines()))
    assert_whole_run(slow_service, run_id, parts)


def test_a_stream_waiting_on_the_model_sends_keep_alives_that_leave_the_events_and_their_ids_whole(slow_service):
    heard: list[tuple[float, str]] = []
    with (
        slow_service.client() as client,
        client.stream("POST", "/v1/runs", json={"question": E102, "device_id": "press-3"}) as response,
    ):
        assert response.headers["x-keep-alive-s"] == str(KEEP_ALIVE_S)
        run_id = response.headers["x-run-id"]
        heard.extend((time.monotonic(), line) for line in response.iter_lines())

    comments = [line for _, line in heard if line.startswith(":")]
    assert len(comments) >= 4 and set(comments) == {": keep-alive"}  # each step's THINK_S has some
    # Never silent for a keep-alive interval and a margin, though each step keeps the model THINK_S.
    silences = [later - earlier for (earlier, _), (later, _) in pairwise(heard)]
    assert max(silences) < KEEP_ALIVE_S + 0.25 < THINK_S
    assert_whole_run(slow_service, run_id, [read_sse(line for _, line in heard)])


def test_resuming_names_what_was_wrong(slow_service):
    with slow_service.client() as client:
        unknown = client.get("/v1/runs/run-000000000000/stream")
        no_events = client.get("/v1/runs/run-000000000000/events")
        bad_id = client.get("/v1/runs/run-000000000000/stream", headers={"Last-Event-ID": "seven"})
    with slow_service.client(None) as anonymous:
        assert anonymous.get("/v1/runs/run-000000000000/stream").status_code == 401
    assert unknown.status_code == 404 and unknown.json()["detail"] == "no run 'run-000000000000'"
    assert no_events.status_code == 404
    assert bad_id.status_code == 422 and "Last-Event-ID" in str(bad_id.json()["detail"])


def test_the_openapi_spec_documents_every_run_event(slow_service):
    with slow_service.client(None) as client:
        spec = client.get("/openapi.json").json()
    for path, method in (("/v1/runs", "post"), ("/v1/runs/{run_id}/stream", "get")):
        item = spec["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"]["itemSchema"]
        mapping = item["properties"]["data"]["contentSchema"]["discriminator"]["mapping"]
        assert set(mapping) == {
            "run_started",
            "thought",
            "action",
            "observation",
            "warning",
            "format_error",
            "answer_rejected",
            "final_answer",
            "termination",
            "stored",
            "error",
        }
    refs = {match for match in json.dumps(spec).split('"') if match.startswith("#/components/schemas/")}
    assert refs and all(ref.rsplit("/", 1)[1] in spec["components"]["schemas"] for ref in refs)
