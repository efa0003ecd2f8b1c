"""A misbehaving model behind a real OpenAI-compatible HTTP server: nothing it invents reaches the technician.

The scenarios live in `edge.evaluation.adversarial` (scripts/bench_adversarial.py runs the same ones and
prints the figures). Each asserts that no invented fact is shown, the run ended within its wall budget
+ 0.5 s, and its record says what happened. Below them: the LLM circuit breaker across runs, /readyz
showing it, and the rejected-answer counter.
"""

from __future__ import annotations

import json
import time

import pytest

from edge.evaluation.adversarial import E102, SCENARIOS, call, final, run_scenario
from edge.llm.scripted_server import ScriptedLlmServer
from tests.fixtures.service import metric, run_service, scrape

MANUAL = "search_maintenance_manual_by_fault_code"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_misbehaving_model(scenario, agent_config):
    result = run_scenario(scenario, agent_config)
    assert result.problems == [], json.dumps(result.record.model_dump(mode="json"), ensure_ascii=False)[:4000]


def test_there_are_at_least_twenty_scenarios():
    assert len(SCENARIOS) >= 20


def test_a_rejected_answer_is_kept_in_the_record_and_the_answer_comes_from_the_observations(agent_config):
    scenario = next(s for s in SCENARIOS if s.name == "invented sensor value")
    record = run_scenario(scenario, agent_config).record
    rejected = record.rejected_answers[0]
    assert rejected.planner == "llm" and "87.25" in rejected.text
    assert any("value 87.25" in problem for problem in rejected.problems)
    answer = record.termination.final_answer
    assert answer.startswith("The language model's answer could not be verified")
    assert "Degraded mode" in answer and "E102" in answer and "Coolant level" in answer
    assert record.planner == "llm->rules" and record.steps[-1].planner == "rules"


def test_a_reply_cut_at_the_length_limit_says_so_to_the_model(agent_config):
    scenario = next(s for s in SCENARIOS if s.name == "reply cut at the length limit")
    record = run_scenario(scenario, agent_config).record
    assert "cut at the limit of 640 tokens" in record.steps[0].format_error
    scenario = next(s for s in SCENARIOS if s.name == "action and final answer in one reply")
    record = run_scenario(scenario, agent_config).record
    assert 'both "action" and "final_answer"' in record.steps[0].format_error
    assert all(step.action != "generate_work_order" for step in record.steps)  # the bundled action never ran


def test_the_breaker_opens_after_consecutive_failures_and_one_probe_closes_it(make_agent):
    with ScriptedLlmServer([{"status": 503, "content": "overloaded"}]) as server:
        agent = make_agent(llm={"url": server.url, "breaker_failures": 2, "breaker_open_s": 0.3})
        for _ in range(2):
            assert agent.ask(E102, device_id="press-3").fallback == "llm_unavailable"
        sent = len(server.requests)
        record = agent.ask(E102, device_id="press-3")
        assert record.fallback == "circuit_open" and len(server.requests) == sent  # no request went out
        assert "circuit breaker open" in record.warnings[0]
        assert record.termination.final_answer.startswith("Degraded mode")

        server.script = [
            call(MANUAL, fault_code="E102", device_id="press-3"),
            final("E102: see the manual.", ["obs-1"]),
        ]
        time.sleep(0.3)  # the open window passes: the next run is the probe
        probe = agent.ask(E102, device_id="press-3")
        assert probe.fallback is None and probe.termination.reason == "final_answer"
        assert agent.llm_breaker.state() == "closed"


def test_readyz_shows_an_open_breaker_and_metrics_count_rejected_answers(tmp_path, demo_index):
    def script(body):
        question = body["messages"][1]["content"]
        if "E105" in question:
            return {"status": 500, "content": "model crashed"}
        return final("E102 means the pump is cavitating, work order WO-DEADBEEF0009 created.")

    with run_service(tmp_path, demo_index, script, llm={"breaker_failures": 1, "breaker_open_s": 60.0}) as service:
        before = scrape(service)
        result = service.ask(E102, "press-3")
        assert "WO-DEADBEEF0009" not in result.termination["final_answer"]
        after = scrape(service)
        assert (
            metric(after, "fixloop_answers_rejected_total", planner="llm")
            - metric(before, "fixloop_answers_rejected_total", planner="llm")
        ) == 1
        assert (
            metric(after, "fixloop_llm_fallbacks_total", reason="answer_rejected")
            - metric(before, "fixloop_llm_fallbacks_total", reason="answer_rejected")
        ) == 1

        service.ask("Press-3 shows E105, what now?", "press-3")
        with service.client(None) as client:
            ready = client.get("/readyz").json()
        assert ready["degraded"] is True and ready["ready"] is True
        llm = ready["checks"]["llm"]
        assert llm["mode"] == "degraded" and llm["breaker"]["state"] == "open"
        assert "circuit breaker open" in llm["detail"] and "HTTP 500" in llm["breaker"]["last_error"]
