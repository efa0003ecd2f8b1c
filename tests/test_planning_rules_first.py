"""Rules first, the model where it adds (edge/planning/), against a scripted server over real HTTP with
the real tools: which stage decides each step, how few round trips the model costs, what it is told, and
that what it writes into a tool call is held to the observations."""

from __future__ import annotations

import json

import pytest

from edge.llm.scripted_server import ScriptedLlmServer
from edge.planning import probe_cases

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
WORK_ORDER = "generate_work_order"


def call(tool: str, thought: str = "next step", **args) -> dict:
    return {"content": json.dumps({"thought": thought, "action": tool, "args": args})}


def final(text: str, evidence: list[str] | None = None) -> dict:
    return {"content": json.dumps({"thought": "done", "final_answer": text, "evidence": evidence or []})}


@pytest.fixture
def planned(make_agent):
    servers = []

    def start(script, planning="rules_first", **llm):
        server = ScriptedLlmServer(script).start()
        servers.append(server)
        # Budgets a loaded CI box cannot miss: these tests are about who decides, not about time.
        llm = {"url": server.url, "planning": planning, "timeout_s": 20.0, **llm}
        return server, make_agent(llm=llm, loop={"max_wall_s": 60.0})

    yield start
    for server in servers:
        server.stop()


def split_at_the_answer(record):
    """The steps before the first final answer, and that answer's step (the loop may then hand a
    rejected answer over to the rules: the record goes on)."""
    at = next(i for i, step in enumerate(record.steps) if step.final_answer is not None)
    return record.steps[:at], record.steps[at]


def schema_branches(body: dict) -> list[str]:
    return [
        branch["properties"]["action"]["const"] if "action" in branch["properties"] else "final_answer"
        for branch in body["structured_outputs"]["json"]["anyOf"]
    ]


def test_the_rules_take_the_certain_steps_and_the_model_writes_only_the_answer(planned):
    server, agent = planned([final("E102 means the coolant level is low.", ["obs-1"])])
    record = agent.ask("Press-3 shows E102, what should I do?", device_id="press-3")

    rules, answer = split_at_the_answer(record)
    assert [s.decided_by for s in rules] == ["rules"] * len(rules), [(s.decided_by, s.why) for s in record.steps]
    assert answer.decided_by == "model"
    assert [s.action for s in rules][:2] == [MANUAL, PLC] and set(s.action for s in rules) == {MANUAL, PLC}
    assert "E102 is listed in the manuals" in rules[0].why
    assert "the manual's entry names coolant_level" in rules[1].why
    assert record.termination.reason == "final_answer"
    # One round trip, in which only a final answer can be decoded; the rules' steps are in the prompt
    # as the model's own turns, and it is told it holds both results and that they are all there is.
    assert len(server.requests) == 1
    body = server.requests[0]
    assert schema_branches(body) == ["final_answer"]
    # Nothing to decide, nothing to explain: the grammar holds the thought empty, the tokens go to the prose;
    # what it may cite is the ids of the observations it holds.
    answer_shape = body["structured_outputs"]["json"]["anyOf"][0]["properties"]
    assert answer_shape["thought"] == {"type": "string", "const": ""}
    held = [s.observation.id for s in rules if s.observation is not None]
    assert answer_shape["evidence"]["items"]["enum"] == held and len(held) >= 2
    turns = body["messages"]
    assert json.loads(turns[2]["content"])["action"] == MANUAL and turns[2]["role"] == "assistant"
    assert "You hold obs-1, obs-2" in turns[-1]["content"] and "Reply with the final answer now" in turns[-1]["content"]
    # What they found is said again right where the answer is written: the entry and the value as read.
    reading = next(s.observation for s in rules if s.action == PLC).content[0].fields
    assert "They found E102 " in turns[-1]["content"]
    assert f"; coolant_level {reading['value']} % (live) [obs-2]" in turns[-1]["content"]


def test_a_symptom_search_is_the_models_words_and_the_rules_go_on_from_its_result(planned):
    server, agent = planned(
        [call(MANUAL, query="spindle grinding noise", device_id="cnc-7"), final("See the manual.", ["obs-1"])]
    )
    record = agent.ask("the spindle on cnc-7 makes a grinding noise", device_id="cnc-7")

    first = record.steps[0]
    assert (first.decided_by, first.action, first.args["query"]) == ("model", MANUAL, "spindle grinding noise")
    assert "a symptom" in first.why
    # Its first request may only search: the rules' tool and kind of call (words, not a code), its words;
    # with nothing observed an answer could only be rejected. The rules' own search is not made on top.
    assert schema_branches(server.requests[0]) == [MANUAL]
    args = server.requests[0]["structured_outputs"]["json"]["anyOf"][0]["properties"]["args"]
    # The machine is the question's, not a guess: the model fills the words alone.
    assert set(args["properties"]) == set(args["required"]) == {"query"}
    assert first.args["device_id"] == "cnc-7"
    before, answer = split_at_the_answer(record)
    assert [s.args.get("query") for s in before if s.action == MANUAL] == ["spindle grinding noise"]
    assert all(s.decided_by == "rules" for s in before[1:])  # the readings the entry it found names
    assert answer.decided_by == "model" and len(server.requests) == 2
    assert schema_branches(server.requests[1]) == ["final_answer"]


def test_a_guessed_search_is_made_on_the_machine_the_question_names_whatever_the_model_writes(planned):
    # A server without grammar support lets the model write any argument: it named the wrong machine.
    server, agent = planned(
        [call(MANUAL, query="spindle rattles when cutting", device_id="press-3"), final("See the manual.", ["obs-1"])]
    )
    record = agent.ask("cnc-7 rattles like crazy when it cuts")
    args = server.requests[0]["structured_outputs"]["json"]["anyOf"][0]["properties"]["args"]
    assert set(args["properties"]) == {"query"}  # what the grammar asks of it
    first = record.steps[0]
    assert (first.decided_by, first.args) == ("model", {"query": "spindle rattles when cutting", "device_id": "cnc-7"})


def test_the_rules_handed_a_run_answer_even_when_their_own_search_finds_what_the_models_found(planned):
    question = "the tool changer arm on cnc-7 froze halfway to the magazine"
    _server, agent = planned(
        [call(MANUAL, query="tool changer arm froze halfway to the magazine"), final(question.capitalize() + ".")]
    )
    record = agent.ask(question)
    searches = [step for step in record.steps if step.action == MANUAL]
    assert [step.decided_by for step in searches] == ["model", "rules"], [(s.decided_by, s.args) for s in searches]
    assert searches[1].observation.no_new_information  # the same entry, found in the rules' words
    assert record.fallback == "answer_rejected" and record.termination.reason == "final_answer"
    assert "E230" in record.termination.final_answer


def test_the_model_guessing_one_of_two_readings_leaves_the_other_to_the_rules(planned):
    _server, agent = planned([call(PLC, sensor="oil_temp"), final("See the readings.", ["obs-1", "obs-2"])])
    record = agent.ask("can u pull up oil temp and system pressure for press3 pls")
    # The guess is spent on one reading; the other is read before the model is asked for the answer.
    first, second, third = record.steps[:3]
    assert (first.decided_by, first.args["sensor"]) == ("model", "oil_temp")
    assert (second.decided_by, second.action, second.args["sensor"]) == ("rules", PLC, "hydraulic_pressure")
    assert third.decided_by == "model" and third.final_answer is not None


def test_a_repeated_call_is_answered_with_the_result_the_model_holds_not_run_again(planned):
    server, agent = planned(
        [
            call(MANUAL, query="grinding noise", device_id="cnc-7"),
            call(MANUAL, query="grinding noise", device_id="cnc-7"),
            final("See the manual.", ["obs-1"]),
        ],
        planning="model",
    )
    record = agent.ask("cnc-7 is making a grinding noise", device_id="cnc-7")

    told = record.steps[1]
    assert told.action is None and "its result is obs-1 above" in told.format_error
    assert told.why == "repeated a call: told it holds the result"
    assert "its result is obs-1 above" in server.requests[2]["messages"][-1]["content"]
    assert [s.action for s in record.steps if s.planner == "llm"].count(MANUAL) == 1
    assert record.fallback in (None, "answer_rejected") and record.termination.reason == "final_answer"


def test_a_work_order_summary_citing_a_manual_and_page_no_observation_holds_is_not_run(planned):
    invented = call(
        WORK_ORDER, device_id="press-3", fault_code="E102", summary="Motor overheating (mx900_en.pdf, p. 27)"
    )
    server, agent = planned([invented, final("No work order was opened.")], planning="model")
    record = agent.ask("E102 on press-3, open a work order", device_id="press-3")

    refused = record.steps[0]
    assert refused.action is None and refused.observation is None
    assert "manual mx900_en.pdf" in refused.format_error and "page 27" in refused.format_error
    assert "its arguments were not backed" in refused.why
    # The model reads why, as the observation of its call; no order was created from the invented text.
    assert "mx900_en.pdf" in server.requests[1]["messages"][-1]["content"]
    assert all(obs.tool != WORK_ORDER or "mx900" not in json.dumps(obs.payload()) for obs in record.observations)


def handed_to_the_rules(record, server) -> None:
    """The model's part ended at its one guess: one round trip, and the rules' steps and document after it."""
    assert len(server.requests) == 1, [(s.decided_by, s.why) for s in record.steps]
    assert record.fallback == "guess_unusable" and record.degraded
    assert all(s.decided_by == "rules" and "guess_unusable" in s.why for s in record.steps[1:])
    answer = record.termination.answer
    assert record.termination.reason == "final_answer" and answer.prose is None
    assert answer.mode == "handed_over" and answer.mode_reason == "its guess at a step could not be used"


def test_at_a_guess_a_call_of_another_tool_than_the_rules_is_refused_and_the_rules_take_the_run(planned):
    server, agent = planned([call(PLC, device_id="cnc-7", sensor="spindle_speed"), final("See the manual.", ["obs-2"])])
    record = agent.ask("cnc-7 is making a grinding noise", device_id="cnc-7")
    assert (
        record.steps[0].action is None
        and "Only search_maintenance_manual_by_fault_code" in record.steps[0].format_error
    )
    # One try at a guess: the rules' own search follows and theirs is the answer; the model is not asked again.
    assert record.steps[1].action == MANUAL and record.steps[1].observation is not None
    handed_to_the_rules(record, server)


def test_a_guess_refused_for_an_invented_code_costs_one_round_trip(planned):
    """Qwen2.5-Coder-0.5B put ALARM:1 into a symptom's search, twice, then was asked to answer with nothing
    observed: three round trips and a rejected answer. A model that adds nothing costs one round trip."""
    server, agent = planned(
        [call(MANUAL, fault_code="ALARM:1", device_id="cnc-7"), final("See the manual.", ["obs-2"])]
    )
    record = agent.ask("the tool changer arm on cnc-7 stopped halfway", device_id="cnc-7")
    refused, ruled = record.steps[:2]
    # A server that holds the grammar cannot decode the code's argument; this one ignores it and is told.
    assert refused.action is None and "Only the arguments query, device_id are accepted now" in refused.format_error
    assert ruled.action == MANUAL and "ALARM" not in json.dumps(ruled.args) and ruled.observation is not None
    handed_to_the_rules(record, server)


def test_an_unreadable_guess_costs_one_round_trip_and_the_answer_is_the_rules(planned):
    server, agent = planned([{"content": "I think the spindle bearing"}, final("See the manual.", ["obs-1"])])
    record = agent.ask("the spindle on cnc-7 makes a grinding noise", device_id="cnc-7")
    assert record.steps[0].action is None and record.steps[0].decided_by == "model"
    assert record.steps[1].action == MANUAL
    handed_to_the_rules(record, server)


def test_a_guessed_search_that_finds_nothing_gets_no_second_guess(planned):
    """Qwen2.5-Coder-0.5B on an unlisted code: its search, a reworded search after `not_found`, then the
    answer: three round trips. Its guess spent, the next request is the answer's, the last."""
    server, agent = planned(
        [
            call(MANUAL, fault_code="E999", device_id="press-3"),
            call(MANUAL, query="E999 alarm press", device_id="press-3"),
            final("E999 is not in the manuals.", ["obs-1"]),
        ]
    )
    record = agent.ask("press-3 shows E999, what now?", device_id="press-3")
    first = record.steps[0]
    assert (first.decided_by, first.action) == ("model", MANUAL) and first.observation.status == "not_found"
    assert len(server.requests) == 2, [(s.decided_by, s.action, s.why) for s in record.steps]
    assert schema_branches(server.requests[1]) == ["final_answer"]
    assert [s.action for s in record.steps if s.decided_by == "model"] == [MANUAL, None]
    assert record.steps[-1].final_answer is not None


def test_a_guessed_search_in_words_the_question_does_not_hold_is_refused_and_the_rules_take_the_run(planned):
    """SmolLM2-135M searched "not given (known devices: press-3, cnc-7)" (its prompt's words) for a tool
    changer arm that froze: the search found another fault first, and its answer was rejected."""
    server, agent = planned(
        [call(MANUAL, query="not given (known devices: press-3, cnc-7)", device_id="cnc-7"), final("0")]
    )
    record = agent.ask("the tool changer arm on cnc-7 froze halfway to the magazine", device_id="cnc-7")
    refused = record.steps[0]
    assert refused.action is None and "shares no word with the question" in refused.format_error
    assert record.steps[1].action == MANUAL and "changer" in record.steps[1].args["query"]
    handed_to_the_rules(record, server)


def test_a_guessed_search_in_english_words_for_a_chinese_symptom_is_run(planned):
    server, agent = planned([call(MANUAL, query="spindle noise", device_id="cnc-7"), final("See the manual.")])
    record = agent.ask("cnc-7主轴有异响", device_id="cnc-7")
    first = record.steps[0]
    assert (first.decided_by, first.action, first.args["query"]) == ("model", MANUAL, "spindle noise")
    assert first.observation is not None and len(server.requests) == 2


def test_a_search_query_with_a_code_from_nowhere_is_refused(planned):
    _server, agent = planned(
        [call(MANUAL, query="M214 agitator over-temperature", device_id="press-3"), final("Nothing found.")],
        planning="model",
    )
    record = agent.ask("the press is running hot", device_id="press-3")
    assert record.steps[0].action is None and "fault code M214" in record.steps[0].format_error


def quoting_the_manual(body: dict) -> dict:
    """A final answer that says one step of a manual observation in its words."""
    for message in body["messages"]:
        prefix = "Observation (quoted data): <data>"
        if message["role"] == "user" and message["content"].startswith(prefix):
            payload = json.loads(message["content"].removeprefix(prefix).split("\n")[0].removesuffix("</data>"))
            steps = [item["text"] for item in payload["content"] if item.get("kind") == "step" and item.get("text")]
            if steps:
                return final(steps[0], [payload.get("id", "obs-1")])
    return final("nothing found")


def test_in_prose_mode_the_rules_take_every_step_and_the_model_one_round_trip(planned):
    server, agent = planned(quoting_the_manual, planning="prose")
    record = agent.ask("cnc-7 is making a grinding noise", device_id="cnc-7")

    before, answer = split_at_the_answer(record)
    assert all(s.decided_by == "rules" for s in before) and before[0].action == MANUAL
    assert "the model writes only the prose" in before[0].why
    assert answer.decided_by == "model" and len(server.requests) == 1, (record.fallback, record.warnings)
    # The answer's mode line says the model only wrote the prose, and why.
    assert record.fallback is None and record.termination.answer.mode == "rules_first"
    assert "llm.planning = prose" in record.termination.answer.mode_reason


def test_the_routing_probe_puts_a_model_that_routes_worse_than_the_rules_on_prose(planned):
    always_a_reading = call(PLC, device_id="press-3", sensor="motor_temp")
    _server, agent = planned([always_a_reading, final("ok")])
    result = agent.routing_probe()
    assert result.worse and result.rules_agreed == result.total and result.model_agreed < result.total
    assert any("the model chose read_plc_sensor_value" in miss for miss in result.misses)

    agent.route_by_probe()
    status = agent.planning_status()
    assert status["planning"] == "prose" and "routes worse than the rules" in status["planning_detail"]


def test_a_model_that_routes_like_the_rules_keeps_its_part(planned):
    def as_the_rules_would(body: dict) -> dict:
        question = body["messages"][1]["content"]
        tool = PLC if "right now" in question else MANUAL
        return call(tool, device_id="press-3", sensor="motor_temp") if tool == PLC else call(tool, query="noise")

    _server, agent = planned(as_the_rules_would)
    agent.route_by_probe()
    assert agent.planning_status()["planning"] == "rules_first"
    assert "first tool right in" in agent.planning_status()["planning_detail"]


def test_the_probe_asks_each_kind_of_question_and_the_rules_route_each_as_expected(make_agent):
    agent = make_agent()
    manual = agent.registry.get(MANUAL)
    cases = probe_cases(agent.config.devices, manual.known_codes())
    assert {case.first_tool for case in cases} == {MANUAL, PLC} and len(cases) >= 5
    for case in cases:
        from edge.run import RunState, SessionContext

        state = RunState(question=case.question, device_id=case.device_id, session=SessionContext(), actor="technician")
        assert agent.rules.next_steps(state)[0].call.tool == case.first_tool, case.question


def test_without_a_model_healthz_says_the_rules_decide(make_agent):
    assert make_agent().planning_status()["planning"] == "rules"
