"""The ReAct loop: plan one action, run it through the registry, observe, repeat.

Termination has three levels:
- strong: the planner gives a final answer;
- weak: the same call with the same arguments twice in a row, the same
  observation twice in a row, or the same call a third time in one run;
- budget: steps, tokens (from the server's usage) or wall time.
On a weak or budget stop the agent still answers from what it has and says
what is missing. A dead LLM switches the run to the rules planner.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from edge.actions import FinalAnswer, ToolCall
from edge.answer import compose_answer, supporting_ids
from edge.config import LoopConfig
from edge.planner import Decision, LlmUnavailable, Planner, RunState, SessionContext
from edge.run_record import RunRecord, Step, Termination, TerminationReason
from tools.contract import ToolContext
from tools.observation import Observation, now_ms
from tools.registry import ToolRegistry

EventSink = Callable[[dict[str, Any]], None]

WEAK_OR_BUDGET_NOTES = {
    "repeated_action": "the same call was about to be repeated",
    "repeated_observation": "a tool kept returning the same result",
    "repeated_call_limit": "the same call was made three times",
    "format_errors": "the language model's replies could not be read",
    "max_steps": "the step budget ran out",
    "token_budget": "the token budget ran out",
    "time_budget": "the time budget ran out",
    "takeover": "a technician took over",
}
REPEATED_CALL_LIMIT = 3


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class RunRequest:
    question: str
    device_id: str | None = None
    session_id: str | None = None
    session: SessionContext = field(default_factory=SessionContext)
    actor: str = "technician"
    require_confirmation: bool = False
    propose_work_order: bool = False
    alarm: dict[str, Any] | None = None
    request_id: str = field(default_factory=lambda: new_id("req"))
    run_id: str = field(default_factory=lambda: new_id("run"))


class AgentLoop:
    def __init__(self, registry: ToolRegistry, planner: Planner, fallback: Planner, limits: LoopConfig):
        self.registry = registry
        self.planner = planner
        self.fallback = fallback
        self.limits = limits

    def run(self, request: RunRequest, on_event: EventSink | None = None,
            cancel: threading.Event | None = None) -> RunRecord:
        return _Run(self, request, on_event or (lambda event: None), cancel or threading.Event()).execute()


class _Run:
    """One run's mutable bookkeeping, kept out of the shared AgentLoop."""

    def __init__(self, loop: AgentLoop, request: RunRequest, emit: EventSink, cancel: threading.Event):
        self.loop = loop
        self.request = request
        self.emit_raw = emit
        self.cancel = cancel
        self.planner = loop.planner
        self.started = time.perf_counter()
        self.record = RunRecord(
            run_id=request.run_id, request_id=request.request_id, session_id=request.session_id,
            question=request.question, device_id=request.device_id, actor=request.actor, alarm=request.alarm,
            planner=self.planner.name, degraded=getattr(self.planner, "degraded", False), started_ms=now_ms(),
        )
        self.state = RunState(question=request.question, device_id=request.device_id, session=request.session,
                              actor=request.actor, propose_work_order=request.propose_work_order,
                              alarm=request.alarm)
        self.calls: Counter[str] = Counter()

    def emit(self, kind: str, **data: Any) -> None:
        self.emit_raw({"type": kind, "run_id": self.record.run_id, **data})

    def execute(self) -> RunRecord:
        self.emit("run_started", question=self.request.question, device_id=self.request.device_id,
                  planner=self.planner.name, degraded=self.record.degraded)
        format_errors = 0
        limits = self.loop.limits
        for n in range(1, limits.max_steps + 1):
            if time.perf_counter() - self.started > limits.max_wall_s:
                return self.finish("time_budget")
            if self.record.context_tokens >= limits.max_tokens:
                return self.finish("token_budget")
            step_started = time.perf_counter()
            decision = self.decide()
            step = Step(n=n, planner=self.planner.name, raw=decision.raw, llm=decision.usage,
                        planner_ms=(time.perf_counter() - step_started) * 1000)
            self.count_tokens(decision)
            if decision.format_error:
                step.format_error = decision.format_error
                self.add(step, step_started)
                self.emit("format_error", step=n, error=decision.format_error)
                format_errors += 1
                if format_errors > limits.max_format_errors:
                    return self.finish("format_errors")
                continue
            format_errors = 0
            action = decision.action
            step.thought = action.thought
            if action.thought:
                self.emit("thought", step=n, text=action.thought)
            if isinstance(action, FinalAnswer):
                step.final_answer = action.text
                self.add(step, step_started)
                return self.finish("final_answer", answer=action.text, evidence=action.evidence)
            step.action, step.args = action.tool, action.args
            self.emit("action", step=n, tool=action.tool, args=action.args)
            if self.cancel.is_set():
                self.add(step, step_started)
                return self.finish("takeover", pending=action)
            stop = self.repetition(action)
            if stop:
                self.add(step, step_started)
                return self.finish(stop)
            observation = self.observe(action, n)
            step.observation = observation
            step.tool_ms = observation.elapsed_ms
            self.add(step, step_started)
            self.emit("observation", step=n, observation=observation.model_dump(mode="json"))
            if observation.no_new_information:
                return self.finish("repeated_observation")
        return self.finish("max_steps")

    def decide(self) -> Decision:
        try:
            return self.planner.decide(self.state)
        except LlmUnavailable as exc:
            warning = f"Language model unavailable ({exc}); answering in degraded mode with the rules planner."
            self.record.warnings.append(warning)
            self.record.degraded = True
            self.record.planner = f"{self.record.planner}->{self.loop.fallback.name}"
            self.planner = self.loop.fallback
            self.emit("warning", text=warning)
            return self.planner.decide(self.state)

    def count_tokens(self, decision: Decision) -> None:
        if decision.usage:
            self.record.prompt_tokens += decision.usage.prompt_tokens
            self.record.completion_tokens += decision.usage.completion_tokens
            # Each request's prompt holds the whole run so far: its size plus the reply is the run's context.
            self.record.context_tokens = decision.usage.prompt_tokens + decision.usage.completion_tokens

    def repetition(self, action: ToolCall) -> TerminationReason | None:
        key = action.key()
        previous = next((s for s in reversed(self.record.steps) if s.action), None)
        if previous is not None and ToolCall("", previous.action, previous.args).key() == key:
            return "repeated_action"
        self.calls[key] += 1
        if self.calls[key] >= REPEATED_CALL_LIMIT:
            return "repeated_call_limit"
        return None

    def observe(self, action: ToolCall, n: int) -> Observation:
        ctx = ToolContext(
            request_id=self.request.request_id, run_id=self.request.run_id, loop_step=n,
            actor=self.request.actor,  # type: ignore[arg-type]
            require_confirmation=self.request.require_confirmation,
            alarm=self.request.alarm, evidence=tuple(evidence_of(self.state.observations)),
        )
        observation = self.loop.registry.call(action.tool, action.args, ctx, observation_id=f"obs-{n}")
        previous = self.state.observations[-1] if self.state.observations else None
        if previous is not None and previous.fingerprint() == observation.fingerprint():
            observation.no_new_information = True
        return observation

    def add(self, step: Step, step_started: float) -> None:
        step.step_ms = (time.perf_counter() - step_started) * 1000
        self.record.steps.append(step)
        self.state.steps.append(step)

    def finish(self, reason: TerminationReason, answer: str | None = None, evidence: list[str] | None = None,
               pending: ToolCall | None = None) -> RunRecord:
        observations = self.state.observations
        known = {obs.id for obs in observations}
        supporting = [e for e in (evidence or []) if e in known] or supporting_ids(observations)
        missing = [] if reason == "final_answer" else [f"stopped early: {WEAK_OR_BUDGET_NOTES[reason]}"]
        if answer is None:
            answer = compose_answer(self.request.question, observations, self.record.degraded, missing)
        confidences = [obs.confidence for obs in observations if obs.id in supporting]
        confidence = sum(confidences) / len(confidences) if confidences else 0.0
        if reason != "final_answer":
            confidence /= 2
        self.record.termination = Termination(
            reason=reason, final_answer=answer, supporting_observations=supporting, confidence=round(confidence, 3),
            missing=missing,
            pending_action={"tool": pending.tool, "args": pending.args, "thought": pending.thought} if pending else None,
        )
        self.record.elapsed_ms = (time.perf_counter() - self.started) * 1000
        self.emit("final_answer", text=answer)
        self.emit("termination", termination=self.record.termination.model_dump(mode="json"))
        return self.record


def evidence_of(observations: list[Observation]) -> list[dict[str, Any]]:
    """Manual refs and sensor readings gathered so far: the trace a work order keeps."""
    return [{"tool": obs.tool, "observation": obs.id, **item.fields}
            for obs in observations if obs.status in ("ok", "degraded")
            for item in obs.content if item.kind == "ref"]
