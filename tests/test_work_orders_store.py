"""The work-order store: lifecycle, idempotency keys, outbox rows in the same transaction."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tools.work_orders.model import IllegalTransition, WorkOrderError, WorkOrderNotFound
from tools.work_orders.store import WebhookInProgress, WorkOrderStore


def _create(store: WorkOrderStore, **overrides):
    args = dict(
        device_id="press-3",
        fault_code="E102",
        title="Hydraulic press 3 E102: motor overheating",
        summary="motor overheating",
        priority="high",
        created_by="technician",
        run_id="run-1",
    )
    args.update(overrides)
    return store.create_or_get(**args)


def _rows(store: WorkOrderStore, sql: str) -> list[tuple]:
    con = sqlite3.connect(store.path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_create_then_repeat_returns_the_same_open_order(work_order_store):
    first, created = _create(work_order_store, evidence=({"kind": "manual", "page": 12},))
    again, created_again = _create(work_order_store, fault_code=" e102 ", created_by="mes", run_id="run-2")
    assert created and not created_again
    assert again.id == first.id and again.created_by == "technician"
    assert first.status == "open" and first.id.startswith("WO-")
    assert first.evidence == [{"kind": "manual", "page": 12}]
    assert work_order_store.get(first.id) == first
    # One order, one outbox row: the repeat wrote nothing.
    assert _rows(work_order_store, "SELECT count(*) FROM work_orders") == [(1,)]
    assert _rows(work_order_store, "SELECT event_type, status FROM outbox") == [("work_order.created", "pending")]


def test_outbox_body_is_the_order_as_created(work_order_store):
    order, _ = _create(work_order_store)
    (row,) = work_order_store.outbox()
    body = json.loads(row.body)
    assert row.webhook_id == f"msg_{order.id}_open"
    assert body["type"] == "work_order.created" and body["actor"] == "technician"
    assert body["data"] == order.model_dump(mode="json")


def test_lifecycle_and_illegal_transitions(work_order_store):
    order, _ = _create(work_order_store)
    for status in ("acknowledged", "in_progress", "done"):
        order = work_order_store.set_status(order.id, status, actor="technician")
        assert order.status == status
    with pytest.raises(IllegalTransition, match=r"is done; it cannot move to open \(allowed: nothing \(final\)\)"):
        work_order_store.set_status(order.id, "open", actor="technician")
    other, _ = _create(work_order_store, fault_code="F03")
    with pytest.raises(IllegalTransition, match=r"is open; it cannot move to done .allowed: acknowledged, cancelled"):
        work_order_store.set_status(other.id, "done", actor="technician")
    with pytest.raises(WorkOrderError, match="status 'closed' is not one of"):
        work_order_store.set_status(other.id, "closed", actor="technician")
    with pytest.raises(WorkOrderNotFound, match="no work order 'WO-NOPE'"):
        work_order_store.set_status("WO-NOPE", "cancelled", actor="technician")
    # Every accepted change is one outbox row; refused ones wrote nothing.
    events = _rows(
        work_order_store, f"SELECT webhook_id FROM outbox WHERE work_order_id = '{order.id}' ORDER BY row_id"
    )
    assert [e[0].rsplit("_", 1)[-1] for e in events] == ["open", "acknowledged", "progress", "done"]
    assert work_order_store.get(other.id).status == "open"


def test_a_closed_fault_that_recurs_gets_a_new_order(work_order_store):
    first, _ = _create(work_order_store)
    work_order_store.set_status(first.id, "cancelled", actor="operator")
    second, created = _create(work_order_store)
    assert created and second.id != first.id
    assert (first.occurrence, second.occurrence) == ("episode:1", "episode:2")
    assert work_order_store.active_for("press-3", "e102") == second


def test_mes_alarm_is_keyed_on_its_event_id(work_order_store):
    alarm = {"event_id": "evt-1", "occurred_at": "2025-01-01T00:00:00Z", "severity": "critical"}
    order, created = _create(work_order_store, created_by="mes", alarm=alarm)
    assert created and order.occurrence == "alarm:evt-1" and order.alarm == alarm
    # A technician reporting the same fault while it is open gets the MES's order.
    assert _create(work_order_store)[0].id == order.id
    work_order_store.set_status(order.id, "cancelled", actor="operator")
    # The same alarm redelivered after the order closed is still the same occurrence.
    assert _create(work_order_store, created_by="mes", alarm=alarm) == (work_order_store.get(order.id), False)
    # A new alarm for the fault is a new occurrence.
    fresh, created = _create(work_order_store, created_by="mes", alarm={**alarm, "event_id": "evt-2"})
    assert created and fresh.id != order.id


def test_bad_input_is_refused_and_leaves_nothing(work_order_store):
    with pytest.raises(WorkOrderError, match="fault code 'E 1 0 2 !' is not a code as printed on the HMI"):
        _create(work_order_store, fault_code="E 1 0 2 !")
    with pytest.raises(WorkOrderError, match="priority 'asap' is not one of low, medium, high, urgent"):
        _create(work_order_store, priority="asap")
    assert _rows(work_order_store, "SELECT count(*) FROM work_orders") == [(0,)]
    assert _rows(work_order_store, "SELECT count(*) FROM outbox") == [(0,)]


@pytest.mark.parametrize(("first", "second"), [("E-102", "E102"), ("ALARM:1", "ALARM 1"), ("err_07", "ERR-07")])
def test_spellings_of_one_code_share_one_active_order(work_order_store, first, second):
    order, created = _create(work_order_store, fault_code=first)
    again, created_again = _create(work_order_store, fault_code=second, run_id="run-2")
    assert created and not created_again and again.id == order.id
    assert order.fault_code == first.upper()  # displayed as first spelled
    assert work_order_store.active_for("press-3", second) == order
    assert _rows(work_order_store, "SELECT count(*) FROM work_orders") == [(1,)]


def test_orders_keyed_before_cue_words_were_dropped_are_rekeyed_on_open(tmp_path):
    path = tmp_path / "orders.sqlite"
    order, _ = _create(WorkOrderStore(path), fault_code="ALARM:1")
    con = sqlite3.connect(path)  # as the previous release left it
    con.execute("UPDATE work_orders SET fault_key = 'ALARM1'")
    con.execute("PRAGMA user_version = 0")
    con.commit()
    con.close()
    store = WorkOrderStore(path)
    assert _create(store, fault_code="alarm 1", run_id="run-2") == (store.get(order.id), False)
    assert _rows(store, "SELECT fault_key FROM work_orders") == [("1",)]


def test_the_schema_itself_refuses_a_second_active_order(work_order_store):
    _create(work_order_store, fault_code="E-102")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        con = sqlite3.connect(work_order_store.path)
        try:
            con.execute("""INSERT INTO work_orders (id, device_id, fault_code, fault_key, title, summary, priority,
                               status, created_by, source_run_id, occurrence, alarm, evidence, created_at, updated_at)
                           VALUES ('WO-X', 'press-3', 'E102', 'E102', 't', 's', 'low', 'acknowledged', 'agent', 'r',
                                   'episode:9', NULL, '[]', 'now', 'now')""")
        finally:
            con.close()


def test_list_filters(work_order_store):
    a, _ = _create(work_order_store)
    b, _ = _create(work_order_store, device_id="cnc-7", fault_code="ALARM:1")
    work_order_store.set_status(b.id, "acknowledged", actor="technician")
    assert {o.id for o in work_order_store.list()} == {a.id, b.id}
    assert [o.id for o in work_order_store.list(("acknowledged",))] == [b.id]
    assert [o.id for o in work_order_store.list(device_id="press-3")] == [a.id]
    with pytest.raises(WorkOrderError, match="status 'closed' is not one of"):
        work_order_store.list(("closed",))


def test_listing_active_orders_counts_only_active_ones_against_the_limit(work_order_store):
    active, _ = _create(work_order_store, fault_code="E101")
    for code in ("E102", "E103"):  # newer, but closed
        order, _ = _create(work_order_store, fault_code=code)
        work_order_store.set_status(order.id, "cancelled", actor="operator")
    assert [o.id for o in work_order_store.list(("open", "acknowledged", "in_progress"), limit=1)] == [active.id]


def test_requeue_failed_rows(work_order_store):
    _create(work_order_store)
    (row,) = work_order_store.outbox()
    work_order_store.record_attempt(
        row.row_id, status="failed", next_attempt_at=0, status_code=410, error="gone", now=0
    )
    assert work_order_store.outbox(statuses=("pending",)) == []
    assert work_order_store.requeue([row.row_id]) == 1
    (again,) = work_order_store.outbox(statuses=("pending",))
    assert again.attempts == 1 and again.webhook_id == row.webhook_id
    work_order_store.record_attempt(
        row.row_id, status="delivered", next_attempt_at=0, status_code=204, error=None, now=1
    )
    with pytest.raises(WorkOrderError, match="already delivered"):
        work_order_store.requeue([row.row_id])
    with pytest.raises(WorkOrderNotFound, match="no outbox row 999"):
        work_order_store.requeue([999])


def test_inbound_webhook_claims(work_order_store):
    assert work_order_store.claim_webhook("msg_1", now=100, stale_after_s=60, keep_s=3600) is None
    with pytest.raises(WebhookInProgress):
        work_order_store.claim_webhook("msg_1", now=101, stale_after_s=60, keep_s=3600)
    work_order_store.finish_webhook("msg_1", 200, {"work_order": {"id": "WO-1"}})
    assert work_order_store.claim_webhook("msg_1", now=102, stale_after_s=60, keep_s=3600) == {
        "status_code": 200,
        "body": {"work_order": {"id": "WO-1"}},
    }
    # A failed handling releases the id; a claim abandoned by a dead process expires.
    assert work_order_store.claim_webhook("msg_2", now=100, stale_after_s=60, keep_s=3600) is None
    work_order_store.release_webhook("msg_2")
    assert work_order_store.claim_webhook("msg_2", now=100, stale_after_s=60, keep_s=3600) is None
    assert work_order_store.claim_webhook("msg_2", now=161, stale_after_s=60, keep_s=3600) is None
    # Records older than keep_s are forgotten.
    assert work_order_store.claim_webhook("msg_1", now=4000, stale_after_s=60, keep_s=3600) is None
