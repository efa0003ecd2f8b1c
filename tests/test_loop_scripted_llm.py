"""The loop against a scripted OpenAI-compatible server over real HTTP, with the real tools.

Every termination path is driven here: final answer, format errors, repeated
action, repeated observation, a third identical call, step / token / time
budgets, takeover, and the LLM being slow, failing or gone (degraded mode).
"""

from __future__ import annotations

import json
import socket
import threading

import pytest

from edge.llm.scripted_server import ScriptedLlmServer
from edge.run.loop import RunRequest

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"


def call(tool: str, thought: str = "next step", **args) -> dict:
    return {"content": json.dumps({"thought": thought, "action": tool, "args": args})}


def final(text: str, evidence: list[str] | None = None) -> dict:
    return {"content": json.dumps({"thought": "done", "final_answer": text, "evidence": evidence or []})}


@pytest.fixture
def scripted(make_agent):
    servers = []

    def start(script, llm=None, loop=None):
        server = ScriptedLlmServer(script).start()
        servers.append(server)
        # The model plans every step here: these tests drive the loop's own paths with its replies
        # (tests/test_planning_rules_first.py has the rules taking the certain steps).
        llm = {"url": server.url, "planning": "model", **(llm or {})}
        agent = make_agent(llm=llm, **({"loop": loop} if loop else {}))
        return server, agent

    yield start
    for server in servers:
        server.stop()


def test_well_formed_run_ends_with_final_answer_and_shares_the_prompt_prefix(scripted):
    server, agent = scripted(
        [
            call(MANUAL, fault_code="E102", device_id="press-3"),
            call(PLC, device_id="press-3", sensor="coolant_level"),
            final("E102: stop the press and check the coolant level.", ["obs-1", "obs-2"]),
        ]
    )
    record = agent.ask("Press-3 shows E102, what should I do?", device_id="press-3")

    assert record.termination.reason == "final_answer"
    assert record.termination.supporting_observations == ["obs-1", "obs-2"]
    assert [s.observation.status for s in record.steps[:2]] == ["ok", "ok"]
    assert record.planner == "llm" and not record.degraded
    body = server.requests[0]
    assert body["temperature"] == 0 and body["stop"] == ["\nObservation:"]
    assert {branch["properties"]["action"]["const"] for branch in body["structured_outputs"]["json"]["anyOf"][:-1]} == {
        MANUAL,
        PLC,
        "generate_work_order",
    }
    # Each request's messages extend the previous request's: the prefix cache can reuse all of it.
    for earlier, later in zip(server.requests, server.requests[1:]):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]
    # All of the previous request's prompt is a shared prefix (token counts are the server's estimates).
    assert record.steps[1].llm.shared_prefix_tokens >= 0.95 * record.steps[0].llm.prompt_tokens
    assert record.context_tokens == record.steps[-1].llm.prompt_tokens + record.steps[-1].llm.completion_tokens


def test_structured_output_modes_shape_the_request(scripted):
    for mode, key in [("response_format", "response_format"), ("guided_json", "guided_json")]:
        server, agent = scripted([final("nothing to do")], llm={"structured_outputs": mode})
        agent.ask("hello")
        assert key in server.requests[0] and "structured_outputs" not in server.requests[0]
    server, agent = scripted([final("nothing to do")], llm={"structured_outputs": "none"})
    agent.ask("hello")
    assert not {"response_format", "guided_json", "structured_outputs"} & set(server.requests[0])


def test_format_error_goes_back_to_the_model_and_the_run_recovers(scripted):
    server, agent = scripted(
        [
            {"content": "Thought: I will look it up. Action: search the manual"},
            call(MANUAL, fault_code="E102", device_id="press-3"),
            final("done", ["obs-2"]),
        ]
    )
    record = agent.ask("Press-3 shows E102")
    assert record.steps[0].format_error and "No JSON object" in record.steps[0].format_error
    assert record.termination.reason == "final_answer"
    assert "format_error" in server.requests[1]["messages"][-1]["content"]


def test_three_format_errors_in_a_row_hand_the_run_to_the_rules_planner(scripted):
    server, agent = scripted([{"content": "not json"}])
    record = agent.ask("Press-3 shows E102", device_id="press-3")
    assert [s.planner for s in record.steps[:4]] == ["llm", "llm", "llm", "rules"]
    assert record.fallback == "format_errors" and record.degraded and record.planner == "llm->rules"
    assert record.steps[3].action == MANUAL
    assert record.termination.final_answer.startswith("Degraded mode") and "E102" in record.termination.final_answer
    assert len(server.requests) == 3


def test_unknown_tool_gets_the_available_tools_and_the_closest_name(scripted):
    _server, agent = scripted([call("search_manual", fault_code="E102"), final("done")])
    record = agent.ask("Press-3 shows E102")
    obs = record.steps[0].observation
    assert obs.status == "error" and obs.error_code == "unknown_tool"
    assert MANUAL in obs.suggestion and PLC in obs.content[0].text


def test_invalid_arguments_name_the_field(scripted):
    _server, agent = scripted([call(PLC, device_id="press-3"), final("done")])
    record = agent.ask("coolant on press-3?")
    obs = record.steps[0].observation
    assert obs.error_code == "invalid_arguments" and "'sensor'" in obs.content[0].text
    assert "sensor" in obs.suggestion.lower()


def test_same_call_twice_in_a_row_stops_weakly_but_still_answers(scripted):
    _server, agent = scripted([call(MANUAL, fault_code="E102", device_id="press-3")])
    record = agent.ask("Press-3 shows E102")
    # The model got nowhere: the rules planner answers from the search the model made.
    assert record.fallback == "repeated_calls" and record.planner == "llm->rules"
    assert [s.planner for s in record.steps][:2] == ["llm", "llm"]
    assert record.observations[0].tool == MANUAL and record.termination.reason == "final_answer"
    assert "E102" in record.termination.final_answer


def test_same_observation_twice_in_a_row_stops(scripted):
    # "E102" and "e 102" normalise to the same code: different calls, identical observation.
    _server, agent = scripted(
        [
            call(MANUAL, fault_code="E102", device_id="press-3"),
            call(MANUAL, fault_code="e 102", device_id="press-3"),
            final("never reached"),
        ]
    )
    record = agent.ask("Press-3 shows E102")
    assert record.fallback == "repeated_calls" and record.termination.reason == "final_answer"
    assert record.steps[1].observation.no_new_information


def test_third_identical_call_in_a_run_stops(scripted):
    a = call(MANUAL, fault_code="E102", device_id="press-3")
    b = call(PLC, device_id="press-3", sensor="coolant_level")
    c = call(PLC, device_id="press-3", sensor="motor_temp")
    # The first repeat is not run: the model is told it holds that result. Ignored, the call runs a
    # second time (not in a row), and the third is the limit.
    _server, agent = scripted([a, b, a, c, a, a, final("never reached")])
    record = agent.ask("Press-3 shows E102")
    assert "You already made this call: its result is obs-1" in record.steps[2].format_error
    assert record.fallback == "repeated_calls" and record.termination.reason == "final_answer"
    assert [s.planner for s in record.steps[:6]] == ["llm"] * 6 and len(record.observations) >= 4


def test_step_budget(scripted):
    script = [
        call(PLC, device_id="press-3", sensor=s)
        for s in ["coolant_level", "motor_temp", "oil_temp", "hydraulic_pressure"]
    ]
    _server, agent = scripted(script, loop={"max_steps": 3, "handover_steps": 3})
    record = agent.ask("check everything on press-3")
    # The model's three steps are used; the rules planner gets its own three to read the two sensors the
    # model did not (hydraulic pressure, DC bus voltage) and answer in.
    assert record.fallback == "max_steps" and [s.planner for s in record.steps[:3]] == ["llm"] * 3
    assert record.termination.reason == "final_answer" and len(record.steps) <= 6


def test_token_budget_uses_the_servers_usage(scripted):
    big = {
        **call(MANUAL, fault_code="E102", device_id="press-3"),
        "usage": {"prompt_tokens": 4000, "completion_tokens": 120},
    }
    server, agent = scripted([big, final("never reached")])
    record = agent.ask("Press-3 shows E102")
    assert record.fallback == "token_budget" and record.context_tokens == 4120
    assert len(server.requests) == 1 and record.steps[-1].planner == "rules"
    assert record.termination.reason == "final_answer" and "E102" in record.termination.final_answer


def test_a_handed_over_answer_does_not_list_the_models_malformed_calls(scripted):
    bad = call(MANUAL, device_id="press-3")  # neither fault_code nor query: refused by the tool's schema
    _server, agent = scripted([bad, bad])
    record = agent.ask("Press-3 shows E102, what should I do?", device_id="press-3")
    assert record.steps[0].observation.error_code == "invalid_arguments" and record.fallback == "repeated_calls"
    answer = record.termination.final_answer
    assert "Argument" not in answer and "Stop the press and switch the main motor off." in answer


def test_a_request_that_would_overflow_the_context_is_not_sent(scripted):
    # A 2,048-token model: 1,850 tokens used, a 256-token reply would not fit; the server would refuse it.
    first = {
        **call(MANUAL, fault_code="E102", device_id="press-3"),
        "usage": {"prompt_tokens": 1800, "completion_tokens": 50},
    }
    server, agent = scripted(
        [first, final("never reached")], llm={"max_tokens_per_step": 256}, loop={"max_tokens": 2048}
    )
    record = agent.ask("Press-3 shows E102", device_id="press-3")
    assert len(server.requests) == 1 and record.fallback == "token_budget"
    assert record.termination.reason == "final_answer" and "E102" in record.termination.final_answer


def test_time_budget(scripted):
    slowish = {**call(PLC, device_id="press-3", sensor="coolant_level"), "delay_s": 0.4}
    _server, agent = scripted(
        [slowish, {**call(PLC, device_id="press-3", sensor="motor_temp"), "delay_s": 0.4}, final("x")],
        loop={"max_wall_s": 0.5, "handover_wall_s": 5.0},
    )
    record = agent.ask("coolant on press-3?")
    # The second request is cut at the deadline (llm_unavailable) or the deadline is seen between steps.
    assert record.fallback in ("time_budget", "llm_out_of_time") and record.termination.reason == "final_answer"
    assert record.elapsed_ms < 5500


def test_takeover_stops_at_the_next_step_boundary_with_the_pending_action(scripted):
    _server, agent = scripted(
        [
            call(MANUAL, fault_code="E102", device_id="press-3"),
            call(PLC, "read the coolant", device_id="press-3", sensor="coolant_level"),
            final("never reached"),
        ]
    )
    cancel = threading.Event()

    def on_event(event):
        if event.type == "observation":
            cancel.set()

    record = agent.run(RunRequest(question="Press-3 shows E102"), on_event=on_event, cancel=cancel)
    assert record.termination.reason == "takeover"
    assert record.termination.pending_action == {
        "tool": PLC,
        "args": {"device_id": "press-3", "sensor": "coolant_level"},
        "thought": "read the coolant",
    }
    assert len(record.observations) == 1


@pytest.mark.parametrize("failure", [{"delay_s": 1.5}, {"status": 500}, {"drop": True}])
def test_slow_or_failing_llm_falls_back_to_the_rules_planner(scripted, failure):
    _server, agent = scripted([failure], llm={"timeout_s": 0.5})
    record = agent.ask("Press-3 shows E102, what should I do?", device_id="press-3")
    assert record.degraded and record.planner == "llm->rules"
    assert record.warnings and "degraded" in record.warnings[0]
    assert record.termination.reason == "final_answer"
    assert record.steps[0].action == MANUAL
    assert record.termination.final_answer.startswith("Degraded mode")


def test_server_down_falls_back_to_the_rules_planner(make_agent):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = make_agent(llm={"url": f"http://127.0.0.1:{port}/v1"})
    record = agent.ask("Press-3 shows E102, what should I do?", device_id="press-3")
    assert record.degraded and "unreachable" in record.warnings[0]
    assert record.termination.reason == "final_answer"


def test_the_prompt_lists_the_plants_sensor_ids_and_its_examples_use_no_real_device(scripted):
    server, agent = scripted([final("nothing to do")])
    agent.ask("hello")
    agent.ask("Press-3 shows E102", device_id="press-3")
    systems = [body["messages"][0]["content"] for body in server.requests]
    assert len(set(systems)) == 1  # byte-identical across requests: the prefix cache holds
    system = systems[0]
    assert (
        "- press-3 (Hydraulic press 3, Hydra HP-200): motor_temp (°C), coolant_level (%), hydraulic_pressure (bar)"
        in system
    )
    assert "- cnc-7 (" in system and "spindle_speed (rpm)" in system
    # The example run holds placeholders only: no tool, code, manual or page a model could copy.
    examples = system[system.index("How a run goes") :]
    for copyable in ("press-3", "cnc-7", "E102", ".pdf", "p. ", "search_maintenance", "read_plc", "generate_work"):
        assert copyable not in examples, copyable
    # Its last turn is a final answer right after an observation: the turn a run ends with.
    assert examples.splitlines()[-2].startswith("Observation:") and '"final_answer"' in examples.splitlines()[-1]


def test_a_follow_up_names_the_sessions_device(scripted):
    from edge.run.planner import SessionContext

    server, agent = scripted([final("nothing to do")])
    agent.run(
        RunRequest(
            question="and the coolant level?",
            session=SessionContext(device_id="cnc-7", summary=["Asked (cnc-7): 6065"]),
        )
    )
    assert "Device: cnc-7 (from earlier in this session)" in server.requests[0]["messages"][1]["content"]


def test_a_request_never_outlives_the_run_and_a_trickling_server_cannot_hold_it(scripted):
    _server, agent = scripted(
        [{**call(MANUAL, fault_code="E102", device_id="press-3"), "trickle_s": 0.2}],
        llm={"timeout_s": 10.0},
        loop={"max_wall_s": 1.0, "handover_wall_s": 2.0},
    )
    record = agent.ask("Press-3 shows E102", device_id="press-3")
    # Cut at the model's deadline; the rules planner answers within the hand-over's time.
    assert record.elapsed_ms < 1000 + 2000 + 500
    assert record.steps[0].planner_ms < 1500
    assert record.degraded and record.termination.reason == "final_answer"
    assert "did not finish its reply within 1" in record.warnings[0]
