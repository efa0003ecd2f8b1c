"""Each server gets its own request shape, told apart by its /models list, and every reply is checked
against the action schema whatever the server claims to constrain."""

from __future__ import annotations

import json

import pytest

from edge.agent import build_registry
from edge.config import ConfigError, load_config
from edge.evaluation.adversarial import call, final, raw
from edge.llm.action_schema import ReplyEnvelope, decoding_schema
from edge.llm.client import STOP_SEQUENCES
from edge.llm.scripted_server import ScriptedLlmServer

MANUAL = "search_maintenance_manual_by_fault_code"


@pytest.fixture
def served(make_agent):
    servers: list[ScriptedLlmServer] = []

    def start(owned_by: str, script: list[dict], **llm):
        server = ScriptedLlmServer(script, owned_by=owned_by).start()
        servers.append(server)
        # The model plans every step: each server's request shape is checked on the model's own calls.
        return server, make_agent(llm={"url": server.url, "planning": "model", **llm})

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize(
    ("owned_by", "server", "shape"),
    [
        ("vllm", "vllm", lambda body: body["structured_outputs"]["json"]),
        ("llamacpp", "llama-server", lambda body: body["response_format"]["json_schema"]["schema"]),
        ("me", "llama-cpp-python", lambda body: body["response_format"]["schema"]),
        ("someone", "openai", lambda body: body["response_format"]["json_schema"]["schema"]),
    ],
)
def test_the_server_is_detected_from_its_models_list_and_gets_its_request_shape(served, owned_by, server, shape):
    scripted, agent = served(owned_by, [final("nothing to do")])
    agent.ask("hello")
    body = scripted.requests[0]
    assert agent.client.dialect.name == server
    schema = shape(body)
    assert "maxLength" not in json.dumps(schema) and "anyOf" in schema
    assert body.get("cache_prompt") is (True if server == "llama-server" else None)
    if server == "llama-cpp-python":
        # Streamed, so that a reply the client gives up on stops computing (edge/llm/servers/llama_cpp_python.py).
        assert body["response_format"]["type"] == "json_object" and body["stream"] is True
    else:
        assert "stream" not in body


def test_a_configured_server_is_not_asked_what_it_is(served):
    scripted, agent = served("vllm", [final("nothing to do")], server="llama-server")
    agent.ask("hello")
    assert "cache_prompt" in scripted.requests[0] and "structured_outputs" not in scripted.requests[0]


def test_llama_servers_timings_give_the_cache_reuse_and_the_prompt_and_generation_split(served):
    timings = {"cache_n": 1200, "prompt_n": 80, "prompt_ms": 410.5, "predicted_ms": 920.0}
    _scripted, agent = served("llamacpp", [{**final("nothing to do"), "timings": timings}])
    usage = agent.ask("hello").steps[0].llm
    assert (usage.cached_tokens, usage.prompt_ms, usage.generation_ms) == (1200, 410.5, 920.0)


def test_the_decoding_schema_holds_no_length_limits_and_the_plants_ids_as_enums(agent_config):
    registry = build_registry(agent_config)
    try:
        full = registry.action_schema()
        schema = decoding_schema(full, agent_config.devices)
    finally:
        registry.close()
    text = json.dumps(schema)
    for keyword in ("maxLength", "minLength", "pattern", "description", "examples"):
        assert f'"{keyword}"' not in text, keyword
    assert '"maxLength"' in json.dumps(full)  # the whole contract keeps them: checked after the reply
    plc = next(b for b in schema["anyOf"] if b["properties"].get("action", {}).get("const") == "read_plc_sensor_value")
    assert plc["properties"]["args"]["properties"]["device_id"]["enum"] == sorted(agent_config.devices)
    assert "coolant_level" in plc["properties"]["args"]["properties"]["sensor"]["enum"]


def test_a_reply_off_the_schema_is_a_format_error_naming_what_is_wrong(served):
    off = raw(json.dumps({"thought": "t", "action": MANUAL, "args": {"fault_code": "E102"}, "mood": "happy"}))
    _scripted, agent = served("vllm", [off, call(MANUAL, fault_code="E102", device_id="press-3"), final("x")])
    record = agent.ask("Press-3 shows E102", device_id="press-3")
    assert "neither a tool call" in record.steps[0].format_error
    envelope = ReplyEnvelope(build_registry(agent.config).action_schema())
    assert envelope.errors({"thought": "t", "final_answer": "ok"}) == []
    assert envelope.errors({"thought": 3, "final_answer": "ok"})


def test_every_profile_has_room_for_the_step_one_prompt_and_four_model_steps():
    from edge.llm.profiles import BUILT_IN_PROFILES, MODEL_STEPS_ROOM, STEP1_PROMPT_TOKENS
    from edge.llm.tokens import estimate_text_tokens

    observation = estimate_text_tokens("x" * load_config(env={}).loop.observation_max_chars)
    for name, profile in BUILT_IN_PROFILES.items():
        step = profile.max_tokens_per_step + observation
        assert profile.context_tokens >= STEP1_PROMPT_TOKENS + MODEL_STEPS_ROOM * step, name
        assert profile.max_steps >= MODEL_STEPS_ROOM, name


def test_the_model_profile_sets_the_budgets_and_a_key_set_by_the_operator_wins():
    tiny = load_config(env={"FIXLOOP_LLM_URL": "http://127.0.0.1:9/v1", "FIXLOOP__LLM__PROFILE": "cpu-tiny"})
    assert (tiny.loop.max_wall_s, tiny.loop.max_tokens, tiny.llm.timeout_s) == (60.0, 5120, 30.0)
    mine = load_config(
        env={
            "FIXLOOP_LLM_URL": "http://127.0.0.1:9/v1",
            "FIXLOOP__LLM__PROFILE": "cpu-tiny",
            "FIXLOOP__LOOP__MAX_WALL_S": "20",
        }
    )
    assert (mine.loop.max_wall_s, mine.loop.max_steps) == (20.0, 6)
    rules_only = load_config(env={"FIXLOOP__LLM__PROFILE": "cpu-tiny"})
    assert rules_only.loop.max_wall_s == 3.0  # no model: the rules planner's budget
    with pytest.raises(ConfigError, match=r"neither built in nor in \[llm.profiles\].*cpu-tiny"):
        load_config(env={"FIXLOOP_LLM_URL": "http://127.0.0.1:9/v1", "FIXLOOP__LLM__PROFILE": "nope"})


def test_a_stream_that_ends_without_finishing_its_reply_is_the_server_failing(served):
    cut = {**call(MANUAL, fault_code="E102", device_id="press-3"), "finish_reason": None}
    _scripted, agent = served("me", [cut])
    record = agent.ask("Press-3 shows E102", device_id="press-3")
    assert record.fallback == "llm_unavailable", record.fallback
    assert any("ended its reply before finishing it" in w for w in record.warnings), record.warnings
    assert agent.llm_breaker.snapshot()["consecutive_failures"] == 1


def test_no_stop_sequence_can_cut_a_reply_inside_its_json():
    """ "Observation:" as the stop cut every Qwen2.5-Coder reply whose thought began with the word at
    `{"thought": "` (finish "stop", 4 tokens): a stop must not match inside a one-line JSON object, and
    still match an observation the model goes on to invent on a line of its own."""
    reply = json.dumps(
        {"thought": "Observation: obs-1 holds it.", "final_answer": "Observation: obs-1.", "evidence": []}
    )
    assert not [stop for stop in STOP_SEQUENCES if stop in reply]
    invented = reply + '\nObservation: {"id": "obs-2", "status": "ok"}'
    assert [stop for stop in STOP_SEQUENCES if stop in invented]
