"""Run records queried from the shell (`fixloop runs`), and the session summary built from them."""

from __future__ import annotations

import json

import pytest

from edge.run.sessions import MAX_LINES, session_context
from edge.run.store import RunFilter, RunStore
from tests.fixtures.service import E102, run_service

COOLANT = "What is the coolant level on cnc-7 right now?"


@pytest.fixture(scope="module")
def budget_service(tmp_path_factory, demo_index):
    """A step budget of 3: the E102 flow (5 steps) hits it, a plain reading does not."""
    with run_service(tmp_path_factory.mktemp("runs-cli"), demo_index, loop={"max_steps": 3}) as running:
        running.budget_run = running.ask(E102, "press-3")
        running.answered_run = running.ask(COOLANT)
        yield running


@pytest.fixture
def cli(budget_service, fixloop):
    fixloop.env({"FIXLOOP_STATE_DIR": budget_service.config.state_dir})
    return fixloop


def test_runs_list_filters_runs_that_hit_the_step_budget(budget_service, cli):
    code, out, _ = cli("runs", "list", "--reason", "max_steps", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [row["run_id"] for row in rows] == [budget_service.budget_run.run_id]
    assert rows[0]["steps"] == 3 and rows[0]["fault_codes"] == ["E102"]

    code, out, _ = cli("runs", "list", "--device", "cnc-7", "--json")
    assert [json.loads(line)["run_id"] for line in out.splitlines()] == [budget_service.answered_run.run_id]

    code, out, _ = cli("runs", "list")
    assert code == 0 and budget_service.budget_run.run_id in out and "max_steps" in out


def test_runs_codes_ranks_codes_by_steps(cli):
    code, out, _ = cli("runs", "codes", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert rows[0]["fault_code"] == "E102" and rows[0]["mean_steps"] == 3 and rows[0]["not_answered"] == 1


def test_runs_show_prints_the_trace_and_the_stop_reason(budget_service, cli):
    code, out, _ = cli("runs", "show", budget_service.budget_run.run_id)
    assert code == 0
    assert E102 in out and "stop: max_steps" in out and "search_maintenance_manual_by_fault_code" in out

    code, out, _ = cli("runs", "show", budget_service.budget_run.run_id, "--json")
    assert json.loads(out)["record"]["termination"]["reason"] == "max_steps"


def test_runs_show_of_an_unknown_run_fails_and_bad_filters_are_named(cli, capsys):
    code, _, err = cli("runs", "show", "run-000000000000")
    assert code == 1 and err.startswith("fixloop runs show: no run 'run-000000000000' in ")
    with pytest.raises(SystemExit) as exit_info:
        cli("runs", "list", "--since", "yesterday")
    assert exit_info.value.code == 2
    assert "'yesterday' is not a duration" in capsys.readouterr().err


def test_the_session_summary_is_short_and_keeps_the_latest_lines(budget_service):
    store = RunStore(budget_service.config.state_path(budget_service.config.service.run_store_file))
    record = store.get(budget_service.budget_run.run_id)

    context = session_context([record])
    assert context.device_id == "press-3" and context.fault_codes == ["E102"]
    assert context.summary[0] == f"Asked (press-3): {E102}"
    assert context.summary[1].startswith(
        "search_maintenance_manual_by_fault_code(fault_code=E102, device_id=press-3) -> ok: E102 "
    )
    assert ", p. " in context.summary[1]

    many = session_context([record] * 5)
    assert len(many.summary) == MAX_LINES and many.summary[-1] == context.summary[-1]
    assert store.list(RunFilter(session_id=record.session_id))[0].run_id == record.run_id
