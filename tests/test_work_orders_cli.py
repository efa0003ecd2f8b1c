"""`fixloop outbox` and `fixloop work-orders` handlers on a real store and a real MES receiver."""

from __future__ import annotations

import json

import pytest

from edge.config import load_config
from tests.fixtures.work_orders import MES_SECRET
from tools.work_orders.store import WorkOrderStore


@pytest.fixture
def cli(tmp_path, mes_receiver, fixloop):
    env = {
        "FIXLOOP_STATE_DIR": str(tmp_path),
        "FIXLOOP__MES__URL": mes_receiver.url,
        "FIXLOOP__MES__SECRETS": f'["{MES_SECRET}"]',
    }
    fixloop.env(env)
    config = load_config(env=env)
    return fixloop, WorkOrderStore(config.state_path(config.work_orders.store_file))


def _order(store: WorkOrderStore, fault: str = "E102"):
    return store.create_or_get(
        device_id="press-3",
        fault_code=fault,
        title=f"Hydraulic press 3 {fault}: overheating",
        summary="motor overheating",
        priority="high",
        created_by="technician",
        run_id="run-1",
        evidence=({"kind": "sensor", "sensor": "motor_temp", "value": 92.1},),
    )[0]


def test_work_orders_list_show_and_set_status(cli):
    run, store = cli
    order = _order(store)
    code, out, _ = run("work-orders")
    assert code == 0 and order.id in out and "open" in out
    code, out, _ = run("work-orders", "list", "--status", "open", "--json")
    assert [o["id"] for o in json.loads(out)] == [order.id]
    code, out, _ = run("work-orders", "show", order.id)
    assert code == 0 and "motor_temp" in out and "episode:1" in out
    code, out, _ = run("work-orders", "set-status", order.id, "acknowledged")
    assert code == 0 and "acknowledged" in out and store.get(order.id).status == "acknowledged"
    code, _, err = run("work-orders", "set-status", order.id, "done")
    assert code == 2 and "cannot move to done" in err and store.get(order.id).status == "acknowledged"
    code, _, err = run("work-orders", "show", "WO-MISSING")
    assert code == 2 and "no work order 'WO-MISSING'" in err


def test_outbox_list_retry_and_deliver(cli, mes_receiver):
    run, store = cli
    order = _order(store)
    code, out, _ = run("outbox")
    assert code == 0 and order.id in out and "pending" in out and "due now" in out
    mes_receiver.fail_next(1, 410)
    code, _, err = run("outbox", "deliver", "--once")
    assert code == 1 and "failed 1" in err
    code, out, _ = run("outbox", "list", "--json")
    (row,) = json.loads(out)
    assert row["status"] == "failed" and row["last_status_code"] == 410
    code, out, _ = run("outbox", "retry", "999")
    assert code == 2
    code, out, _ = run("outbox", "retry")
    assert code == 0 and "Requeued 1 row(s)" in out
    code, _, err = run("outbox", "deliver", "--once")
    assert code == 0 and "delivered 1" in err
    assert len(mes_receiver.deliveries_for(order.id)) == 1
    code, out, _ = run("outbox")
    assert "Outbox empty" in out
    code, out, _ = run("outbox", "list", "--all", "--json")
    assert [r["status"] for r in json.loads(out)] == ["delivered"]


def test_set_status_done_records_the_fix_and_show_prints_it(cli):
    run, store = cli
    order = _order(store)
    for status in ("acknowledged", "in_progress"):
        assert run("work-orders", "set-status", order.id, status)[0] == 0
    code, out, err = run(
        "work-orders",
        "set-status",
        order.id,
        "done",
        "--actor",
        "technician",
        "--cause",
        "coolant filter clogged",
        "--remedy",
        "replaced the filter",
        "--part",
        "FLT-200=1",
        "--part",
        "coolant=12.5",
        "--part",
        "O-ring [NBR]",
        "--note",
        "two months overdue",
    )
    assert code == 0, err
    closed = store.get(order.id)
    assert (closed.status, closed.closed_by, closed.cause, closed.remedy, closed.note) == (
        "done",
        "technician",
        "coolant filter clogged",
        "replaced the filter",
        "two months overdue",
    )
    assert [p.model_dump() for p in closed.parts] == [
        {"part": "FLT-200", "quantity": 1},
        {"part": "coolant", "quantity": 12.5},
        {"part": "O-ring [NBR]", "quantity": None},
    ]
    code, out, _ = run("work-orders", "show", order.id)
    assert "cause: coolant filter clogged" in out and "parts: FLT-200 ×1, coolant ×12.5, O-ring [NBR]" in out
    assert f"closed {closed.closed_at} by technician" in out
    code, out, _ = run("work-orders", "show", order.id, "--json")
    assert json.loads(out)["remedy"] == "replaced the filter"


@pytest.mark.parametrize(
    ("status", "options", "message"),
    [
        ("cancelled", ["--part", "seal=two"], "--part 'seal=two': the quantity after '=' must be a number"),
        ("cancelled", ["--part", "=2"], "--part '=2': String should have at least 1 character"),
        (
            "cancelled",
            ["--part", "\u200b =2"],
            "--part '\\u200b =2': Value error, is blank: it has no visible character",
        ),
        ("cancelled", ["--part", "seal=0"], "--part 'seal=0': Value error, quantity must be a positive number"),
        ("cancelled", ["--cause", "x" * 2001], "--cause: String should have at most 2000 characters"),
        (
            "acknowledged",
            ["--cause", "loose cable"],
            "recorded when an order is closed (done or cancelled), not when it moves to acknowledged",
        ),
    ],
)
def test_set_status_with_a_bad_fix_names_the_option_and_changes_nothing(cli, status, options, message):
    run, store = cli
    order = _order(store)
    code, _, err = run("work-orders", "set-status", order.id, status, *options)
    assert code == 2 and message in " ".join(err.split())
    assert store.get(order.id) == order and len(store.outbox()) == 1
