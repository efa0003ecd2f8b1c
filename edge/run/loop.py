"""The ReAct loop: plan one action, run it through the registry, observe, repeat.

Termination has three levels:
- strong: the planner gives a final answer;
- weak: the same call with the same arguments twice in a row, the same
  observation twice in a row, or the same call a third time in one run;
- budget: steps or wall time (the token budget, from the server's usage or
  an estimate, ends the LLM's part of the run: see below).
On a weak or budget stop the agent still answers from what it has and says
what is missing.

The run never gives up on the LLM's account: a dead, stalling or open-breaker
LLM, too many unreadable replies, an empty reply, a second call of a tool
that does not exist or a used-up token budget switch the run to the rules
planner (degraded, and the answer says so). So does a model that got nowhere:
a weak or budget stop while the model plans hands the run over, and the rules
planner answers from the question and whatever did work. A hand-over brings
its own steps and time (`[loop] handover_steps`, `handover_wall_s`): the
model's format errors and slow steps must not eat the answer that can be
given. The wall budget is a deadline every LLM request and tool call is held
to. Every answer is a document code builds from the observations
(`edge.run.compose`); a model's final answer is only its prose, shown sentence
by sentence as each passes the checks (`edge.run.prose`). A model answer none of
whose sentences may be shown, or that cites observations that do not exist, is
kept in the record, and the rules planner answers instead.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edge.config import LoopConfig
from edge.run import events
from edge.run.actions import FinalAnswer, ToolCall
from edge.run.compose import build_document, supporting_ids
from edge.run.document import AnswerDocument, Mode, Prose
from edge.run.phrases import PHRASES, language_of
from edge.run.planner import (
    ContextFull,
    Decision,
    LlmCircuitOpen,
    LlmOutOfTime,
    LlmUnavailable,
    Planner,
    RunState,
    SessionContext,
)
from edge.run.prose import check_prose
from edge.run.record import (
    COMPOSER,
    FALLBACK_SEPARATOR,
    FallbackReason,
    RejectedAnswer,
    RunRecord,
    Step,
    Termination,
    TerminationReason,
    cap_text,
)
from edge.run.render import render_text
from edge.run.sessions import listed_codes
from edge.run.verification import AnswerVerifier
from tools.contract import ToolContext
from tools.observation import Observation, now_ms
from tools.plant import devices_named
from tools.registry import ToolRegistry
from tools.work_orders.requested import declines_order

EventSink = Callable[[events.RunEvent], None]

REPEATED_CALL_LIMIT = 3
# `LlmPlanner.name`: a rejected answer of the model is announced as such in the answer shown instead.
LLM_PLANNER = "llm"
# A second call of a tool that does not exist: the model is not reading the tool list.
UNKNOWN_TOOL_LIMIT = 2
# The weak and budget stops that hand a model's run over instead of ending it.
HANDED_OVER: dict[TerminationReason, FallbackReason] = {
    "repeated_action": "repeated_calls",
    "repeated_call_limit": "repeated_calls",
    "repeated_observation": "repeated_calls",
    "max_steps": "max_steps",
    "time_budget": "time_budget",
}


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
    def __init__(
        self, registry: ToolRegistry, planner: Planner, fallback: Planner, limits: LoopConfig, verifier: AnswerVerifier
    ):
        self.registry = registry
        self.planner = planner
        self.fallback = fallback
        self.limits = limits
        self.verifier = verifier

    def run(
        self, request: RunRequest, on_event: EventSink | None = None, cancel: threading.Event | None = None
    ) -> RunRecord:
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
        deadline = time.monotonic() + loop.limits.max_wall_s
        self.record = RunRecord(
            run_id=request.run_id,
            request_id=request.request_id,
            session_id=request.session_id,
            question=request.question,
            device_id=request.device_id,
            actor=request.actor,
            alarm=request.alarm,
            planner=self.planner.name,
            degraded=self.planner.degraded,
            started_ms=now_ms(),
        )
        self.state = RunState(
            question=request.question,
            device_id=request.device_id,
            session=request.session,
            actor=request.actor,
            propose_work_order=request.propose_work_order,
            alarm=request.alarm,
            deadline=deadline,
        )
        # What the loop itself writes into the trace and the answer, in the question's language.
        self.words = PHRASES[language_of(request.question)]
        self.calls: Counter[str] = Counter()
        self.unknown_tools = 0
        self.step_limit = loop.limits.max_steps
        # Why the model only wrote the prose (the rules took every step), for the mode line.
        self.prose_only: str | None = None
        # The devices this request is about: those its question names, else the tablet's or the session's.
        named = devices_named(loop.verifier.devices, request.question)
        fallback_device = request.device_id or request.session.device_id
        self.devices = tuple(named or ([fallback_device] if fallback_device else []))

    def emit(self, event: Callable[..., events.RunEvent], **fields: Any) -> None:
        self.emit_raw(event(run_id=self.record.run_id, **fields))

    def execute(self) -> RunRecord:
        self.emit(
            events.RunStartedEvent,
            question=self.request.question,
            device_id=self.request.device_id,
            planner=self.planner.name,
            degraded=self.record.degraded,
        )
        format_errors = 0
        limits = self.loop.limits
        n = 0
        while True:
            if n >= self.step_limit and not self.hand_over("max_steps"):
                return self.finish("max_steps")
            n += 1
            if self.state.time_left() <= 0 and not self.hand_over("time_budget"):
                return self.finish("time_budget")
            if self.record.context_tokens >= limits.max_tokens:  # no more LLM requests; the rules planner costs none
                self.fall_back("token_budget")
            step_started = time.perf_counter()
            decision = self.decide()
            if decision is None:
                return self.finish("time_budget")
            step = Step(
                n=n,
                planner=self.planner.name,
                decided_by=decision.decided_by or ("rules" if self.planner is self.loop.fallback else "model"),
                why=decision.why or self.handed_over_why(),
                raw=decision.raw,
                llm=decision.usage,
                planner_ms=(time.perf_counter() - step_started) * 1000,
            )
            self.prose_only = decision.prose_only or self.prose_only
            self.count_tokens(decision)
            action = decision.action
            if action is None:  # an unreadable reply; the planner says why
                step.format_error = decision.format_error or "The reply held no action."
                self.add(step, step_started)
                self.emit(events.FormatErrorEvent, step=n, planner=step.planner, error=step.format_error)
                format_errors += 1
                if decision.empty:
                    self.fall_back("empty_reply")
                elif decision.hand_over:
                    self.fall_back(decision.hand_over)
                elif format_errors > limits.max_format_errors:
                    self.fall_back("format_errors")
                continue
            format_errors = 0
            step.thought = self.shown_thought(action, step.decided_by)
            if step.thought:
                self.emit(events.ThoughtEvent, step=n, planner=step.planner, text=step.thought)
            if isinstance(action, FinalAnswer):
                answer = step.final_answer = cap_text(action.text, limits.answer_max_chars)
                self.add(step, step_started)
                if action.document is not None:  # built by code from the observations (the rules planner)
                    problems = self.loop.verifier.unbacked(answer, self.state)
                    if not problems:
                        return self.finish("final_answer", document=action.document, evidence=action.evidence)
                    self.reject(step, answer, problems)
                    return self.finish("final_answer", document=self.fact_free())
                document = build_document(self.request.question, self.state.observations)
                prose = self.checked(answer, document)
                problems = self.loop.verifier.structural_problems(action.evidence, self.state)
                if not problems and prose.sentences:
                    document.prose = prose
                    return self.finish("final_answer", document=document, evidence=action.evidence)
                reasons = [f"{r.text}: {'; '.join(r.reasons)}" for r in prose.rejected]
                self.reject(step, answer, problems or [f"no sentence could be shown ({' | '.join(reasons)})"])
                self.fall_back("answer_rejected")
                continue
            step.action, step.args = action.tool, action.args
            self.emit(events.ActionEvent, step=n, planner=step.planner, tool=action.tool, args=action.args)
            if self.cancel.is_set():
                self.add(step, step_started)
                return self.finish("takeover", pending=action)
            if action.tool not in self.loop.registry.names:
                self.unknown_tools += 1
                if self.unknown_tools >= UNKNOWN_TOOL_LIMIT:  # the first got the tool list; no use repeating it
                    self.add(step, step_started)
                    self.fall_back("unknown_tool")
                    continue
            stop = self.repetition(action)
            if stop:
                self.add(step, step_started)
                if self.hand_over(stop):
                    continue
                return self.finish(stop)
            if self.state.time_left() <= 0:  # the planner used up the budget: no tool starts past it
                self.add(step, step_started)
                if self.hand_over("time_budget"):
                    continue
                return self.finish("time_budget")
            observation = self.observe(action, n)
            step.observation = observation
            step.tool_ms = observation.elapsed_ms
            self.add(step, step_started)
            # A copy: the planner's next prompt marks the record's observation `truncated` when it cuts it.
            self.emit(events.ObservationEvent, step=n, observation=observation.model_copy())
            # A planner that got the result it already held hands over; the rules planner, whose calls are
            # finite and never repeated, goes on to its next step or its answer (after a hand-over it searches
            # in its own words what the model's words found: the same entry is no reason to end the run).
            if observation.no_new_information and self.planner is not self.loop.fallback:
                self.hand_over("repeated_observation")

    def hand_over(self, stop: TerminationReason) -> bool:
        """A weak or budget stop while the model plans: the rules planner goes on instead. False when
        the rules planner is the one that stopped (then the run ends)."""
        if self.planner is self.loop.fallback:
            return False
        self.fall_back(HANDED_OVER[stop])
        return True

    def handed_over_why(self) -> str:
        return f"the model handed over ({self.record.fallback})" if self.record.fallback else ""

    def decide(self) -> Decision | None:
        """The planner's next decision; None when the LLM used up the rest of the run's time."""
        try:
            return self.planner.decide(self.state)
        except LlmUnavailable as exc:
            if isinstance(exc, ContextFull):
                self.fall_back("token_budget")
            else:
                reason: FallbackReason = (
                    "circuit_open"
                    if isinstance(exc, LlmCircuitOpen)
                    else "llm_out_of_time"
                    if isinstance(exc, LlmOutOfTime)
                    else "llm_unavailable"
                )
                self.fall_back(reason, self.words["llm_down"].format(error=exc))
            if self.state.time_left() <= 0:
                return None
            return self.planner.decide(self.state)

    def shown_thought(self, action: ToolCall | FinalAnswer, decided_by: str) -> str:
        """A model's thought as the technician may read it: only when it passes the checks a sentence of
        its answer passes; otherwise the action it led to (the record keeps the raw reply)."""
        if decided_by == "rules" or not action.thought:
            return action.thought  # the rules' thoughts are their phrase table's
        if self.checked(action.thought, build_document(self.request.question, self.state.observations)).rejected:
            return "" if isinstance(action, FinalAnswer) else self.words["thought_action"].format(tool=action.tool)
        return action.thought

    def checked(self, text: str, document: AnswerDocument) -> Prose:
        return check_prose(text, document, lambda sentence: self.loop.verifier.sentence_problems(sentence, self.state))

    def fall_back(self, reason: FallbackReason, why: str | None = None) -> None:
        """Go on with the rules planner: degraded, and said in the warnings and the answer."""
        if self.planner is self.loop.fallback:
            return
        why = why or self.words["set_aside"].format(why=self.words[f"fallback_{reason}"])
        warning = self.words["handover"].format(why=why)
        limits = self.loop.limits
        self.step_limit = max(self.step_limit, len(self.record.steps) + limits.handover_steps)
        self.state.deadline = max(self.state.deadline, time.monotonic() + limits.handover_wall_s)
        self.record.warnings.append(warning)
        self.record.degraded = True
        self.record.fallback = reason
        self.record.planner = f"{self.record.planner}{FALLBACK_SEPARATOR}{self.loop.fallback.name}"
        self.planner = self.loop.fallback
        self.emit(events.WarningEvent, text=warning)

    def reject(self, step: Step, answer: str, problems: list[str]) -> None:
        rejected = RejectedAnswer(step=step.n, planner=step.planner, text=answer, problems=problems)
        self.record.rejected_answers.append(rejected)
        self.record.warnings.append(rejected.warning)
        self.emit(events.AnswerRejectedEvent, step=step.n, problems=problems)

    def fact_free(self) -> AnswerDocument:
        """What the technician reads when even an answer composed from the observations fails the check
        (a bug in the composer, never the model's doing): that nothing could be found, and no facts."""
        return build_document(self.request.question, [])

    def count_tokens(self, decision: Decision) -> None:
        if decision.usage:
            self.record.prompt_tokens += decision.usage.prompt_tokens
            self.record.completion_tokens += decision.usage.completion_tokens
            # Each request's prompt holds the whole run so far: its size plus the reply is the run's context.
            self.record.context_tokens = decision.usage.prompt_tokens + decision.usage.completion_tokens

    def repetition(self, action: ToolCall) -> TerminationReason | None:
        key = action.key()
        previous = next(((s.action, s.args) for s in reversed(self.record.steps) if s.action), None)
        if previous is not None and ToolCall("", *previous).key() == key:
            return "repeated_action"
        self.calls[key] += 1
        if self.calls[key] >= REPEATED_CALL_LIMIT:
            return "repeated_call_limit"
        return None

    def observe(self, action: ToolCall, n: int) -> Observation:
        ctx = ToolContext(
            request_id=self.request.request_id,
            run_id=self.request.run_id,
            loop_step=n,
            actor=self.request.actor,  # type: ignore[arg-type]
            require_confirmation=self.request.require_confirmation,
            alarm=self.request.alarm,
            evidence=tuple(evidence_of(self.state.observations)),
            devices=self.devices,
            orders_declined=declines_order(self.request.question),
            listed_codes=None
            if self.request.alarm
            else (*listed_codes(self.state.observations), *self.request.session.listed_codes),
        )
        observation = self.loop.registry.call(
            action.tool, action.args, ctx, observation_id=f"obs-{n}", time_left_s=self.state.time_left()
        )
        previous = self.state.observations[-1] if self.state.observations else None
        if previous is not None and previous.fingerprint() == observation.fingerprint():
            observation.no_new_information = True
        return observation

    def add(self, step: Step, step_started: float) -> None:
        step.step_ms = (time.perf_counter() - step_started) * 1000
        self.record.steps.append(step)
        self.state.steps.append(step)

    def finish(
        self,
        reason: TerminationReason,
        document: AnswerDocument | None = None,
        evidence: list[str] | None = None,
        pending: ToolCall | None = None,
    ) -> RunRecord:
        observations = self.state.observations
        known = {obs.id for obs in observations}
        supporting = [e for e in (evidence or []) if e in known] or supporting_ids(observations)
        missing = (
            [] if reason == "final_answer" else [self.words["stopped_early"].format(why=self.words[f"stop_{reason}"])]
        )
        if document is None:
            document = self.composed(missing)
        document.mode, document.mode_reason = self.mode()
        if any(rejected.planner == LLM_PLANNER for rejected in self.record.rejected_answers):
            document.notices.insert(0, self.words["unverified"])
        answer = document.text = cap_text(render_text(document), self.loop.limits.answer_max_chars)
        confidences = [obs.confidence for obs in observations if obs.id in supporting]
        confidence = sum(confidences) / len(confidences) if confidences else 0.0
        if reason != "final_answer":
            confidence /= 2
        self.record.termination = Termination(
            reason=reason,
            final_answer=answer,
            supporting_observations=supporting,
            confidence=round(confidence, 3),
            missing=missing,
            pending_action={"tool": pending.tool, "args": pending.args, "thought": pending.thought}
            if pending
            else None,
            answer=document,
        )
        self.record.elapsed_ms = (time.perf_counter() - self.started) * 1000
        self.emit(events.FinalAnswerEvent, text=answer)
        self.emit(events.TerminationEvent, termination=self.record.termination)
        return self.record

    def composed(self, missing: list[str]) -> AnswerDocument:
        """The answer of a run stopped early, from its observations; it passes the same check."""
        document = build_document(self.request.question, self.state.observations, missing=missing)
        answer = render_text(document)
        problems = self.loop.verifier.unbacked(answer, self.state)
        if not problems:
            return document
        self.record.rejected_answers.append(
            RejectedAnswer(step=len(self.record.steps), planner=COMPOSER, text=answer, problems=problems)
        )
        return self.fact_free()

    def mode(self) -> tuple[Mode, str | None]:
        """What really planned this answer, for its mode line."""
        fallback = self.record.fallback
        if fallback is None:
            if self.loop.planner is self.loop.fallback:
                return "no_model", None
            if not self.prose_only:
                return "model", None
            # The probe's figures stay in /healthz: an answer's numbers must be the observations', and these are not.
            configured = self.prose_only.startswith("configured")
            return "rules_first", self.words["prose_configured" if configured else "routes_worse"]
        if fallback in ("llm_unavailable", "circuit_open", "llm_out_of_time"):
            return "model_unavailable", self.words[f"fallback_{fallback}"]
        return "handed_over", self.words[f"fallback_{fallback}"]


def evidence_of(observations: list[Observation]) -> list[dict[str, Any]]:
    """Manual refs and sensor readings gathered so far: the trace a work order keeps."""
    return [
        {"tool": obs.tool, "observation": obs.id, **item.fields}
        for obs in observations
        if obs.status in ("ok", "degraded")
        for item in obs.content
        if item.kind == "ref"
    ]
