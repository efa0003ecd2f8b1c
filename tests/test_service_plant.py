"""The plant routes of the running service over real HTTP: a sensor's history as the poller and the agent's
PLC reads write it, and a technician moving a work order along its lifecycle from the tablet, closing it
with what was found and done, which the next occurrence of the fault is told.

Everything is real: the rules planner (no LLM), the PLC simulator over Modbus TCP, SQLite stores, uvicorn.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures.service import E102, TECHNICIAN_TOKEN, RunningService, run_service
from tools.plc.store import HistoryLimits, PlcStore
from tools.work_orders.model import ACTIVE_STATUSES

PLC = "read_plc_sensor_value"
ORDER = "generate_work_order"
HISTORY = "/v1/devices/{device}/sensors/{sensor}/history"
MINUTE_MS = 60_000
FIX = {
    "status": "done",
    "cause": "coolant filter clogged",
    "remedy": "replaced the filter, flushed the circuit",
    "parts": [{"part": "coolant filter CF-200", "quantity": 1}],
    "note": "the old filter was black",
}


def history(client: httpx.Client, device: str, sensor: str, **params: Any) -> httpx.Response:
    return client.get(HISTORY.format(device=device, sensor=sensor), params=params)


def move(client: httpx.Client, order_id: str, body: Any) -> httpx.Response:
    return client.post(f"/v1/work-orders/{order_id}/status", json=body)


def observations(result: Any, tool: str) -> list[dict[str, Any]]:
    return [event["observation"] for event in result.of("observation") if event["observation"]["tool"] == tool]


# -- sensor history ------------------------------------------------------------------------------


def test_the_pollers_readings_are_the_sensors_history_with_its_unit_alarm_limits_and_trend(tmp_path, demo_index):
    with run_service(
        tmp_path, demo_index, poller=True, plc={"poll_interval_s": 0.5, "history_retention_s": 3600}
    ) as running:
        running.sim.set_value("press-3", "motor_temp", 61.5)
        deadline = time.monotonic() + 20
        with running.client() as client:
            while True:
                response = history(client, "press-3", "motor_temp", window_s=60)
                assert response.status_code == 200, response.text
                body = response.json()
                pinned = [point for point in body["points"] if point[1] == pytest.approx(61.5)]
                if len(pinned) >= 3 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)

    assert len(pinned) >= 3, body["points"]
    assert (body["device_id"], body["sensor"], body["label"], body["label_zh"]) == (
        "press-3",
        "motor_temp",
        "Main motor temperature",
        "主电机温度",
    )
    assert (body["unit"], body["alarm_low"], body["alarm_high"]) == ("°C", None, 85)
    assert (body["plausible_min"], body["plausible_max"]) == (-20, 150)
    stamps = [ts for ts, _ in body["points"]]
    assert stamps == sorted(stamps) and body["since_ms"] <= stamps[0] and stamps[-1] <= body["until_ms"]
    assert body["until_ms"] - body["since_ms"] == 60_000
    # Seconds of readings say nothing about a direction yet: the trend needs two minutes of them.
    assert body["trend"]["direction"] == "unknown" and body["trend"]["points"] == len(body["points"])


def test_a_runs_plc_read_joins_the_history_and_the_answer_gives_the_trend_it_shows(service: RunningService):
    """Twenty minutes of a spindle warming by 1 °C a minute, as a poller process wrote them to the shared
    PLC cache, then a technician's question: the live reading lands on top of them."""
    config = service.config
    now_ms = int(time.time() * 1000)
    store = PlcStore(config.state_path(config.plc.cache_file), history=HistoryLimits.of(config.plc))
    try:
        for minute in range(20):
            store.put_reading("cnc-7", "spindle_temp", 40.0 + minute, now_ms - (20 - minute) * MINUTE_MS)
    finally:
        store.close()
    service.sim.set_value("cnc-7", "spindle_temp", 60.0)

    result = service.ask("What is the spindle temperature on cnc-7?", "cnc-7")
    with service.client() as client:
        response = history(client, "cnc-7", "spindle_temp", window_s=1800)
        recent = history(client, "cnc-7", "spindle_temp", window_s=300).json()

    [read] = observations(result, PLC)
    reading = read["content"][0]["fields"]
    assert (reading["sensor"], reading["source"], reading["value"]) == ("spindle_temp", "live", pytest.approx(60.0))
    assert reading["trend"] == "rising"
    assert "rising" in result.termination["final_answer"]
    assert response.status_code == 200
    body = response.json()
    assert len(body["points"]) == 21 and body["points"][-1] == [reading["ts_ms"], pytest.approx(60.0)]
    assert body["alarm_high"] == 80 and body["unit"] == "°C"
    assert body["trend"]["direction"] == "rising" and body["trend"]["slope_per_min"] == pytest.approx(1.0, rel=0.05)
    assert body["trend"]["points"] == 21
    # A shorter window leaves the older readings out; the trend is still the last hour's.
    assert recent["points"] == body["points"][-5:] and recent["trend"] == body["trend"]


@pytest.mark.parametrize(
    ("device", "sensor", "named"),
    [
        ("press-9", "motor_temp", ["'press-9'", "press-3", "cnc-7"]),
        ("press-3", "spindle_speed", ["'spindle_speed'", "motor_temp", "coolant_level"]),
    ],
    ids=["unknown device", "unknown sensor"],
)
def test_an_unknown_device_or_sensor_is_404_naming_it_and_the_known_ones(service, device, sensor, named):
    with service.client() as client:
        response = history(client, device, sensor)
    assert response.status_code == 404
    assert all(name in response.json()["detail"] for name in named), response.json()


@pytest.mark.parametrize("window_s", ["0", "-60", "86401", "an hour", "nan"])
def test_a_window_that_is_not_a_positive_number_of_seconds_within_the_retention_is_422(service, window_s):
    with service.client() as client:
        response = history(client, "press-3", "motor_temp", window_s=window_s)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "window_s"]


# -- closing a work order from the tablet ---------------------------------------------------------


def test_a_work_order_closed_from_the_tablet_with_its_fix_is_told_when_the_fault_recurs(service: RunningService):
    first = service.ask(E102, "press-3")
    with service.client() as client:
        confirmed = client.post(f"/v1/runs/{first.run_id}/confirm")
        assert confirmed.status_code == 200, confirmed.text
        order_id = confirmed.json()["work_order"]["work_order_id"]
        moves = [move(client, order_id, {"status": status}) for status in ("acknowledged", "in_progress")]
        closed = move(client, order_id, FIX)
        again = move(client, order_id, FIX)  # a tablet retrying after a lost response
        done = client.get("/v1/work-orders", params={"device_id": "press-3", "active": "false"}).json()

    assert [(m.status_code, m.json()["status"]) for m in moves] == [(200, "acknowledged"), (200, "in_progress")]
    assert all(m.json()["cause"] is None and m.json()["closed_at"] is None for m in moves)
    assert closed.status_code == 200, closed.text
    order = closed.json()
    assert (order["id"], order["status"], order["closed_by"]) == (order_id, "done", "technician")
    assert (order["cause"], order["remedy"], order["note"]) == (FIX["cause"], FIX["remedy"], FIX["note"])
    assert order["parts"] == FIX["parts"] and order["closed_at"]
    assert again.status_code == 409
    assert again.json()["detail"] == (
        f"work order {order_id} is done; it cannot move to done (allowed: nothing (final))"
    )
    assert [o for o in done if o["id"] == order_id] == [order]

    recurred = service.ask(E102, "press-3")
    [found] = observations(recurred, ORDER)
    [past] = [item["fields"] for item in found["content"] if "past_work_order_id" in item["fields"]]
    assert past["past_work_order_id"] == order_id and past["same_device"] is True
    assert (past["cause"], past["remedy"], past["note"]) == (FIX["cause"], FIX["remedy"], FIX["note"])
    assert past["parts"] == ["coolant filter CF-200 ×1"] and past["closed_at"] == order["closed_at"]
    assert (
        f"Last fix on this machine: {order_id}, {order['closed_at'][:10]} — cause: coolant filter clogged; "
        "remedy: replaced the filter, flushed the circuit; parts: coolant filter CF-200 ×1"
    ) in recurred.termination["final_answer"]


@pytest.fixture
def open_order(service: RunningService) -> Iterator[dict[str, Any]]:
    """An E103 order on press-3, open, as the work-order tool would have made it; cancelled afterwards if the
    test left it active, so that the next test gets an open one of its own."""
    store = service.service.work_orders
    order, created = store.create_or_get(
        device_id="press-3",
        fault_code="E103",
        title="Hydraulic pressure low",
        summary="pressure drops under load",
        priority="high",
        created_by="technician",
        run_id="run-status-test",
    )
    assert created
    yield order.model_dump(mode="json")
    if current(service, order.id)["status"] in ACTIVE_STATUSES:
        store.set_status(order.id, "cancelled", actor="technician")


def current(service: RunningService, order_id: str) -> dict[str, Any]:
    [order] = [o for o in service.service.work_orders.list(()) if o.id == order_id]
    return order.model_dump(mode="json")


@pytest.mark.parametrize(
    ("body", "loc", "says"),
    [
        (
            {"status": "acknowledged", "cause": "valve stuck"},
            ["body"],
            "cause, remedy, parts and note are recorded when an order is closed (done or cancelled), not when it moves to "
            "acknowledged",
        ),
        ({"status": "closed"}, ["body", "status"], "Input should be 'open', 'acknowledged'"),
        ({"cause": "valve stuck"}, ["body", "status"], "Field required"),
        ({"status": "done", "fixed_by": "me"}, ["body", "fixed_by"], "Extra inputs are not permitted"),
        (
            {"status": "done", "parts": [{"part": "seal", "quantity": 0}]},
            ["body", "parts", 0, "quantity"],
            "quantity must be a positive number",
        ),
        (
            {"status": "done", "parts": [{"part": " ", "quantity": 1}]},
            ["body", "parts", 0, "part"],
            "is blank: it has no visible character",
        ),
        ({"status": "done", "remedy": "x" * 2001}, ["body", "remedy"], "at most 2000 characters"),
        ([{"status": "done"}], ["body"], "Input should be an object"),
    ],
    ids=[
        "fix on a non-closing move",
        "unknown status",
        "no status",
        "unknown field",
        "zero parts",
        "blank part",
        "remedy too long",
        "not an object",
    ],
)
def test_a_bad_status_change_is_422_naming_the_field_and_changes_nothing(service, open_order, body, loc, says):
    with service.client() as client:
        response = move(client, open_order["id"], body)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == loc and says in error["msg"], error
    assert current(service, open_order["id"]) == open_order


def test_malformed_json_is_422_and_changes_nothing(service, open_order):
    with service.client() as client:
        response = client.post(
            f"/v1/work-orders/{open_order['id']}/status",
            content=b'{"status": "done",',
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"
    assert current(service, open_order["id"]) == open_order


def test_a_move_the_lifecycle_does_not_allow_is_409_and_an_unknown_order_404(service, open_order):
    with service.client() as client:
        skipped = move(client, open_order["id"], FIX)
        unknown = move(client, "WO-0000000000000000", {"status": "acknowledged"})
        too_long = move(client, "WO-" + "0" * 62, {"status": "acknowledged"})
    assert skipped.status_code == 409
    assert skipped.json()["detail"] == (
        f"work order {open_order['id']} is open; it cannot move to done (allowed: acknowledged, cancelled)"
    )
    assert current(service, open_order["id"]) == open_order
    assert unknown.status_code == 404 and unknown.json()["detail"] == "no work order 'WO-0000000000000000'"
    assert too_long.status_code == 422 and too_long.json()["detail"][0]["loc"] == ["path", "work_order_id"]


def test_cancelling_an_order_may_say_why(service, open_order):
    with service.client() as client:
        response = move(
            client,
            open_order["id"],
            {"status": "cancelled", "note": "raised twice by mistake", "cause": "", "parts": []},
        )
    assert response.status_code == 200, response.text
    order = response.json()
    assert (order["status"], order["closed_by"], order["note"]) == (
        "cancelled",
        "technician",
        "raised twice by mistake",
    )
    assert order["cause"] is None  # a field left empty on the form is not recorded


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_without_a_technician_token_history_and_status_changes_are_401_and_change_nothing(service, open_order, token):
    with service.client(token) as client:
        moved = move(client, open_order["id"], {"status": "acknowledged"})
        read = history(client, "press-3", "motor_temp")
    assert moved.status_code == read.status_code == 401
    assert moved.headers["www-authenticate"] == "Bearer"
    assert current(service, open_order["id"]) == open_order
    with service.client(TECHNICIAN_TOKEN) as client:
        assert move(client, open_order["id"], {"status": "acknowledged"}).status_code == 200
