"""The service with a (scripted) LLM over real HTTP: takeover mid-run, the LLM failing, session summaries in the prompt."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

from edge.config import load_config
from edge.service.health import Readiness, Warmup
from tests.fixtures.service import E102, metric, run_service, scrape

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
ORDER = "generate_work_order"
SLOW_S = 0.5


def call(tool: str, delay_s: float = 0.0, **args: Any) -> dict[str, Any]:
    return {"content": json.dumps({"thought": f"next: {tool}", "action": tool, "args": args}), "delay_s": delay_s}


def final(text: str, delay_s: float = 0.0) -> dict[str, Any]:
    return {"content": json.dumps({"thought": "done", "final_answer": text, "evidence": ["obs-1"]}), "delay_s": delay_s}


SCRIPTS = {
    "E102": [
        call(MANUAL, fault_code="E102", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="coolant_level"),
        final("E102: stop the press and check the coolant (obs-1, obs-2)."),
    ],
    # Slow steps leave time to take over while the model is thinking.
    "E101": [
        call(MANUAL, SLOW_S, fault_code="E101", device_id="press-3"),
        call(PLC, SLOW_S, device_id="press-3", sensor="hydraulic_pressure"),
        call(PLC, SLOW_S, device_id="press-3", sensor="oil_temp"),
        final("E101 handled.", SLOW_S),
    ],
    "E105": [{"status": 500, "content": "model crashed"}],
    "coolant": [call(PLC, device_id="press-3", sensor="coolant_level"), final("Coolant level read.")],
}


def script(body: dict[str, Any]) -> dict[str, Any]:
    question = body["messages"][1]["content"].splitlines()[0]
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    for key, steps in SCRIPTS.items():
        if key in question:
            return steps[min(turn, len(steps) - 1)]
    return final("I have no script for this question.")


@pytest.fixture(scope="module")
def llm_service(tmp_path_factory, demo_index):
    with run_service(tmp_path_factory.mktemp("llm-service"), demo_index, script, loop={"max_wall_s": 30.0}) as running:
        yield running


def test_takeover_stops_at_the_next_step_boundary_and_hands_over_the_context(llm_service):
    events = []
    with (
        llm_service.client() as client,
        client.stream("POST", "/v1/runs", json={"question": "Press-3 shows E101", "device_id": "press-3"}) as stream,
    ):
        run_id = stream.headers["x-run-id"]
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if events[-1]["type"] == "observation":
                    break
        # The model is now thinking about step 2: the takeover lands mid-step.
        with llm_service.client() as other:
            taken = other.post(f"/v1/runs/{run_id}/takeover")
        events.extend(json.loads(line[5:]) for line in lines if line.startswith("data:"))

    assert taken.status_code == 200, taken.text
    result = taken.json()
    assert result["taken_over"] is True and result["stopped"] is True
    assert result["pending_action"] == {
        "tool": PLC,
        "args": {"device_id": "press-3", "sensor": "hydraulic_pressure"},
        "thought": f"next: {PLC}",
    }
    record = result["record"]
    assert record["termination"]["reason"] == "takeover"
    assert record["steps"][0]["observation"]["tool"] == MANUAL  # what the agent had found so far
    # A thought that only names the tool it calls claims nothing and is shown as written (one that claims what
    # no observation backs is shown as the call it led to: test_answer_document); the record keeps the raw reply.
    assert [s["thought"] for s in record["steps"]] == [f"next: {MANUAL}", f"next: {PLC}"]
    assert f'"thought": "next: {MANUAL}"' in record["steps"][0]["raw"]
    assert record["steps"][1]["observation"] is None  # the pending call never ran
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["termination", "stored"] and events[-2]["termination"]["reason"] == "takeover"
    assert kinds.count("observation") == 1
    with llm_service.client() as client:
        listed = client.get("/v1/runs", params={"reason": "takeover"}).json()
    assert run_id in [row["run_id"] for row in listed]


def test_a_failing_llm_switches_the_run_to_degraded_mode_and_says_so(llm_service):
    result = llm_service.ask("Press-3 shows E105, what now?", "press-3")

    assert result.of("run_started")[0]["degraded"] is False
    warning = result.of("warning")[0]["text"]
    assert "degraded mode" in warning and "HTTP 500" in warning
    assert result.termination["reason"] == "final_answer"
    assert result.termination["final_answer"].startswith("Degraded mode")
    assert MANUAL in [e["tool"] for e in result.of("action")]  # the rules planner carried on


def test_the_session_summary_reaches_the_prompt_of_a_follow_up(llm_service):
    first = llm_service.ask(E102, "press-3")
    assert first.termination["reason"] == "final_answer"
    sent_before = len(llm_service.llm.requests)

    follow_up = llm_service.ask("and the coolant level?", session_id=first.headers["x-session-id"])

    question = llm_service.llm.requests[sent_before]["messages"][1]["content"]
    assert "Earlier in this session:" in question
    assert f"- Asked (press-3): {E102}" in question
    assert "search_maintenance_manual_by_fault_code(fault_code=E102, device_id=press-3) -> ok: E102 " in question
    assert "read_plc_sensor_value(device_id=press-3, sensor=coolant_level) -> ok: coolant_level " in question
    assert len(question) < 1500  # a summary, not the log
    assert follow_up.termination["reason"] == "final_answer"


def test_readiness_reports_the_llm_and_metrics_count_llm_latency_and_tokens(llm_service):
    with llm_service.client(None) as client:
        ready = client.get("/readyz").json()
    assert ready["degraded"] is False and ready["checks"]["llm"]["mode"] == "llm"

    before = scrape(llm_service)
    result = llm_service.ask(E102, "press-3")
    after = scrape(llm_service)
    with llm_service.client() as client:
        record = client.get(f"/v1/runs/{result.run_id}").json()["record"]
    assert metric(after, "fixloop_llm_latency_seconds_count") - metric(before, "fixloop_llm_latency_seconds_count") == 3
    assert (
        metric(after, "fixloop_llm_tokens_total", kind="prompt")
        - metric(before, "fixloop_llm_tokens_total", kind="prompt")
        == record["prompt_tokens"]
        > 0
    )
    assert (
        metric(after, "fixloop_planner_steps_total", planner="llm")
        - metric(before, "fixloop_planner_steps_total", planner="llm")
        == 3
    )


def test_the_service_is_ready_only_once_the_models_prompt_is_primed(tmp_path, demo_index):
    """A profile that primes (the CPU ones): the first technician must not pay the cold prompt, nor queue
    behind the priming request, so /readyz says "not ready" until it has ended."""
    primed = threading.Event()

    def slow_prime(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["content"] == "Ready?":
            primed.wait(10)
            return {"content": "ok", "usage": {"prompt_tokens": 1400, "completion_tokens": 1}}
        return script(body)

    env = {"FIXLOOP__LLM__PROFILE": "cpu-tiny"}
    with run_service(tmp_path, demo_index, slow_prime, env=env) as running, running.client(None) as client:
        priming = client.get("/readyz")
        primed.set()
        deadline = time.monotonic() + 10
        while (ready := client.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert priming.status_code == 503, priming.json()
    assert priming.json()["checks"]["llm"]["detail"].startswith("priming the model")
    assert ready.status_code == 200 and ready.json()["checks"]["llm"]["mode"] == "llm", ready.json()
    assert [b["messages"][-1]["content"] for b in running.llm.requests] == ["Ready?"]


def test_a_model_server_busy_with_a_reply_is_busy_not_down(tmp_path):
    """llama-cpp-python answers `/models` only between replies: a probe it does not answer in time while it
    holds the connection is a busy server, and the tablet must not show degraded mode for it."""
    with socket.socket() as busy, socket.socket() as gone:
        busy.bind(("127.0.0.1", 0))
        busy.listen()  # the kernel accepts the connection; nobody answers
        gone.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        checks = {}
        for name, sock in (("busy", busy), ("gone", gone)):
            url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
            config = load_config(env={"FIXLOOP_STATE_DIR": str(tmp_path), "FIXLOOP_LLM_URL": url})
            readiness = Readiness(config, Warmup())
            try:
                checks[name] = readiness.llm()
            finally:
                readiness.close()
    assert checks["busy"]["mode"] == "llm" and checks["busy"]["detail"].startswith("LLM busy"), checks
    assert checks["gone"]["mode"] == "degraded", checks
