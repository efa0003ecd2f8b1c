"""What an attack run on the service found, each as the request that showed it, over real HTTP to the whole
service (rules planner, the PLC simulator, SQLite, uvicorn on loopback): part quantities that are not a
sane number, `If-None-Match: *` on a manual page, and error replies that echo back whatever was sent."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures.service import RunningService
from tests.fixtures.work_orders import signed
from tools.plant import UnknownDevice
from tools.work_orders.model import MAX_PART_QUANTITY

HUGE = "9" * 400
QUANTITY = ["body", "parts", 0, "quantity"]
# A JSON number as the body's text, so that a 400-digit one is sent as it is, not as Python would write it.
BAD_QUANTITIES = {
    "hundreds of digits": (HUGE, "at most 10000"),
    "true": ("true", "not true or false"),
    "a string": ('"5"', "not a string"),
    "1e308": ("1e308", "at most 10000"),
    "just over the most": (str(MAX_PART_QUANTITY + 1), "at most 10000"),
    "zero": ("0", "positive number"),
    "negative": ("-1", "positive number"),
}


@pytest.fixture
def open_order(service: RunningService) -> Iterator[str]:
    """A fresh open order on press-3; closing it (cancelled) is allowed straight from open."""
    store = service.service.work_orders
    order, created = store.create_or_get(
        device_id="press-3",
        fault_code=f"E{len(store.list(())) + 700}",
        title="Hydraulic pressure low",
        summary="pressure drops under load",
        priority="high",
        created_by="technician",
        run_id="run-attack-findings",
    )
    assert created
    yield order.id


def close_body(order_id: str | None, quantity: str) -> str:
    """A cancelled close naming one part with `quantity` spelled as given; the MES's body adds the order id."""
    head = f'{{"work_order_id": "{order_id}", ' if order_id else "{"
    return head + f'"status": "cancelled", "parts": [{{"part": "seal kit", "quantity": {quantity}}}]}}'


def close_on_tablet(service: RunningService, order_id: str, quantity: str) -> httpx.Response:
    with service.client() as client:
        return client.post(
            f"/v1/work-orders/{order_id}/status",
            content=close_body(None, quantity),
            headers={"content-type": "application/json"},
        )


def close_from_mes(service: RunningService, order_id: str, quantity: str, webhook_id: str) -> httpx.Response:
    body = close_body(order_id, quantity)
    with service.client(None) as client:
        return client.post(
            "/v1/mes/work-order-status",
            content=body,
            headers=signed(body, webhook_id, secret=service.config.mes.secrets[0]),
        )


def order_status(service: RunningService, order_id: str) -> str:
    return service.service.work_orders.get(order_id).status


# -- part quantities -----------------------------------------------------------------------------


@pytest.mark.parametrize(("quantity", "says"), BAD_QUANTITIES.values(), ids=BAD_QUANTITIES)
def test_a_bad_part_quantity_closing_on_the_tablet_is_422_naming_the_field(service, open_order, quantity, says):
    response = close_on_tablet(service, open_order, quantity)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == QUANTITY and "quantity must be" in error["msg"] and says in error["msg"]
    assert order_status(service, open_order) == "open"


@pytest.mark.parametrize(("quantity", "says"), BAD_QUANTITIES.values(), ids=BAD_QUANTITIES)
def test_a_bad_part_quantity_in_a_signed_mes_close_is_422_naming_the_field(service, open_order, quantity, says):
    # A 500 would have the MES retry the same body for as long as it retries.
    response = close_from_mes(service, open_order, quantity, f"msg_bad_quantity_{open_order}")
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == QUANTITY and "quantity must be" in error["msg"] and says in error["msg"]
    assert order_status(service, open_order) == "open"


@pytest.mark.parametrize("quantity", ["2", "12.5", str(MAX_PART_QUANTITY)])
def test_a_sane_quantity_still_closes_the_order_on_either_route(service, open_order, quantity):
    response = close_on_tablet(service, open_order, quantity)
    assert response.status_code == 200, response.text
    assert response.json()["parts"] == [{"part": "seal kit", "quantity": json.loads(quantity)}]

    store = service.service.work_orders
    other, _ = store.create_or_get(
        device_id="cnc-7",
        fault_code=f"F{len(store.list(())) + 700}",
        title="t",
        summary="s",
        priority="low",
        created_by="technician",
        run_id="run-attack-findings",
    )
    from_mes = close_from_mes(service, other.id, quantity, f"msg_good_quantity_{other.id}")
    assert from_mes.status_code == 200, from_mes.text
    assert from_mes.json()["work_order"]["parts"] == [{"part": "seal kit", "quantity": json.loads(quantity)}]


def test_the_openapi_document_gives_the_quantitys_bounds(service):
    with service.client(None) as client:
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
    quantity = schemas["Part"]["properties"]["quantity"]["anyOf"][0]
    assert quantity == {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_PART_QUANTITY}


# -- If-None-Match: * ----------------------------------------------------------------------------


def manual_page(service: RunningService) -> str:
    with sqlite3.connect(service.config.knowledge.index_file) as index:
        (manual_id,) = index.execute("SELECT sha256 FROM manuals ORDER BY file LIMIT 1").fetchone()
    return f"/v1/manuals/{manual_id}/pages/1.png"


def test_if_none_match_star_is_304_for_a_page_that_exists_and_404_for_one_that_does_not(service):
    url = manual_page(service)
    with service.client() as client:
        first = client.get(url)
        star = client.get(url, headers={"If-None-Match": "*"})
        listed = client.get(url, headers={"If-None-Match": f'"other", W/{first.headers["etag"]}'})
        missing = client.get(url.replace("/1.png", "/999.png"), headers={"If-None-Match": "*"})
    assert first.status_code == 200
    # RFC 9110 13.1.2: "*" matches any current representation of the resource.
    assert star.status_code == 304 and star.content == b"" and star.headers["etag"] == first.headers["etag"]
    assert listed.status_code == 304
    assert missing.status_code == 404


# -- error replies echo at most a few hundred characters of what was sent -------------------------

# h11 caps a request head at 16 KiB only while it is incomplete: one that arrives whole in a read gets in.
LONG = "x" * 60_000
MAX_REPLY_BYTES = 1024


def unknown_device(device_id: str) -> str:
    return str(UnknownDevice(device_id, ["press-3", "cnc-7"]))


def small(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, response.text[:300]
    assert len(response.content) <= MAX_REPLY_BYTES, f"{len(response.content)} bytes: {response.text[:300]}"
    return response.json()["detail"]


def test_a_404_quotes_a_long_path_value_cut_short_saying_how_long_it_was(service):
    with service.client() as client:
        run = small(client.get(f"/v1/runs/{LONG}/events"), 404)
        device = small(client.get(f"/v1/devices/{LONG}/sensors/motor_temp/history"), 404)
    assert run.startswith("no run 'xxx") and f"[{len(f'no run {LONG!r}')} characters]" in run
    # The end of the message survives the cut: here, the devices the plant has.
    assert device.startswith("unknown device 'xxx") and device.endswith("known devices: cnc-7, press-3")


def test_a_422_quotes_a_long_query_value_or_name_cut_short_still_naming_the_field(service):
    url = manual_page(service)
    with service.client() as client:
        (value,) = small(client.get(url, params={"entry": LONG}), 422)
        (name,) = small(client.get(url, params={LONG: "1"}), 422)
    assert value["loc"] == ["query", "entry"] and value["input"].startswith("xxx")
    assert "[60000 characters]" in value["input"]
    assert name["loc"][0] == "query" and "[60000 characters]" in name["loc"][1]
    assert name["msg"] == "unknown query parameter; this endpoint takes entry"


def test_a_422_quotes_a_long_header_cut_short_still_naming_it(service):
    with service.client() as client:
        (error,) = small(client.get("/v1/runs/run-0/stream", headers={"Last-Event-ID": LONG}), 422)
    assert error["loc"] == ["header", "Last-Event-ID"] and "[60000 characters]" in error["input"]
    assert error["msg"].startswith("Input should be a valid integer")


def test_a_422_quotes_a_long_json_field_or_field_name_cut_short(service, open_order):
    with service.client() as client:
        device = small(client.post("/v1/runs", json={"question": "coolant level?", "device_id": LONG}), 422)
        (unknown,) = small(client.post(f"/v1/work-orders/{open_order}/status", json={"status": "done", LONG: 1}), 422)
    assert device.startswith("unknown device 'xxx") and f"[{len(unknown_device(LONG))} characters]" in device
    assert device.endswith("known devices: cnc-7, press-3")
    assert unknown["loc"][0] == "body" and "[60000 characters]" in unknown["loc"][1]
    assert unknown["msg"] == "Extra inputs are not permitted"


def test_a_signed_mes_alarm_with_a_long_field_gets_a_422_that_quotes_it_cut_short(service):
    alarm = {
        "event_id": "mes-evt-long-device",
        "device_id": LONG,
        "fault_code": "E102",
        "occurred_at": "2026-03-02T08:15:00+00:00",
    }
    body = json.dumps(alarm)
    with service.client(None) as client:
        response = client.post(
            "/v1/mes/alarms",
            content=body,
            headers=signed(body, "msg_long_device", secret=service.config.mes.secrets[0]),
        )
    (error,) = small(response, 422)
    assert error["loc"] == ["body", "device_id"]
    assert f"[{len('Value error, ' + unknown_device(LONG))} characters]" in error["msg"]
    assert error["msg"].endswith("known devices: cnc-7, press-3")
