"""Feedback on an answer over real HTTP: stored with the run, counted in /metrics, listed by `fixloop runs
feedback`, and a fix the technician names joins the fault's past fixes for the next run on that machine."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.service import E102, RunningService, metric, run_service, scrape

ORDER = "generate_work_order"
LOOSE = "the fan connector was loose; reseated it"


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
    ],
)
def test_a_bad_body_is_a_422_naming_the_field_and_stores_nothing(running, body, field):
    asked = running.ask("What is the motor temperature on press-3?", "press-3")
    refused = give(running, asked.run_id, body)
    assert refused.status_code == 422
    assert field in json.dumps(refused.json()["detail"])
    assert running.service.run_store.feedback_of(asked.run_id) == []


def test_malformed_json_and_an_unknown_run_are_refused(running):
    asked = running.ask("What is the motor temperature on press-3?", "press-3")
    assert give(running, asked.run_id, None, content=b'{"helpful": tru').status_code == 422
    missing = give(running, "run-000000000000", {"helpful": True})
    assert missing.status_code == 404 and "run-000000000000" in missing.json()["detail"]
