"""Misbehaving-LLM scenarios: what a small model's server does wrong, and what the technician must still get.

Each scenario scripts a scripted OpenAI-compatible server (real HTTP) to
misbehave one way: invented facts in the final answer, a final answer with
no observation, an action and an answer in one reply, two JSON objects,
unreadable or empty replies, replies cut at the length limit, an unknown
tool, wrong argument types, 20,000-character replies, no usage, a server
that trickles bytes or never answers. A run passes when none of the facts
the script invented is shown, no fact in the shown answer lacks evidence,
the run ended within its wall budget + 0.5 s, and the run record says what
happened (fallback, rejected answers, termination). Used by
tests/test_loop_adversarial.py and scripts/bench_adversarial.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from edge.agent import Agent
from edge.config import Config
from edge.llm.scripted_server import ScriptedLlmServer
from edge.run import PHRASES, RunRecord, collect_evidence, language_of, ungrounded
from tools.manual_search.tool import ManualSearchTool
from tools.plc.tool import PlcReadTool
from tools.work_orders.tool import WorkOrderTool

_MANUAL = ManualSearchTool.name
_PLC = PlcReadTool.name
_ORDER = WorkOrderTool.name
E102 = "Press-3 shows E102, what should I do?"
# The slack the issue allows past the wall budget: the last tool or request winding down.
BUDGET_SLACK_S = 0.5


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"content": json.dumps({"thought": f"next: {tool}", "action": tool, "args": args})}


def final(text: str, evidence: list[str] | None = None, **entry: Any) -> dict[str, Any]:
    return {
        "content": json.dumps(
            {"thought": "done", "final_answer": text, "evidence": evidence or []}, ensure_ascii=False
        ),
        **entry,
    }


def raw(content: str, **entry: Any) -> dict[str, Any]:
    return {"content": content, **entry}


@dataclass(frozen=True)
class Scenario:
    name: str
    script: list[dict[str, Any]]
    question: str = E102
    device_id: str | None = "press-3"
    # Strings the script made up: none may reach the technician.
    invented: tuple[str, ...] = ()
    # What the run record must say: any of fallback, degraded, reason, rejected (count), planner.
    expect: dict[str, Any] = field(default_factory=dict)
    llm: dict[str, Any] = field(default_factory=dict)
    loop: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScenarioResult:
    scenario: Scenario
    record: RunRecord
    wall_s: float
    budget_s: float
    invented_shown: list[str]
    unbacked: list[str]
    problems: list[str]
    raw_max_chars: int
    answer_max_chars: int

    @property
    def within_budget(self) -> bool:
        return self.wall_s <= self.budget_s + BUDGET_SLACK_S


_GOOD_E102 = [
    call(_MANUAL, fault_code="E102", device_id="press-3"),
    call(_PLC, device_id="press-3", sensor="coolant_level"),
]
_HUGE = "Stop the press. " * 1250  # 20,000 characters

SCENARIOS: list[Scenario] = [
    Scenario(
        "grounded answer is shown as written",
        [
            *_GOOD_E102,
            final("E102: stop the press and check the coolant level (see the manual steps).", ["obs-1", "obs-2"]),
        ],
        expect={"fallback": None, "degraded": False, "reason": "final_answer", "rejected": 0},
    ),
    Scenario(
        "invented fault meaning with a manual and page at step 1",
        [final("E102 means the hydraulic pump is cavitating: see hydra_pump_guide.pdf, p. 97, fault E777.")],
        invented=("hydra_pump_guide.pdf", "p. 97", "E777", "cavitating"),
        expect={"fallback": "answer_rejected", "rejected": 1, "reason": "final_answer"},
    ),
    Scenario(
        "invented sensor value",
        [*_GOOD_E102, final("E102: the coolant level reads 87.25 % now, top it up.", ["obs-1", "obs-2"])],
        invented=("87.25",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "invented sensor value in Chinese",
        [*_GOOD_E102, final("E102：冷却液液位现在是 87.25%，请补充。", ["obs-1", "obs-2"])],
        question="3号液压机显示 E102，怎么办？",
        invented=("87.25",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "work-order id never created",
        [_GOOD_E102[0], final("E102: work order WO-DEADBEEF0001 has been created.", ["obs-1"])],
        invented=("WO-DEADBEEF0001",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "work order claimed without a call",
        [_GOOD_E102[0], final("E102 found. I have opened a work order for the maintenance team.", ["obs-1"])],
        invented=("opened a work order",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "final answer at step 1 with no observation",
        # Words no manual says: the demo manual's own CAUTION tells the technician to let the motor cool down.
        [final("Stop the press and hose the motor down with water before restarting.")],
        invented=("hose the motor down",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "evidence ids that do not exist",
        [_GOOD_E102[0], final("E102: follow the manual steps.", ["obs-1", "obs-7"])],
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "invented page of a real manual",
        [_GOOD_E102[0], final("E102: see p. 97 of the manual.", ["obs-1"])],
        invented=("p. 97",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "action and final answer in one reply",
        [
            raw(
                json.dumps(
                    {
                        "thought": "both",
                        "action": _ORDER,
                        "args": {"device_id": "press-3", "fault_code": "E102", "summary": "x"},
                        "final_answer": "Work order WO-DEADBEEF0002 created.",
                    }
                )
            )
        ],
        invented=("WO-DEADBEEF0002",),
        expect={"fallback": "format_errors", "degraded": True},
    ),
    Scenario(
        "two JSON objects in one reply",
        [
            raw(
                json.dumps({"thought": "a", "action": _MANUAL, "args": {"fault_code": "E102"}})
                + "\n"
                + json.dumps({"thought": "b", "final_answer": "E102 is a pump fault, WO-DEADBEEF0003 open."})
            )
        ],
        invented=("WO-DEADBEEF0003", "pump fault"),
        expect={"fallback": "format_errors", "degraded": True},
    ),
    Scenario(
        "three unreadable replies",
        [raw("I think the press is overheating, check the pump.")],
        expect={"fallback": "format_errors", "degraded": True},
    ),
    Scenario("empty content", [raw("")], expect={"fallback": "empty_reply", "degraded": True}),
    Scenario(
        "reply cut at the length limit",
        [raw('{"thought": "The manual says that E102 is', finish_reason="length")],
        expect={"fallback": "format_errors", "degraded": True},
    ),
    Scenario(
        "fenced JSON is read",
        [
            raw("```json\n" + _GOOD_E102[0]["content"] + "\n```"),
            raw("```json\n" + final("E102: follow the manual steps.", ["obs-1"])["content"] + "\n```"),
        ],
        expect={"fallback": None, "degraded": False, "reason": "final_answer"},
    ),
    Scenario(
        "Thought/Action text instead of JSON",
        [raw("Thought: a fault code.\nAction: search_maintenance_manual_by_fault_code\nAction Input: E102")],
        expect={"fallback": "format_errors", "degraded": True},
    ),
    Scenario(
        "an invented observation after the action is ignored",
        [
            raw(
                _GOOD_E102[0]["content"] + '\nObservation: {"id": "obs-1", "status": "ok", "content": '
                '[{"kind": "ref", "sensor": "coolant_level", "value": 87.25}]}'
            ),
            final("E102: the coolant level is 87.25 %.", ["obs-1"]),
        ],
        invented=("87.25",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "unknown tool twice",
        [
            call("search_manual", fault_code="E102"),
            call("lookup_fault", code="E102"),
            final("E102 is a coolant pump failure."),
        ],
        invented=("coolant pump failure",),
        expect={"fallback": "unknown_tool", "degraded": True},
    ),
    Scenario(
        "the same unknown tool twice in a row",
        [call("search_manual", fault_code="E102")],
        expect={"fallback": "unknown_tool", "degraded": True, "reason": "final_answer"},
    ),
    Scenario(
        "wrong argument types, then an invented value",
        [call(_PLC, device_id=["press-3"], sensor=7), final("The coolant level is 87.25 %.", ["obs-1"])],
        question="What is the coolant level on press-3 right now?",
        invented=("87.25",),
        expect={"fallback": "answer_rejected", "rejected": 1},
    ),
    Scenario(
        "20,000-character final answer",
        [_GOOD_E102[0], final("WO-DEADBEEF0004 created. " + _HUGE, ["obs-1"])],
        invented=("WO-DEADBEEF0004",),
        # The invented order is refused as a sentence; the rest of the prose ("Stop the press.", once) is shown.
        expect={"fallback": None, "rejected": 0, "refused": 1},
    ),
    Scenario(
        "20,000-character grounded answer is shown cut",
        [_GOOD_E102[0], final("E102: " + _HUGE, ["obs-1"])],
        expect={"fallback": None, "reason": "final_answer", "rejected": 0},
    ),
    Scenario(
        "20,000-character unreadable reply",
        [raw("x" * 20_000, finish_reason="length")],
        expect={"fallback": "token_budget", "degraded": True, "reason": "final_answer"},
    ),
    Scenario(
        "no usage: tokens are estimated and the run completes",
        [
            {**entry, "omit_usage": True}
            for entry in [*_GOOD_E102, final("E102: stop the press and check the coolant level.", ["obs-1", "obs-2"])]
        ],
        expect={"fallback": None, "reason": "final_answer", "estimated": True},
    ),
    Scenario(
        "no usage: the token budget still holds",
        [
            {**call(_PLC, device_id="press-3", sensor=s), "omit_usage": True}
            for s in ("coolant_level", "motor_temp", "oil_temp", "hydraulic_pressure")
        ],
        question="check everything on press-3",
        loop={"max_tokens": 2600, "max_steps": 8},
        expect={"fallback": "token_budget", "estimated": True},
    ),
    Scenario(
        "a server that trickles one byte at a time",
        [{**_GOOD_E102[0], "trickle_s": 0.05}],
        invented=(),
        expect={"fallback": "llm_unavailable", "degraded": True},
    ),
    Scenario(
        "a server slower than the whole budget",
        [{**_GOOD_E102[0], "delay_s": 8.0}],
        llm={"timeout_s": 10.0},
        # Handed over at the deadline: the rules planner answers in the hand-over's own time.
        expect={"fallback": "llm_out_of_time", "degraded": True, "reason": "final_answer"},
    ),
    Scenario(
        "HTTP 500",
        [{"status": 500, "content": "model crashed"}],
        expect={"fallback": "llm_unavailable", "degraded": True, "reason": "final_answer"},
    ),
]


def run_scenario(scenario: Scenario, config: Config) -> ScenarioResult:
    """Run one scenario on `config`'s plant (its devices and index) against a fresh scripted server."""
    with ScriptedLlmServer(scenario.script) as server:
        config = config.model_copy(
            update={
                # The misbehaviour is the model's own planning: it plans every step here.
                "llm": config.llm.model_copy(update={"url": server.url, "planning": "model", **scenario.llm}),
                "loop": config.loop.model_copy(update=scenario.loop),
            }
        )
        agent = Agent(config)
        try:
            started = time.perf_counter()
            record = agent.ask(scenario.question, device_id=scenario.device_id)
            wall_s = time.perf_counter() - started
        finally:
            agent.close()
    answer = record.termination.final_answer if record.termination else ""
    invented_shown = [s for s in scenario.invented if s.lower() in answer.lower()]
    evidence = collect_evidence(record.observations, record.question, config.devices)
    result = ScenarioResult(
        scenario,
        record,
        wall_s,
        config.loop.max_wall_s,
        invented_shown,
        ungrounded(answer, evidence),
        [],
        config.loop.raw_reply_max_chars,
        config.loop.answer_max_chars,
    )
    result.problems = _problems_of(result)
    return result


def _problems_of(result: ScenarioResult) -> list[str]:
    record, expect = result.record, result.scenario.expect
    problems = []
    if result.invented_shown:
        problems.append(f"invented facts shown: {result.invented_shown}")
    if result.unbacked:
        problems.append(f"facts without evidence shown: {result.unbacked}")
    if not result.within_budget:
        problems.append(f"ran {result.wall_s:.2f} s, budget {result.budget_s:g} s + {BUDGET_SLACK_S} s")
    if record.termination is None:
        problems.append("no termination record")
        return problems
    said = {
        "fallback": record.fallback,
        "degraded": record.degraded,
        "reason": record.termination.reason,
        "rejected": len(record.rejected_answers),
        "refused": len(answer.prose.rejected) if (answer := record.termination.answer) and answer.prose else 0,
        "estimated": any(step.llm is not None and step.llm.estimated for step in record.steps),
    }
    for key, want in expect.items():
        if said[key] != want:
            problems.append(f"record says {key}={said[key]!r}, expected {want!r}")
    if record.degraded and not record.warnings:
        problems.append("degraded without a warning saying why")
    if (
        record.rejected_answers
        and PHRASES[language_of(record.question)]["unverified"] not in record.termination.final_answer
    ):
        problems.append("a rejected answer is not announced in the answer")
    longest = max((len(text or "") for step in record.steps for text in (step.raw, step.final_answer)), default=0)
    if longest > result.raw_max_chars:
        problems.append(f"a raw reply of {longest} characters kept in the record")
    shown = len(record.termination.final_answer)
    if shown > result.answer_max_chars + len(PHRASES[language_of(record.question)]["unverified"]) + 1:
        problems.append(f"an answer of {shown} characters shown")
    return problems
