"""Past fixes: closing an order records what was found and done; a recurring fault's work-order
observation carries the last fixes (this machine, then same-model machines) and the root-cause flag."""

from __future__ import annotations

import json
import sqlite3

import pytest
from pydantic import ValidationError

from edge.config import load_config
from tests.fixtures.work_orders import take_to
from tools.contract import ToolContext
from tools.registry import ToolRegistry
from tools.work_orders.config import WorkOrderConfig
from tools.work_orders.history import RECURRENCE_ORDERS, RECURRENCE_WINDOW_DAYS, same_model
from tools.work_orders.model import Fix, Part, WorkOrderError
from tools.work_orders.store import PAST_FIXES_SQL, RECENT_ORDERS_SQL, WorkOrderStore
from tools.work_orders.tool import WorkOrderTool

DAY = 86400.0
START = 1_772_000_000.0  # 2026-02-25


class Clock:
    def __init__(self, now: float = START):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, clock) -> WorkOrderStore:
    return WorkOrderStore(tmp_path / "work_orders.sqlite", clock=clock)


@pytest.fixture
def devices():
    """The demo plant plus press-4, a second machine of press-3's vendor and model."""
    plant = load_config(env={}).devices
    press_4 = plant["press-3"].model_copy(
        update={"id": "press-4", "name": "Hydraulic press 4", "name_zh": "4号液压机", "synonyms": []}
    )
    return {**plant, "press-4": press_4}


def _open(store: WorkOrderStore, device: str = "press-3", fault: str = "E102"):
    order, created = store.create_or_get(
        device_id=device,
        fault_code=fault,
        title=f"{device} {fault}",
        summary="motor overheating",
        priority="high",
        created_by="technician",
        run_id="run-1",
    )
    assert created
    return order


def _fixed(
    store: WorkOrderStore,
    clock: Clock,
    device: str = "press-3",
    fault: str = "E102",
    cause: str = "",
    days_later: float = 1.0,
):
    """An order opened now and closed as done with `cause`; the clock then moves on `days_later`."""
    order = take_to(
        store, _open(store, device, fault), "done", Fix(cause=cause or f"cause on {device}", remedy="repaired")
    )
    clock.now += days_later * DAY
    return order


def _history(store: WorkOrderStore, device: str = "press-3", fault: str = "E102", peers=("press-4",), limit=3):
    return store.fix_history(device, fault, same_model=list(peers), limit=limit, window_s=RECURRENCE_WINDOW_DAYS * DAY)


# -- closing records the fix -------------------------------------------------------------------------


def test_closing_records_cause_remedy_parts_note_and_who_closed_it_when(store, clock):
    order = _open(store)
    clock.now += 3600
    fix = Fix(
        cause=" coolant filter clogged ",
        remedy="replaced the filter, flushed the circuit",
        parts=[Part(part="FLT-200 filter", quantity=1), Part(part="coolant", quantity=12.5), Part(part="O-ring")],
        note="filter was two months overdue",
    )
    closed = take_to(store, order, "done", fix)

    assert (
        closed.status == "done" and closed.closed_at == "2026-02-25T07:13:20.000Z" and closed.closed_by == "technician"
    )
    assert (closed.cause, closed.remedy, closed.note) == (
        "coolant filter clogged",
        "replaced the filter, flushed the circuit",
        "filter was two months overdue",
    )
    assert [part.label() for part in closed.parts] == ["FLT-200 filter ×1", "coolant ×12.5", "O-ring"]
    assert store.get(order.id) == closed
    # The MES hears of the close with the fix in it.
    (row,) = [r for r in store.outbox() if r.webhook_id == f"msg_{order.id}_done"]
    data = json.loads(row.body)["data"]
    assert data["cause"] == "coolant filter clogged" and data["parts"][1] == {"part": "coolant", "quantity": 12.5}


def test_closing_without_a_fix_is_still_allowed_and_stamps_when_and_who(store):
    order = _open(store)
    cancelled = store.set_status(order.id, "cancelled", actor="operator")
    assert (cancelled.closed_by, cancelled.cause, cancelled.parts) == ("operator", None, [])
    assert cancelled.closed_at == cancelled.updated_at
    # Moves that close nothing leave the close fields empty.
    other = store.set_status(_open(store, fault="F03").id, "acknowledged", actor="technician")
    assert other.closed_at is None and other.closed_by is None


def test_a_fix_on_a_move_that_closes_nothing_is_refused_and_changes_nothing(store):
    order = _open(store)
    with pytest.raises(
        WorkOrderError,
        match=r"recorded when an order is closed .done or cancelled., not when it "
        "moves to acknowledged",
    ):
        store.set_status(order.id, "acknowledged", actor="technician", fix=Fix(cause="loose cable"))
    assert store.get(order.id) == order and len(store.outbox()) == 1
    # Blank fields are "not recorded", as a form sends them: no fix, so the move is fine.
    assert (
        store.set_status(order.id, "acknowledged", actor="technician", fix=Fix(cause="  ", remedy="", note=None)).status
        == "acknowledged"
    )


@pytest.mark.parametrize(
    ("fix", "where", "message"),
    [
        ({"parts": [{"part": "  "}]}, ("parts", 0, "part"), "is blank: it has no visible character"),
        (
            {"parts": [{"part": "bearing", "quantity": 0}]},
            ("parts", 0, "quantity"),
            "quantity must be a positive number",
        ),
        ({"parts": [{"part": "bearing", "quantity": float("nan")}]}, ("parts", 0, "quantity"), "positive number"),
        ({"cause": "x" * 2001}, ("cause",), "at most 2000 characters"),
        ({"remedy": "replaced", "colour": "red"}, ("colour",), "Extra inputs are not permitted"),
    ],
)
def test_a_bad_fix_names_the_field(fix, where, message):
    with pytest.raises(ValidationError) as caught:
        Fix.model_validate(fix)
    (error,) = caught.value.errors()
    assert error["loc"] == where and message in error["msg"]


def test_an_old_database_gains_the_fix_columns_in_place(tmp_path, clock):
    path = tmp_path / "work_orders.sqlite"
    con = sqlite3.connect(path)  # the table as the previous release left it
    con.executescript("""
        CREATE TABLE work_orders (id TEXT PRIMARY KEY, device_id TEXT NOT NULL, fault_code TEXT NOT NULL,
            fault_key TEXT NOT NULL, title TEXT NOT NULL, summary TEXT NOT NULL, priority TEXT NOT NULL,
            status TEXT NOT NULL, created_by TEXT NOT NULL, source_run_id TEXT NOT NULL, occurrence TEXT NOT NULL,
            alarm TEXT, evidence TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
        CREATE INDEX work_orders_by_fault_key ON work_orders (device_id, fault_key);
        INSERT INTO work_orders VALUES ('WO-OLD1', 'press-3', 'E102', 'E102', 't', 's', 'high', 'in_progress',
            'technician', 'run-0', 'episode:1', NULL, '[]', '2026-02-20T08:00:00.000Z', '2026-02-20T08:00:00.000Z');
        PRAGMA user_version = 1;
    """)
    con.close()

    store = WorkOrderStore(path, clock=clock)
    old = store.get("WO-OLD1")
    assert old.status == "in_progress" and old.closed_at is None and old.parts == []
    closed = store.set_status(
        "WO-OLD1", "done", actor="technician", fix=Fix(cause="worn seal", parts=[{"part": "seal"}])
    )
    assert closed.cause == "worn seal" and _history(store).same_device == [closed]
    # Opening it again changes nothing; the history's indexes replace the old one.
    WorkOrderStore(path, clock=clock)
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA user_version").fetchone() == (4,)  # fix history, isolation, reports' trust
        assert con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'work_orders_%' ORDER BY name"
        ).fetchall() == [("work_orders_by_fault_time",), ("work_orders_fixes",), ("work_orders_one_active_key",)]
        assert [row[1] for row in con.execute("PRAGMA table_info(work_orders)")][-9:-3] == [
            "closed_at",
            "closed_by",
            "cause",
            "remedy",
            "parts",
            "note",
        ]
    finally:
        con.close()


# -- the past-fix query ----------------------------------------------------------------------------


def test_past_fixes_are_this_machines_then_same_model_machines_for_the_same_code(store, clock):
    mine = _fixed(store, clock, cause="fan blocked")
    spelled = _fixed(store, clock, fault="E-102", cause="filter clogged")  # one fault, however it is written
    _fixed(store, clock, fault="E103")  # another code
    _fixed(store, clock, device="cnc-7")  # the same code on a machine of another model
    peer = _fixed(store, clock, device="press-4", cause="worn pump seal")
    take_to(store, _open(store), "cancelled")  # cancelled: nothing was fixed
    _open(store)  # still open

    history = _history(store, fault="e102")
    assert [o.id for o in history.same_device] == [spelled.id, mine.id]
    assert [o.id for o in history.same_model] == [peer.id]
    assert history.same_model[0].cause == "worn pump seal"
    # Without same-model machines only this machine's fixes count.
    assert _history(store, peers=()).same_model == []


def test_past_fixes_are_the_newest_closed_first_up_to_the_limit(store, clock):
    orders = []
    for _ in range(5):  # opened in this order, each closed before the next opens
        orders.append(_fixed(store, clock, days_later=0.5))
    history = _history(store, limit=3)
    assert [o.id for o in history.same_device] == [o.id for o in reversed(orders)][:3]
    assert [o.closed_at for o in history.same_device] == sorted((o.closed_at for o in orders), reverse=True)[:3]


@pytest.mark.parametrize(
    ("sql", "args"), [(PAST_FIXES_SQL, ("E102", "press-3", 3)), (RECENT_ORDERS_SQL, ("press-3", "E102", "2026-01-01"))]
)
def test_the_history_queries_search_an_index_and_sort_nothing(store, sql, args):
    # Their cost stays flat however long a chronic fault's history grows (scripts/bench_past_fixes.py).
    con = sqlite3.connect(store.path)
    try:
        plan = " ".join(row[3] for row in con.execute("EXPLAIN QUERY PLAN " + sql, args))
    finally:
        con.close()
    assert plan.startswith("SEARCH work_orders USING") and "TEMP B-TREE" not in plan and "SCAN" not in plan, plan


def test_same_model_means_the_same_vendor_and_model(devices):
    assert same_model(devices, "press-3") == ["press-4"]
    assert same_model(devices, "cnc-7") == []
    other_vendor = {**devices, "press-4": devices["press-4"].model_copy(update={"vendor": "Acme"})}
    assert same_model(other_vendor, "press-3") == []


# -- the work-order tool's observation -------------------------------------------------------------


def _call(store, devices, clock, *, confirmation=False, fault="E102", obs_id="obs-1"):
    registry = ToolRegistry([WorkOrderTool(store, devices, WorkOrderConfig(require_confirmation=confirmation))])
    args = {"device_id": "press-3", "fault_code": fault, "summary": "motor overheating, motor_temp 92 °C"}
    ctx = ToolContext(request_id="req-1", run_id="run-9", loop_step=1, actor="technician")
    return registry.call("generate_work_order", args, ctx, obs_id)


def test_the_observation_carries_the_order_then_the_flag_then_past_fixes(store, devices, clock):
    peer = _fixed(store, clock, device="press-4", cause="worn pump seal")
    older = _fixed(store, clock, cause="filter clogged")
    newer = take_to(
        store,
        _open(store),
        "done",
        Fix(cause="fan blocked", remedy="cleaned the fan", parts=[Part(part="fan guard", quantity=2)]),
    )
    clock.now += DAY

    obs = _call(store, devices, clock)
    order, flag, *fixes = obs.content
    assert obs.status == "ok" and obs.dropped_fields == []
    assert order.fields["created"] is True and order.fields["work_order_status"] == "open"
    assert flag.fields == {
        "device_id": "press-3",
        "fault_code": "E102",
        "recent_orders": 3,
        "window_days": 30,
        "root_cause_candidate": True,
    }
    assert [(f.fields["past_work_order_id"], f.fields["same_device"]) for f in fixes] == [
        (newer.id, True),
        (older.id, True),
        (peer.id, False),
    ]
    assert fixes[0].fields | {"closed_at": None} == {
        "past_work_order_id": newer.id,
        "provenance": "recorded",
        "device_id": "press-3",
        "fault_code": "E102",
        "same_device": True,
        "closed_at": None,
        "cause": "fan blocked",
        "remedy": "cleaned the fan",
        "parts": ["fan guard ×2"],
        "note": None,
    }
    assert fixes[0].fields["closed_at"] == newer.closed_at
    assert fixes[2].fields["device_id"] == "press-4"


def test_a_first_fault_carries_no_history(store, devices, clock):
    obs = _call(store, devices, clock)
    (order,) = obs.content
    assert order.fields["created"] is True


@pytest.mark.parametrize(
    ("earlier_days_ago", "flagged"),
    [
        ((20, 10), True),  # three orders within 30 days, this one included
        ((10,), False),  # two
        ((31, 10), False),  # three, but the first is older than the window
    ],
)
def test_a_fault_is_a_root_cause_candidate_at_three_orders_in_thirty_days(
    store, devices, clock, earlier_days_ago, flagged
):
    now = clock.now
    for days_ago in earlier_days_ago:
        clock.now = now - days_ago * DAY
        take_to(store, _open(store), "cancelled")  # any order counts as an occurrence, fixed or not
    clock.now = now
    obs = _call(store, devices, clock)
    assert any(item.fields.get("root_cause_candidate") for item in obs.content) is flagged
    assert RECURRENCE_ORDERS == 3 and RECURRENCE_WINDOW_DAYS == 30


def test_a_proposal_awaiting_confirmation_counts_as_an_occurrence_and_carries_the_fixes(store, devices, clock):
    first = _fixed(store, clock)
    _fixed(store, clock)
    obs = _call(store, devices, clock, confirmation=True)
    proposal, flag, *fixes = obs.content
    assert proposal.fields["work_order_status"] == "pending_confirmation" and "work_order_id" not in proposal.fields
    assert flag.fields["recent_orders"] == 3
    assert fixes[-1].fields["past_work_order_id"] == first.id
    assert len(store.list()) == 2  # the proposal wrote nothing


def test_an_order_closed_before_the_quantity_bounds_still_reads_back(tmp_path):
    store = WorkOrderStore(tmp_path / "orders.sqlite")
    order, _ = store.create_or_get(
        device_id="press-3",
        fault_code="E102",
        title="t",
        summary="s",
        priority="medium",
        created_by="technician",
        run_id="run-1",
    )
    with sqlite3.connect(store.path) as con:  # as a release without the bounds stored it
        con.execute("UPDATE work_orders SET parts = ? WHERE id = ?", ('[{"part": "oil", "quantity": 1e308}]', order.id))
    assert [p.quantity for p in store.get(order.id).parts] == [1e308]


def test_an_old_databases_reported_fixes_become_one_per_person_and_stay_unverified(tmp_path, clock):
    path = tmp_path / "work_orders.sqlite"
    WorkOrderStore(path, clock=clock)
    con = sqlite3.connect(path)  # reported fixes as the previous release kept them: one per answer
    con.executescript("""
        DROP TABLE reported_fixes;
        CREATE TABLE reported_fixes (id TEXT PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, device_id TEXT NOT NULL,
            fault_code TEXT NOT NULL, fault_key TEXT NOT NULL, remedy TEXT NOT NULL, closed_at TEXT NOT NULL,
            closed_by TEXT NOT NULL);
        CREATE INDEX reported_fixes_by_fault ON reported_fixes (fault_key, device_id, closed_at, id);
        INSERT INTO reported_fixes VALUES ('FB-run-1', 'run-1', 'press-3', 'E102', 'E102', 'reseated the plug',
            '2026-02-20T08:00:00.000Z', 'Ana');
        PRAGMA user_version = 3;
    """)
    con.close()

    store = WorkOrderStore(path, clock=clock)
    [old] = _history(store).same_device
    assert (old.id, old.closed_by, old.confirmed_by) == ("FB-run-1", "Ana", None)
    second = store.report_fix(run_id="run-1", device_id="press-3", fault_code="E102", remedy="new fan", actor="Bo")
    assert second.id == "FB-run-1-2"
    assert {fix.id for fix in _history(store).same_device} == {"FB-run-1", "FB-run-1-2"}
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA user_version").fetchone() == (4,)
        assert con.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'reported_fixes%' ORDER BY name"
        ).fetchall() == [
            ("reported_fixes",),
            ("reported_fixes_by_fault",),
        ]
    finally:
        con.close()
