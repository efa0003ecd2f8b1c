"""The service over real HTTP with the rules planner: streaming, records, sessions, confirm, auth, health, metrics."""

from __future__ import annotations

import concurrent.futures
import re

import pytest

from tests.fixtures.service import ADMIN_TOKEN, E102, TECHNICIAN_TOKEN, metric, scrape

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
ORDER = "generate_work_order"


def test_a_question_streams_its_steps_in_order_and_the_record_is_stored(service):
    result = service.ask(E102, "press-3")

    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    kinds = [event["type"] for event in result.events]
    assert kinds[0] == "run_started" and kinds[-3:] == ["final_answer", "termination", "stored"]
    assert [e["tool"] for e in result.of("action")] == [MANUAL, PLC, PLC, ORDER]
    assert len(result.of("observation")) == 4
    assert all(event["run_id"] == result.run_id for event in result.events)
    assert result.of("run_started")[0]["degraded"] is True
    manual = next(i for i in result.of("observation")[0]["observation"]["content"] if i["kind"] == "ref")["fields"]
    assert manual["fault_code"] == "E102" and manual["manual"].endswith(".pdf") and manual["page"] >= 1
    reading = result.of("observation")[1]["observation"]["content"][0]["fields"]
    assert reading["sensor"] == "coolant_level" and reading["source"] == "live" and reading["quality"] == "Good"

    with service.client() as client:
        view = client.get(f"/v1/runs/{result.run_id}").json()
    record = view["record"]
    assert view["running"] is False
    assert record["request_id"] == result.headers["x-request-id"]
    assert record["session_id"] == result.headers["x-session-id"]
    assert record["actor"] == "technician"
    assert record["termination"]["reason"] == "final_answer"
    assert [s["action"] for s in record["steps"] if s["action"]] == [MANUAL, PLC, PLC, ORDER]
    assert all(step["step_ms"] > 0 for step in record["steps"])


def test_a_proposed_work_order_is_created_only_when_confirmed_and_only_once(service):
    result = service.ask(E102, "press-3")
    proposed = result.of("stored")[0]["work_order"]
    assert proposed["work_order_status"] == "pending_confirmation" and "work_order_id" not in proposed
    with service.client() as client:
        assert client.get("/v1/work-orders", params={"device_id": "press-3"}).json() == []

        first = client.post(f"/v1/runs/{result.run_id}/confirm")
        again = client.post(f"/v1/runs/{result.run_id}/confirm")
        orders = client.get("/v1/work-orders", params={"device_id": "press-3"}).json()
        view = client.get(f"/v1/runs/{result.run_id}").json()

    assert first.status_code == 200, first.text
    order = first.json()["work_order"]
    assert re.fullmatch(r"WO-[0-9A-F]{16}", order["work_order_id"])
    assert order["work_order_status"] == "open" and order["created"] is True
    assert again.status_code == 200 and again.json()["work_order"]["work_order_id"] == order["work_order_id"]
    assert again.json()["work_order"]["created"] is False
    assert [o["id"] for o in orders] == [order["work_order_id"]]
    assert orders[0]["created_by"] == "technician" and orders[0]["source_run_id"] == result.run_id
    assert {e["tool"] for e in orders[0]["evidence"]} == {MANUAL, PLC}
    assert [c["work_order_id"] for c in view["confirmations"]] == [order["work_order_id"]] * 2

    # The next technician asking about the same fault gets the open order back, nothing to confirm.
    later = service.ask(E102, "press-3")
    assert later.of("stored")[0]["work_order"]["work_order_id"] == order["work_order_id"]
    with service.client() as client:
        refused = client.post(f"/v1/runs/{later.run_id}/confirm")
    assert refused.status_code == 409 and "needs no confirmation" in refused.json()["detail"]


def test_confirm_refuses_runs_without_a_proposal_and_unknown_runs(service):
    result = service.ask("What is the coolant level on cnc-7 right now?")
    with service.client() as client:
        no_order = client.post(f"/v1/runs/{result.run_id}/confirm")
        unknown = client.post("/v1/runs/run-000000000000/confirm")
    assert no_order.status_code == 409 and "proposed no work order" in no_order.json()["detail"]
    assert unknown.status_code == 404


def stored_proposal(service, run_id: str, **args) -> str:
    """A copy of a stored run whose work-order proposal, still awaiting confirmation, carries `args`:
    what the store holds for a run made before the plant's config or the tool's arguments changed."""
    record = service.service.run_store.get(run_id)
    step = next(s for s in reversed(record.steps) if s.action == ORDER)
    items = [
        item.model_copy(update={"fields": {**item.fields, "work_order_status": "pending_confirmation"}})
        if item.kind == "ref"
        else item
        for item in step.observation.content
    ]
    observation = step.observation.model_copy(update={"content": items})
    changed = step.model_copy(update={"args": {**step.args, **args}, "observation": observation})
    copy = record.model_copy(
        update={
            "run_id": f"{run_id}-{len(args)}{sorted(args)[0]}",
            "steps": [changed if s.n == step.n else s for s in record.steps],
        }
    )
    service.service.run_store.save(copy)
    return copy.run_id


def test_confirm_names_what_the_work_order_tool_refused_with_a_client_status(service):
    result = service.ask(E102, "press-3")
    decommissioned = stored_proposal(service, result.run_id, device_id="press-99")
    bad_priority = stored_proposal(service, result.run_id, priority="whenever")
    with service.client() as client:
        unknown_device = client.post(f"/v1/runs/{decommissioned}/confirm")
        invalid = client.post(f"/v1/runs/{bad_priority}/confirm")
        orders = client.get("/v1/work-orders", params={"device_id": "press-99"}).json()

    assert unknown_device.status_code == 409, unknown_device.text
    assert "unknown_device" in unknown_device.json()["detail"] and "'press-99'" in unknown_device.json()["detail"]
    assert invalid.status_code == 422, invalid.text
    assert "invalid_arguments" in invalid.json()["detail"] and "'priority'" in invalid.json()["detail"]
    assert orders == []


def test_a_follow_up_in_the_session_reads_the_sensor_instead_of_searching_the_manual_again(service):
    first = service.ask(E102, "press-3")
    session = first.headers["x-session-id"]

    follow_up = service.ask("and the coolant level?", session_id=session)

    assert follow_up.headers["x-session-id"] == session
    assert [(e["tool"], e["args"]) for e in follow_up.of("action")] == [
        (PLC, {"device_id": "press-3", "sensor": "coolant_level"})
    ]
    # Without the session the same words name no machine, so nothing can be read.
    alone = service.ask("and the coolant level?")
    assert PLC not in [e["tool"] for e in alone.of("action")]


def test_concurrent_runs_are_isolated(service):
    questions = [
        (E102, "press-3"),
        ("What is the spindle temperature on cnc-7 right now?", None),
        ("What is the coolant level on press-3 right now?", None),
        ("cnc-7 shows F03", "cnc-7"),
    ] * 2
    with concurrent.futures.ThreadPoolExecutor(len(questions)) as pool:
        results = list(pool.map(lambda q: service.ask(*q), questions))

    assert len({r.run_id for r in results}) == len(questions)
    assert len({r.headers["x-request-id"] for r in results}) == len(questions)
    for result, (question, _) in zip(results, questions):
        assert {e["run_id"] for e in result.events} == {result.run_id}
        assert result.of("run_started")[0]["question"] == question
        assert result.events[-1]["type"] == "stored"
    with service.client() as client:
        stored = {r["run_id"] for r in client.get("/v1/runs", params={"limit": 200}).json()}
    assert {r.run_id for r in results} <= stored


@pytest.mark.parametrize(
    "body, field",
    [
        ({"question": "   "}, "question"),
        ({"question": "x" * 2001}, "question"),
        ({"question": "E102?", "session_id": "has spaces"}, "session_id"),
        ({"question": "E102?", "colour": "red"}, "colour"),
    ],
)
def test_bad_requests_name_the_field_and_start_nothing(service, body, field):
    with service.client() as client:
        before = len(client.get("/v1/runs", params={"limit": 200}).json())
        response = client.post("/v1/runs", json=body)
        after = len(client.get("/v1/runs", params={"limit": 200}).json())
    assert response.status_code == 422
    assert field in str(response.json()["detail"])
    assert after == before


def test_an_unknown_device_is_refused_with_the_known_ones(service):
    result = service.ask(E102, "press-9")
    assert result.status == 422
    assert "press-9" in result.events[0]["detail"]["detail"] and "press-3" in result.events[0]["detail"]["detail"]


@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", "/v1/runs"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/runs/run-x"),
        ("POST", "/v1/runs/run-x/takeover"),
        ("POST", "/v1/runs/run-x/confirm"),
        ("GET", "/v1/runs/run-x/events"),
        ("GET", "/v1/runs/run-x/stream"),
        ("GET", "/v1/devices"),
        ("GET", "/v1/tools"),
        ("GET", "/v1/work-orders"),
        ("GET", "/metrics"),
        ("GET", "/v1/admin/outbox"),
        ("POST", "/v1/admin/outbox/retry"),
        ("GET", "/v1/admin/index"),
    ],
)
@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_missing_or_wrong_tokens_get_401_and_nothing_runs(service, method, path, token):
    with service.client(TECHNICIAN_TOKEN) as client:
        count_before = len(client.get("/v1/runs", params={"limit": 200}).json())
    with service.client(token) as client:
        response = client.request(method, path, json={"question": E102, "device_id": "press-3"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    if token:
        assert token not in response.text
    # A run that had started would be counted as active until it is stored, then listed.
    with service.client(ADMIN_TOKEN) as admin:
        assert metric(admin.get("/metrics").text, "fixloop_active_runs") == 0
    with service.client(TECHNICIAN_TOKEN) as client:
        assert len(client.get("/v1/runs", params={"limit": 200}).json()) == count_before


def test_the_tools_are_listed_from_the_registry_with_the_role_the_tablet_knows_them_by(service):
    with service.client() as client:
        tools = client.get("/v1/tools").json()
    assert [(t["name"], t["role"], t["side_effect"]) for t in tools] == [
        (MANUAL, "manual", False),
        (PLC, "plc", False),
        (ORDER, "order", True),
    ]
    assert all(t["description"] for t in tools)


def test_roles_are_separate(service):
    with (
        service.client(TECHNICIAN_TOKEN) as technician,
        service.client(ADMIN_TOKEN) as admin,
        service.client("second-tablet-token") as other_tablet,
    ):
        assert technician.get("/metrics").status_code == 401
        assert technician.get("/v1/admin/outbox").status_code == 401
        assert admin.get("/v1/devices").status_code == 401
        assert admin.get("/v1/admin/outbox").status_code == 200
        assert other_tablet.get("/v1/devices").status_code == 200


def test_health_readiness_and_openapi_need_no_token(service):
    with service.client(None) as client:
        health = client.get("/healthz").json()
        ready = client.get("/readyz")
        spec = client.get("/openapi.json").json()
        app = client.get("/app/")
    # Who decides the steps: without a model, the rules alone.
    assert (
        health["status"] == "ok" and health["planning"] == "rules" and "no language model" in health["planning_detail"]
    )
    assert ready.status_code == 200
    report = ready.json()
    assert report["ready"] is True and report["degraded"] is True
    assert report["checks"]["llm"]["mode"] == "degraded"
    assert set(report["checks"]["plc"]["devices"]) == {"press-3", "cnc-7"}
    assert "models (manual search, lexicon)" in report["warmup"]
    for path in (
        "/v1/runs",
        "/v1/runs/{run_id}",
        "/v1/runs/{run_id}/takeover",
        "/v1/runs/{run_id}/confirm",
        "/v1/mes/alarms",
        "/v1/devices",
        "/v1/work-orders",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in spec["paths"], path
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert app.status_code == 200 and "app.js" in app.text


def test_readiness_fails_when_the_plc_is_gone_and_its_cache_is_empty(tmp_path, demo_index):
    from tests.fixtures.service import run_service

    with run_service(tmp_path, demo_index) as running:
        running.sim.stop()
        with running.client(None) as client:
            response = client.get("/readyz")
    assert response.status_code == 503
    plc = response.json()["checks"]["plc"]
    assert plc["ok"] is False and "no cached readings" in plc["devices"]["press-3"]["detail"]


def test_metrics_and_run_records_reflect_the_runs(service):
    before = scrape(service)
    result = service.ask("cnc-7 shows alarm 6065, what now?", "cnc-7")
    with service.client() as client:
        confirmed = client.post(f"/v1/runs/{result.run_id}/confirm")
        record = client.get(f"/v1/runs/{result.run_id}").json()["record"]
    after = scrape(service)

    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert confirmed.status_code == 200, confirmed.text
    steps = record["steps"]
    calls = [(s["action"], s["observation"]["status"]) for s in steps if s["action"]]
    assert (ORDER, "ok") in calls
    assert delta("fixloop_runs_total", actor="technician", reason="final_answer") == 1
    assert delta("fixloop_loop_step_count") == 1 and delta("fixloop_loop_step_sum") == len(steps)
    for tool, status in set(calls):
        extra = 1 if tool == ORDER else 0  # the confirmation is a second call of the work-order tool
        assert delta("fixloop_tool_calls_total", tool=tool, status=status) == calls.count((tool, status)) + extra
    assert delta("fixloop_degraded_runs_total") == 1
    assert delta("fixloop_planner_steps_total", planner="rules") == len(steps)
    assert delta("fixloop_work_order_confirmations_total", created="true") == 1
    assert delta("fixloop_first_event_seconds_count") == 1
    assert delta("fixloop_http_requests_total", method="POST", endpoint="/v1/runs", status="200") == 1
    assert delta("fixloop_http_requests_total", method="POST", endpoint="/v1/runs/{run_id}/confirm", status="200") == 1
    assert "fixloop_plc_reads_total" in after
    assert metric(after, "fixloop_outbox_backlog", status="pending") >= 1  # the confirmed order awaits delivery

    with service.client() as client:
        listed = client.get("/v1/runs", params={"device_id": "cnc-7", "reason": "final_answer"}).json()
        by_code = client.get("/v1/runs", params={"fault_code": "6065"}).json()
    row = next(r for r in listed if r["run_id"] == result.run_id)
    assert row["steps"] == len(steps) and row["fault_codes"] == ["6065"] and row["work_order_status"] == "open"
    assert [r["run_id"] for r in by_code] == [result.run_id]


def test_takeover_of_a_finished_or_unknown_run_is_refused(service):
    result = service.ask(E102, "press-3")
    with service.client() as client:
        finished = client.post(f"/v1/runs/{result.run_id}/takeover")
        unknown = client.post("/v1/runs/run-000000000000/takeover")
    assert finished.status_code == 409 and "already finished (final_answer)" in finished.json()["detail"]
    assert unknown.status_code == 404
