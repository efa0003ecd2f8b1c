"""The real-model tier: SmolLM2-135M-Instruct behind llama-cpp-python's server plans runs of the CLI and
the service on the demo plant over HTTP.

What a model decides is not asserted (a 135M model decides badly, and that is the point): what must
hold whatever it decides is. Each reply is a valid action or a recorded format error; each run ends
with a termination record within its budget; the answer shown states nothing the observations do not
back; a fault gets at most one work order; every fallback and hand-over is recorded with its reason;
the reply's tokens are counted from the server's stream.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import typing
from collections import Counter
from pathlib import Path

import pytest

from edge.config import Config, load_config
from edge.doctor import run_checks
from edge.run.planner import RunState, SessionContext
from edge.run.record import FallbackReason, RunRecord
from edge.run.verification import AnswerVerifier
from tests.fixtures.service import TECHNICIAN_TOKEN, free_port, run_service
from tests.fixtures.work_orders import signed

# A run's whole budget: the model's part and a hand-over's, plus the answer's composition.
SLACK_S = 5.0
# One question of each kind, the languages between them (a reading in English is the follow-up test's).
QUESTIONS = [
    ("Press-3 shows E102, what should I do?", "press-3"),
    ("the spindle on cnc-7 vibrates a lot", "cnc-7"),
    ("cnc-7 主轴温度现在是多少？", None),
    ("Open a work order for press-3, fault E102, motor overheating", "press-3"),
]


def check_run(record: RunRecord, config: Config) -> None:
    """What holds for every run a real model planned, whatever it decided."""
    assert record.termination is not None, "no termination record"
    budget_s = config.loop.max_wall_s + (config.loop.handover_wall_s if record.fallback else 0.0)
    assert record.elapsed_ms <= (budget_s + SLACK_S) * 1000, (record.elapsed_ms, budget_s)
    for step in record.steps:
        if step.planner != "llm" or step.decided_by == "rules":  # rules-first: a certain step costs no model trip
            continue
        decided = step.action is not None or step.final_answer is not None
        assert decided != (step.format_error is not None), f"step {step.n}: neither a valid action nor a format error"
        # llama-cpp-python streams (edge/llm/servers/llama_cpp_python.py): the reply's tokens are the stream's,
        # the prompt's estimated, and the latency is split at the first token.
        assert step.llm is not None and step.llm.completion_tokens > 0, f"step {step.n}: no tokens counted"
        assert step.llm.prompt_tokens > 0 and step.llm.model and step.llm.prompt_ms is not None
    if record.degraded and record.planner != "rules":
        assert record.fallback in typing.get_args(FallbackReason) and record.warnings, "a fallback without a reason"
    state = RunState(question=record.question, device_id=record.device_id, session=SessionContext(), actor=record.actor)
    state.steps = list(record.steps)
    # The technician never reads a list of the model's malformed calls where the rules planner answered.
    for obs in record.observations:
        if obs.error_code in ("invalid_arguments", "unknown_tool", "unknown_sensor", "unknown_device"):
            assert all(item.text not in record.termination.final_answer for item in obs.content), obs
    verifier = AnswerVerifier(config.devices, lambda _state: False)
    assert verifier.unbacked(record.termination.final_answer, state) == [], record.termination.final_answer


def manual_steps(record: RunRecord) -> list[str]:
    return [
        item.text
        for obs in record.observations
        if obs.tool == "search_maintenance_manual_by_fault_code" and obs.status == "ok"
        for item in obs.content
        if item.kind == "step"
    ]


def one_order_per_fault(orders: list[dict]) -> None:
    active = Counter((o["device_id"], o["fault_code"]) for o in orders if o["status"] not in ("done", "cancelled"))
    assert all(n == 1 for n in active.values()), active


@pytest.fixture(scope="module")
def real_service(tmp_path_factory, demo_index, real_llm):
    with run_service(tmp_path_factory.mktemp("real-model"), demo_index, env=real_llm.env) as running:
        yield running


def stored(service, run_id: str) -> RunRecord:
    with service.client(TECHNICIAN_TOKEN) as client:
        return RunRecord.model_validate(client.get(f"/v1/runs/{run_id}").json()["record"])


@pytest.mark.parametrize(("question", "device_id"), QUESTIONS, ids=[q for q, _ in QUESTIONS])
def test_a_run_the_real_model_plans_holds_whatever_it_decides(real_service, question, device_id):
    result = real_service.ask(question, device_id)
    assert result.status == 200, result.events
    record = stored(real_service, result.run_id)
    assert record.steps[0].planner in ("llm", "rules")
    check_run(record, real_service.config)
    if "E102" in question and record.termination.reason == "final_answer":
        # The demo's question gets the manual's steps, whichever planner finished the run.
        steps = manual_steps(record)
        assert steps and any(step in record.termination.final_answer for step in steps), record.termination
    with real_service.client(TECHNICIAN_TOKEN) as client:
        one_order_per_fault(client.get("/v1/work-orders").json())


def test_a_follow_up_in_the_session_holds_too(real_service):
    first = real_service.ask("What is the oil temperature on press-3 now?", None, session_id="real-session-1")
    second = real_service.ask("and the hydraulic pressure?", None, session_id="real-session-1")
    for result in (first, second):
        assert result.status == 200, result.events
        check_run(stored(real_service, result.run_id), real_service.config)


def test_an_mes_alarm_planned_by_the_real_model_opens_at_most_one_order(real_service):
    alarm = {
        "event_id": "real-evt-1",
        "device_id": "press-3",
        "fault_code": "E102",
        "occurred_at": "2026-03-02T08:15:00+00:00",
        "severity": "critical",
        "message": "motor overtemperature",
    }
    body = json.dumps(alarm)
    # The MES waits for the whole run: a real model's part and a hand-over's may take the run's full budget.
    loop = real_service.config.loop
    with real_service.client(None, timeout_s=loop.max_wall_s + loop.handover_wall_s + SLACK_S) as client:
        response = client.post(
            "/v1/mes/alarms",
            content=body,
            headers=signed(body, "msg_real_1", secret=real_service.config.mes.secrets[0]),
        )
    assert response.status_code == 200, response.text
    record = stored(real_service, response.json()["run_id"])
    check_run(record, real_service.config)
    with real_service.client(TECHNICIAN_TOKEN) as client:
        orders = client.get("/v1/work-orders", params={"device_id": "press-3"}).json()
    one_order_per_fault(orders)


def test_the_cli_asks_the_real_model(fixloop, tmp_path, demo_index, real_llm):
    state = tmp_path / "state"
    state.mkdir()
    (state / "manuals.sqlite").write_bytes(demo_index.read_bytes())
    fixloop.env({"FIXLOOP_STATE_DIR": str(state), **real_llm.env})
    code, out, err = fixloop("ask", "Press-3 shows E102, what should I do?", "--json")
    assert code == 0, err
    record = RunRecord.model_validate_json(out)
    assert record.steps and record.planner.startswith("llm")
    # The CLI's demo plant points at 127.0.0.1:15020, where no PLC answers here: readings fail, and
    # the run must still end with a grounded answer.
    check_run(record, load_config(env={"FIXLOOP_STATE_DIR": str(state), **real_llm.env}))


def test_doctor_proves_the_real_server_applies_and_compiles_the_constraint(tmp_path, real_llm):
    checks = {c.name: c for c in run_checks(load_config(env={"FIXLOOP_STATE_DIR": str(tmp_path), **real_llm.env}))}
    assert "llama-cpp-python, detected" in checks["llm"].detail
    # The probe's enum allows only "ok" while its prompt asks for "unconstrained": only a grammar obeys both.
    assert checks["llm structured outputs"].status == "ok", checks["llm structured outputs"]
    assert checks["llm action schema"].status == "ok", checks["llm action schema"]


def test_the_demo_with_the_local_model_stops_its_model_server_on_sigterm(tmp_path, demo_index):
    state = tmp_path / "state"
    state.mkdir()
    (state / "manuals.sqlite").write_bytes(demo_index.read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIXLOOP")}
    # The routing probe's model requests (tested on their own) would only delay the start this test waits for.
    env.update({"FIXLOOP_STATE_DIR": str(state), "HF_HUB_OFFLINE": "1", "FIXLOOP__LLM__ROUTING_PROBE": "false"})
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edge.cli.main",
            "demo",
            "--llm",
            "local",
            "--port",
            str(free_port()),
            "--plc-port",
            str(free_port()),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in demo.stdout:
            if "Ctrl-C stops the demo" in line:
                break
        else:
            pytest.fail(f"the demo ended early with {demo.wait()}")
        model_server = _model_servers_for(state)
        assert model_server, "no model server found for the demo's state directory"
        demo.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        demo.send_signal(signal.SIGTERM)  # as `make` and `timeout` both pass theirs on: ignored while stopping
        rest = demo.stdout.read()
        assert demo.wait(timeout=60) == 0
        assert "Traceback" not in rest, rest
        deadline = time.monotonic() + 15
        while _model_servers_for(state) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _model_servers_for(state), "the model server outlived the demo"
    finally:
        if demo.poll() is None:
            demo.kill()


def _model_servers_for(state) -> list[int]:
    """llama_cpp.server processes whose log is in `state` (the demo logs its model server there)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            fds = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except (OSError, ValueError):
            continue
        if b"llama_cpp.server" in cmdline and any(fd.startswith(str(state)) for fd in fds):
            found.append(int(proc.name))
    return found
