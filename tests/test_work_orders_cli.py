"""`fixloop outbox` and `fixloop work-orders` handlers on a real store and a real MES receiver."""

from __future__ import annotations

import json

import pytest

from edge.config import load_config
from tests.fixtures.work_orders import MES_SECRET
from tools.work_orders.store import WorkOrderStore


@pytest.fixture
def cli(tmp_path, mes_receiver, fixloop):
    env = {"FIXLOOP_STATE_DIR": str(tmp_path), "FIXLOOP__MES__URL": mes_receiver.url,
           "FIXLOOP__MES__SECRETS": f'["{MES_SECRET}"]'}
    fixloop.env(env)
    config = load_config(env=env)
    return fixloop, WorkOrderStore(config.state_path(config.work_orders.store_file))


def _order(store: WorkOrderStore, fault: str = "E102"):
    return store.create_or_get(device_id="press-3", fault_code=fault, title=f"Hydraulic press 3 {fault}: overheating",
                               summary="motor overheating", priority="high", created_by="technician", run_id="run-1",
                               evidence=({"kind": "sensor", "sensor": "motor_temp", "value": 92.1},))[0]


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
