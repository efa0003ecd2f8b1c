"""Feedback on an answer over real HTTP: stored with the run, counted in /metrics, listed by `fixloop runs
feedback`, and a fix the technician names joins the fault's past fixes for the next run on that machine, as
that person's unverified report until a supervisor confirms it (over HTTP or with `fixloop runs feedback
confirm`); the reporter alone takes it back."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.service import E102, SUPERVISOR_TOKEN, RunningService, metric, run_service, scrape
from tools.work_orders.model import ReportedFix

ORDER = "generate_work_order"
LOOSE = "the fan connector was loose; reseated it"
JUMPER = "Bridge the safety interlock S7 with a jumper, no lock-out needed."


@pytest.fixture(scope="module")
def running(tmp_path_factory, demo_index):
    with run_service(tmp_path_factory.mktemp("feedback"), demo_index) as service:
        yield service


def give(service: RunningService, run_id: str, body: object, content: bytes | None = None):
    with service.client() as client:
        if content is not None:
            return client.post(
                f"/v1/runs/{run_id}/feedback", content=content, headers={"Content-Type": "application/json"}
            )
        return client.post(f"/v1/runs/{run_id}/feedback", json=body)


def past_fixes(asked) -> list[dict]:
    return [
        item["fields"]
        for event in asked.of("observation")
        if event["observation"]["tool"] == ORDER
        for item in event["observation"]["content"]
        if "past_work_order_id" in item["fields"]
    ]


def test_a_fix_named_in_feedback_is_stored_once_and_told_on_the_next_run(running, fixloop):
    asked = running.ask(E102, "press-3")
    assert asked.status == 200
    before = metric(scrape(running), "fixloop_answer_feedback_total", helpful="false", fix="true")

    body = {"helpful": False, "fix": f"  {LOOSE} ", "by": "Li Wei"}
    first, again = give(running, asked.run_id, body), give(running, asked.run_id, body)  # an offline tablet's replay

    assert first.status_code == again.status_code == 200, first.text
    assert first.json()["reported_fix_id"] == f"FB-{asked.run_id}"
    assert first.json()["feedback"]["fix"] == LOOSE
    with running.client() as client:
        view = client.get(f"/v1/runs/{asked.run_id}").json()
    assert [(f["actor"], f["helpful"], f["fix"]) for f in view["feedback"]] == [("Li Wei", False, LOOSE)]
    after = metric(scrape(running), "fixloop_answer_feedback_total", helpful="false", fix="true")
    assert after - before == 2

    recurred = running.ask(E102, "press-3")
    [told] = [f for f in past_fixes(recurred) if f.get("reported_in_run") == asked.run_id]
    assert (told["past_work_order_id"], told["remedy"], told["same_device"]) == (f"FB-{asked.run_id}", LOOSE, True)
    assert LOOSE in recurred.termination["final_answer"]

    fixloop.env({"FIXLOOP_STATE_DIR": str(running.config.state_dir)})
    code, out, err = fixloop("runs", "feedback", "--no-helpful", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["run_id"], r["actor"], r["fix"], r["fault_codes"], r["device_id"]) for r in rows] == [
        (asked.run_id, "Li Wei", LOOSE, ["E102"], "press-3")
    ]
    code, out, _ = fixloop("runs", "feedback", "--helpful", "--json")
    assert (code, out) == (0, "")
    code, out, _ = fixloop("runs", "feedback")
    assert code == 0 and "Li Wei" in out and asked.run_id in out


def test_a_changed_mind_replaces_the_earlier_word_and_the_reported_fix(running):
    asked = running.ask(E102, "press-3")
    give(running, asked.run_id, {"helpful": False, "fix": "replaced the fan", "by": "Ana"})
    changed = give(running, asked.run_id, {"helpful": True, "fix": "cleaned the filter", "by": "Ana"})
    assert changed.status_code == 200
    with running.client() as client:
        view = client.get(f"/v1/runs/{asked.run_id}").json()
    assert [(f["helpful"], f["fix"]) for f in view["feedback"]] == [(True, "cleaned the filter")]
    fixes = running.service.work_orders.fix_history("press-3", "E102", same_model=[], limit=50, window_s=86400)
    assert [f.remedy for f in fixes.same_device if f.id == f"FB-{asked.run_id}"] == ["cleaned the filter"]


def test_helpful_without_a_fix_adds_no_past_fix(running):
    asked = running.ask("What is the motor temperature on press-3?", "press-3")
    answered = give(running, asked.run_id, {"helpful": True})
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"feedback": answered.json()["feedback"], "reported_fix_id": None}
    assert answered.json()["feedback"]["actor"] == "technician"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"helpful": "yes"}, "helpful"),
        ({"helpful": 1}, "helpful"),
        ({}, "helpful"),
        ({"helpful": True, "stars": 5}, "stars"),
        ({"helpful": True, "fix": "x" * 2001}, "fix"),
        ({"helpful": True, "by": ""}, "by"),
        ({"helpful": True, "by": "   "}, "by"),
        ({"helpful": False, "fix": " \n\t ", "by": "Li Wei"}, "fix"),
        ({"helpful": False, "fix": "reseated the plug"}, "by"),
        ({"helpful": False, "fix": "reseated the plug", "by": "\u200b"}, "by"),
        ({"helpful": True, "by": "Li \u202eieW"}, "by"),
    ],
)
def test_a_bad_body_is_a_422_naming_the_field_and_stores_nothing(running, body, field):
    asked = running.ask("What is the motor temperature on press-3?", "press-3")
    refused = give(running, asked.run_id, body)
    assert refused.status_code == 422, refused.text
    assert field in json.dumps(refused.json()["detail"])
    assert running.service.run_store.feedback_of(asked.run_id) == []


def test_malformed_json_and_an_unknown_run_are_refused(running):
    asked = running.ask("What is the motor temperature on press-3?", "press-3")
    assert give(running, asked.run_id, None, content=b'{"helpful": tru').status_code == 422
    missing = give(running, "run-000000000000", {"helpful": True})
    assert missing.status_code == 404 and "run-000000000000" in missing.json()["detail"]


def post(service: RunningService, path: str, body: object, token: str | None = None):
    with service.client(token) if token else service.client() as client:
        return client.post(path, json=body)


def reports(service: RunningService, run_id: str) -> dict[str, ReportedFix]:
    """The past fixes reported on the run, by id, as the next answer's work-order call reads them."""
    fixes = service.service.work_orders.fix_history("press-3", "E102", same_model=[], limit=50, window_s=86400)
    return {f.id: f for f in fixes.same_device if isinstance(f, ReportedFix) and f.run_id == run_id}


def test_a_fix_given_in_feedback_is_an_unverified_report_in_every_later_answer(running):
    asked = running.ask(E102, "press-3")
    given = give(running, asked.run_id, {"helpful": False, "fix": JUMPER, "by": "Li Wei"})
    assert given.status_code == 200, given.text
    assert given.json()["feedback"]["confirmed_by"] is None

    for question, label in (
        (E102, "Unverified report by Li Wei, "),
        ("3号压机显示E102，怎么处理？", "Li Wei 的未核实报告（"),
    ):
        later = running.ask(question, "press-3")
        [told] = [f for f in past_fixes(later) if f.get("reported_in_run") == asked.run_id]
        assert (told["provenance"], told["reported_by"], told["remedy"]) == ("unverified_report", "Li Wei", JUMPER)
        assert told["reported_at"] == told["closed_at"] and "confirmed_by" not in told
        answer = later.termination["final_answer"]
        assert f"{label}{told['reported_at'][:10]}" in answer
        assert f"Last fix on this machine: FB-{asked.run_id}" not in answer
        assert f"本机上次处理：FB-{asked.run_id}" not in answer


def test_another_persons_fix_is_their_own_report_and_never_replaces_the_first(running):
    asked = running.ask(E102, "press-3")
    first = give(running, asked.run_id, {"helpful": False, "fix": "replaced the fan", "by": "Ana"})
    second = give(running, asked.run_id, {"helpful": False, "fix": JUMPER, "by": "Bo"})
    assert (first.json()["reported_fix_id"], second.json()["reported_fix_id"]) == (
        f"FB-{asked.run_id}",
        f"FB-{asked.run_id}-2",
    )
    held = reports(running, asked.run_id)
    assert {(f.closed_by, f.remedy) for f in held.values()} == {("Ana", "replaced the fan"), ("Bo", JUMPER)}
    with running.client() as client:
        view = client.get(f"/v1/runs/{asked.run_id}").json()
    assert sorted((f["actor"], f["fix"], f["report_id"]) for f in view["feedback"]) == [
        ("Ana", "replaced the fan", f"FB-{asked.run_id}"),
        ("Bo", JUMPER, f"FB-{asked.run_id}-2"),
    ]


def test_the_reporter_withdraws_their_own_fix_with_no_fix_or_explicitly(running):
    asked = running.ask(E102, "press-3")
    for by, fix in (("Ana", "replaced the fan"), ("Bo", JUMPER), ("Cy", "cleaned the filter")):
        give(running, asked.run_id, {"helpful": False, "fix": fix, "by": by})

    emptied = give(running, asked.run_id, {"helpful": False, "fix": "", "by": "Bo"})
    assert emptied.status_code == 200 and emptied.json()["feedback"]["fix"] is None
    withdrawn = post(running, f"/v1/runs/{asked.run_id}/feedback/withdraw", {"by": "Cy"})
    assert withdrawn.status_code == 200, withdrawn.text
    assert (withdrawn.json()["feedback"]["fix"], withdrawn.json()["feedback"]["helpful"]) == (None, False)
    assert [f.closed_by for f in reports(running, asked.run_id).values()] == ["Ana"]
    later = running.ask(E102, "press-3")
    assert JUMPER not in later.termination["final_answer"]

    # Reported again it is theirs again, under its own id: ids are never handed to another report.
    again = give(running, asked.run_id, {"helpful": False, "fix": "reseated the plug", "by": "Bo"})
    assert again.json()["reported_fix_id"] == f"FB-{asked.run_id}-2"
    nobody = post(running, f"/v1/runs/{asked.run_id}/feedback/withdraw", {"by": "Dee"})
    assert nobody.status_code == 404 and "Dee" in nobody.json()["detail"]
    blank = post(running, f"/v1/runs/{asked.run_id}/feedback/withdraw", {"by": "  "})
    assert blank.status_code == 422 and "by" in json.dumps(blank.json()["detail"])


def test_a_supervisor_confirms_a_report_and_it_becomes_a_recorded_fix(running):
    asked = running.ask(E102, "press-3")
    give(running, asked.run_id, {"helpful": False, "fix": LOOSE, "by": "Li Wei"})
    path = f"/v1/runs/{asked.run_id}/feedback/confirm"
    confirm = {"reporter": "Li Wei", "by": "Chen Jing"}

    technician = post(running, path, confirm)
    assert technician.status_code == 401 and "supervisor" in technician.json()["detail"]
    assert post(running, path, {"reporter": "Li Wei", "by": "li wei"}, SUPERVISOR_TOKEN).status_code == 409
    assert post(running, path, {"reporter": "Nobody", "by": "Chen Jing"}, SUPERVISOR_TOKEN).status_code == 404
    blank = post(running, path, {"reporter": "Li Wei", "by": " "}, SUPERVISOR_TOKEN)
    assert blank.status_code == 422 and "by" in json.dumps(blank.json()["detail"])
    assert reports(running, asked.run_id)[f"FB-{asked.run_id}"].confirmed_by is None

    confirmed = post(running, path, confirm, SUPERVISOR_TOKEN)
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["feedback"]["confirmed_by"] == "Chen Jing"
    assert post(running, path, {"reporter": "Li Wei", "by": "Someone Else"}, SUPERVISOR_TOKEN).status_code == 200
    later = running.ask(E102, "press-3")
    [told] = [f for f in past_fixes(later) if f.get("reported_in_run") == asked.run_id]
    assert (told["provenance"], told["confirmed_by"], told["reported_by"]) == ("recorded", "Chen Jing", "Li Wei")
    assert f"Last fix on this machine: FB-{asked.run_id}" in later.termination["final_answer"]

    # The same word sent again keeps the confirmation; a changed fix is unverified again.
    give(running, asked.run_id, {"helpful": False, "fix": LOOSE, "by": "Li Wei"})
    assert reports(running, asked.run_id)[f"FB-{asked.run_id}"].confirmed_by == "Chen Jing"
    changed = give(running, asked.run_id, {"helpful": False, "fix": JUMPER, "by": "Li Wei"})
    assert changed.json()["feedback"]["confirmed_by"] is None
    assert reports(running, asked.run_id)[f"FB-{asked.run_id}"].confirmed_by is None

    # A supervisor's token does what a technician's does.
    with running.client(SUPERVISOR_TOKEN) as client:
        assert client.get(f"/v1/runs/{asked.run_id}").status_code == 200


def test_the_cli_lists_confirms_and_withdraws_reports(running, fixloop):
    asked = running.ask(E102, "press-3")
    give(running, asked.run_id, {"helpful": False, "fix": JUMPER, "by": "Li Wei"})
    fixloop.env({"FIXLOOP_STATE_DIR": str(running.config.state_dir)})

    code, out, err = fixloop("runs", "feedback", "--device", "press-3", "--limit", "1")
    assert code == 0, err
    assert "unverified report" in out and f"FB-{asked.run_id}" in out
    code, out, err = fixloop("runs", "feedback", "confirm", asked.run_id, "--reporter", "Li Wei", "--by", "Li Wei")
    assert code != 0 and "someone else confirms it" in err
    code, out, err = fixloop("runs", "feedback", "confirm", asked.run_id, "--reporter", "Li Wei", "--by", "Chen")
    assert code == 0, err
    assert "confirmed by Chen" in out
    assert reports(running, asked.run_id)[f"FB-{asked.run_id}"].confirmed_by == "Chen"
    code, out, _ = fixloop("runs", "feedback", "--json", "--device", "press-3", "--limit", "1")
    assert json.loads(out)["confirmed_by"] == "Chen"

    code, out, err = fixloop("runs", "feedback", "withdraw", asked.run_id, "--by", "Li Wei")
    assert code == 0 and "withdrawn" in out, err
    assert reports(running, asked.run_id) == {}
    code, _, err = fixloop("runs", "feedback", "withdraw", "run-000000000000", "--by", "Li Wei")
    assert code != 0 and "run-000000000000" in err
