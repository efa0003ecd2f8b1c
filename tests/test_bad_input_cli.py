"""Bad input from the shell (issue 35, item 7): stored text printed by `fixloop ask`, `fixloop runs show` and
`fixloop work-orders` shows its control characters instead of obeying them, names and questions that show
nothing are refused naming the option, and the isolation rule a service recorded binds the CLI."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from edge.config import load_config
from tests.fixtures.service import run_service
from tools.plc.simulator import start_simulator
from tools.work_orders.model import Fix
from tools.work_orders.store import WorkOrderStore

ESC = "\x1b"
OPEN_E102 = "Open a work order for press-3, fault E102, motor overheating"
# Clears the screen, retitles the window, then overwrites the line: what a terminal would do with it.
ATTACK = "\x1b[2J\x1b]0;owned\x07\rall clear\x9b1m"


@pytest.fixture
def state(tmp_path, demo_index):
    shutil.copy(demo_index, tmp_path / "manuals.sqlite")
    return tmp_path


@pytest.fixture
def cli(state, fixloop):
    sim = start_simulator(load_config(env={}).devices, "127.0.0.1", 0)
    fixloop.env(
        {
            "FIXLOOP_STATE_DIR": str(state),
            "FIXLOOP__DEVICES__PRESS-3__PLC__PORT": str(sim.port),
            "FIXLOOP__DEVICES__CNC-7__PLC__PORT": str(sim.port),
        }
    )
    yield fixloop
    sim.stop()


def _store(state) -> WorkOrderStore:
    return WorkOrderStore(state / "work_orders.sqlite")


def _order(store: WorkOrderStore, fault: str = "E102", status: str = "acknowledged"):
    order, _ = store.create_or_get(
        device_id="press-3",
        fault_code=fault,
        title="Hydraulic press 3 E102: [/] overheating",
        summary="motor overheating [bold]",
        priority="high",
        created_by="technician",
        run_id="run-1",
    )
    for step in ("acknowledged", "in_progress", "done")[: ("acknowledged", "in_progress", "done").index(status) + 1]:
        store.set_status(order.id, step, "technician", Fix(cause="fan", remedy="cleaned") if step == "done" else None)
    return order


def _raw(store: WorkOrderStore, sql: str, *params) -> None:
    """Text as stored before control characters were stripped on the way in, or by another writer."""
    con = sqlite3.connect(store.path)
    with con:
        con.execute(sql, params)
    con.close()


def _shown(out: str) -> None:
    assert ESC not in out and "\x07" not in out and "\r" not in out and "\x9b" not in out
    assert "␛[2J␛]0;owned␇␍all clear<U+009B>1m" in out


# -- stored text on the terminal ----------------------------------------------------------------------------


def test_ask_prints_a_stored_escape_as_text(cli, state):
    store = _store(state)
    fixed = _order(store, status="done")
    _raw(store, "UPDATE work_orders SET remedy = ?, closed_by = ? WHERE id = ?", f"cleaned {ATTACK}", ATTACK, fixed.id)

    code, out, err = cli("ask", OPEN_E102)
    assert code == 0, err
    assert "Last fix on this machine" in out
    _shown(out)


def test_runs_show_prints_a_stored_escape_as_text(tmp_path, demo_index, fixloop):
    with run_service(tmp_path, demo_index) as running:
        fixed = _order(running.service.work_orders, status="done")
        _raw(running.service.work_orders, "UPDATE work_orders SET remedy = ? WHERE id = ?", ATTACK, fixed.id)
        run = running.ask(OPEN_E102, "press-3")
    fixloop.env({"FIXLOOP_STATE_DIR": str(tmp_path)})
    code, out, err = fixloop("runs", "show", run.run_id)
    assert code == 0, err
    assert "Last fix on this machine" in out
    _shown(out)


def test_work_orders_show_and_list_print_stored_controls_and_brackets_as_text(cli, state):
    store = _store(state)
    order = _order(store)
    _raw(
        store,
        "UPDATE work_orders SET summary = ?, isolation_confirmed_at = 'x', isolation_confirmed_by = ? WHERE id = ?",
        f"motor {ATTACK}",
        ATTACK,
        order.id,
    )
    _raw(
        store,
        "INSERT INTO checklist_ticks (client_tick_id, work_order_id, step_key, text, done, by, at) "
        "VALUES ('tick-raw-0001', ?, 'step:1', ?, 1, ?, '2026-01-01T00:00:00Z')",
        order.id,
        f"Stop {ATTACK}",
        "\u200b",
    )

    code, out, err = cli("work-orders", "show", order.id)
    assert code == 0, err
    _shown(out)
    assert "Hydraulic press 3 E102: [/] overheating" in out  # markup in stored text is text

    code, out, err = cli("work-orders", "list")
    assert code == 0, err
    assert ESC not in out and "\x07" not in out and "\r" not in out


def test_outbox_prints_the_mes_error_text_as_text(cli, state):
    store = _store(state)
    _order(store)
    row = store.outbox()[0]
    store.record_attempt(
        row.row_id, status="failed", next_attempt_at=0, status_code=500, error=f"HTTP 500: {ATTACK} [/]", now=0
    )
    code, out, err = cli("outbox")
    assert code == 0, err
    _shown(out)
    assert "[/]" in out


# -- names and questions that show nothing ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, message",
    [
        ("\u200b", "--by: a name needs a visible character; this one has none (U+200B)"),
        ("\u3164 ", "--by: a name needs a visible character"),
        ("\u202eOps", "--by: a name must not contain bidirectional control characters (U+202E)"),
        ("Ops\x1b[8m", "--by: a name must not contain control characters (U+001B)"),
    ],
)
def test_set_status_refuses_a_name_that_hides_or_reorders_itself(cli, state, name, message):
    order = _order(_store(state))
    code, _, err = cli("work-orders", "set-status", order.id, "in_progress", "--isolation-confirmed", "--by", name)
    assert code == 2 and message in err
    assert _store(state).get(order.id).status == "acknowledged"


def test_ask_refuses_a_question_that_shows_nothing(cli):
    code, out, err = cli("ask", " \u200b\t")
    assert code == 2 and "question is blank: it has no visible character" in err and out == ""


# -- the isolation rule is the plant's, not one config's ---------------------------------------------------


def test_a_rule_the_service_recorded_binds_the_cli_whatever_its_config(tmp_path, demo_index, fixloop):
    with run_service(tmp_path, demo_index, work_orders={"require_isolation": True}) as running:
        order = _order(running.service.work_orders)
        # A shell with the demo config: `require_isolation = false`, the service's file.
        fixloop.env({"FIXLOOP_STATE_DIR": str(tmp_path)})
        code, _, err = fixloop("work-orders", "set-status", order.id, "in_progress")
        assert code == 2 and "this plant requires isolation" in err and "require_isolation" in err
        assert running.service.work_orders.get(order.id).status == "acknowledged"

        code, out, _ = fixloop("work-orders", "isolation-rule")
        assert code == 0 and "isolation rule: on since" in out

        code, _, err = fixloop("work-orders", "isolation-rule", "off")
        assert code == 2 and "--by: who turns the isolation rule off" in err
        code, out, _ = fixloop("work-orders", "isolation-rule", "off", "--by", "Plant admin")
        assert code == 0 and "turned off by Plant admin" in out and "isolation rule: off" in out
        assert running.service.work_orders.isolation_rule() is None
        code, out, err = fixloop("work-orders", "set-status", order.id, "in_progress")
        assert code == 0, err


def test_the_rule_is_turned_on_by_name_and_kept_while_a_config_requires_it(cli, state, fixloop):
    order = _order(_store(state))
    code, _, err = cli("work-orders", "isolation-rule", "on", "--by", "\u2067Ops")
    assert code == 2 and "--by: a name must not contain bidirectional control characters" in err
    code, out, err = cli("work-orders", "isolation-rule", "on", "--by", "J. Weber")
    assert code == 0 and "by J. Weber" not in out and "(J. Weber)" in out, err
    code, _, err = cli("work-orders", "set-status", order.id, "in_progress")
    assert code == 2 and "this plant requires isolation" in err and "J. Weber" in err

    fixloop.env({"FIXLOOP__WORK_ORDERS__REQUIRE_ISOLATION": "true"})
    code, _, err = cli("work-orders", "isolation-rule", "off", "--by", "J. Weber")
    assert code == 2 and "require_isolation = true in" in err and "set it to false there" in err
    assert _store(state).isolation_rule() is not None
