"""Rules first, the model where it adds: one planner out of the rules planner and the language model.

The rules' trigger stage takes every step it is certain of (a code the manuals list -> the manual; a
named sensor with "now" -> the reading; the sensor a manual entry names; an order asked for) without a
model round trip. The model is asked only where the rules would guess (a symptom's search words, which
sensor a vague question means, a follow-up's referent, a reworded search after `not_found`) and for the
answer's prose; there it may call the tool the rules would call, with its own arguments, or answer, so
its steps are never other tools than the rules'. Its round trips are budgeted (`MODEL_ROUND_TRIPS`): one
guessed call, then the prose; once the guess is spent the rules take their own uncertain steps (never
fewer than the rules alone). A guess that is refused or unreadable ends the model's part: the run is
handed to the rules planner, whose answer it is (a model that adds nothing costs one round trip). In
`prose` mode (a model that routes worse than the rules: `edge.planning.probe`) the rules take every step
and the model only writes the answer. Each step's record says which stage decided it and why.

What the model writes into a tool call is held to what its answer is held to: a work-order summary or a
search query that names a manual, page, code or value neither the question nor an observation holds is
sent back to it as an error, not run. A search query must also be about the question: share a word or a
glossary concept with it or the session (SmolLM2 searched "not given (known devices: press-3, cnc-7)", words
from its prompt, and its answer from that search was rejected where the rules' own search would have passed).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from edge.config import PlanningMode
from edge.llm.planner import MODEL_TOOL_CALLS, LlmPlanner
from edge.llm.prompt import repeated_call_note
from edge.rules.planner import RulesPlanner, RuleStep
from edge.run import Decision, FinalAnswer, RunState, ToolCall, collect_evidence, ungrounded
from knowledge.glossary import concepts
from knowledge.text import stem, terms
from tools.manual_search.tool import ManualSearchTool
from tools.plant import DeviceConfig

__all__ = ["RulesFirstPlanner"]

_MANUAL = ManualSearchTool.name
_TOLD_REPEAT = "told_repeat"
_GUESSED = "guessed_steps"
_PINNED = ("device_id", "language")


class RulesFirstPlanner:
    """A planner (`edge.run.Planner`) whose steps are the rules' where they are certain, the model's otherwise."""

    degraded = False

    def __init__(
        self, llm: LlmPlanner, rules: RulesPlanner, devices: dict[str, DeviceConfig], mode: PlanningMode = "rules_first"
    ):
        self.llm = llm
        self.rules = rules
        self.name = llm.name  # the record names the model's planner, whichever stage took a step
        self._devices = devices
        self._plant_ids = {*devices, *(sensor for device in devices.values() for sensor in device.sensors)}
        self._machine_words = {part for name in devices for part in terms(name)}
        self.mode: PlanningMode = mode
        # Why the mode is what it is, when it was set from a routing probe (shown in /healthz).
        self.mode_reason = ""

    def decide(self, state: RunState) -> Decision:
        if self.mode == "model":
            return self._checked(self.llm.decide(state), state, "the model plans every step")
        if self.mode == "prose":
            # The mode line says why the model only writes the prose (the loop reads it off the decision).
            why = self.mode_reason or "configured: llm.planning = prose"
            return dataclasses.replace(self._prose_only(state), prose_only=why)
        pending = self.rules.next_steps(state)
        certain = next((step for step in pending if step.certain), None)
        if certain is not None:
            return _rules(certain, certain.why)
        guess = self._open_guess(pending, state)
        if guess is not None and _model_requests(state) >= MODEL_TOOL_CALLS:
            # The model's guess is spent (the next round trip is the prose): the rules take their own
            # step where they have one; a rewording after `not_found` they have not.
            why, _tool, rules_call = guess
            if rules_call is not None:
                return Decision(action=rules_call, decided_by="rules", why=f"{why}; the model's guess is spent")
            guess = None
        if guess is None:
            return self._answer(state, "the rules have nothing left to call: the model writes the answer")
        # The tool is the rules' (never worse than them); its arguments, or an answer instead, the model's.
        # The kind of call is the rules' too (a symptom's search is by words, not by a code the model
        # makes up); with nothing observed yet an answer could only be rejected, so it is not offered.
        why, tool, rules_call = guess
        # Which machine and which edition are the question's, not a guess: the rules' stay, and the model
        # fills only the rest (Qwen2.5-Coder-0.5B searched "cnc7 rattling like crazy" on press-3).
        if rules_call is not None:  # the step the model's call stands in for, whatever arguments it writes
            state.scratch.setdefault(_GUESSED, set()).add(rules_call.key())
        pinned = _pinned(rules_call.args if rules_call is not None else _last_search_args(state))
        arguments = tuple(name for name in rules_call.args if name not in pinned) if rules_call is not None else None
        decision = self._checked(
            self.llm.decide(state, tools=(tool,), arguments=arguments, answer=bool(state.observations), fixed=pinned),
            state,
            f"the rules would guess: {why}",
        )
        if decision.action is None:
            # One try: asked again, a model that missed once mostly misses again, and each try is a round
            # trip; the rules planner takes the run from here, its steps and its answer.
            return dataclasses.replace(decision, hand_over="guess_unusable")
        return decision

    def _prose_only(self, state: RunState) -> Decision:
        pending = self.rules.next_steps(state)
        if not pending:
            return self._answer(state, "the rules have nothing left to call: the model writes the prose")
        step = next((step for step in pending if step.certain), pending[0])
        return _rules(step, step.why if step.certain else f"{step.why}; the model writes only the prose")

    def _answer(self, state: RunState, why: str) -> Decision:
        decision = _by_model(self.llm.answer_now(state), why)
        if decision.action is None:
            # Asked again it would be a round trip over the budget: the rules planner writes the answer.
            return dataclasses.replace(decision, hand_over="format_errors")
        return decision

    def _open_guess(self, pending: list[RuleStep], state: RunState) -> tuple[str, str, ToolCall | None] | None:
        """What the rules would guess at and the model has not yet decided, or a search that found nothing
        and may be reworded, with the tool it takes and the rules' own call; None when there is nothing
        for the model to decide."""
        for step in pending:
            # Only the step the model was asked to guess is its; two readings the rules would guess at
            # ("oil temp and system pressure") are two steps, the second the rules' once the guess is spent.
            if step.call is not None and step.call.key() not in state.scratch.get(_GUESSED, set()):
                return step.why, step.call.tool, step.call
        last = state.observations[-1] if state.observations else None
        if last is not None and last.tool == _MANUAL and last.status == "not_found":
            return "the manual had nothing under those words: a search in other words", _MANUAL, None
        return None

    def _checked(self, decision: Decision, state: RunState, why: str) -> Decision:
        """The model's decision, unless it repeats a call whose result it holds (it is told so, once) or
        its arguments state what nothing in the run backs (it is told which)."""
        action = decision.action
        if not isinstance(action, ToolCall):
            return _by_model(decision, "the model answers" if isinstance(action, FinalAnswer) else why)
        done = {ToolCall("", s.action, s.args).key(): s for s in state.steps if s.action}
        earlier = done.get(action.key())
        if earlier is not None and not state.scratch.get(_TOLD_REPEAT):
            state.scratch[_TOLD_REPEAT] = True
            held = earlier.observation.id if earlier.observation else None
            return _refused(decision, repeated_call_note(held), "repeated a call: told it holds the result")
        unbacked = self._unbacked_arguments(action, state)
        if unbacked:
            error = (
                f"The arguments of {action.tool} state what neither the question nor an observation holds: "
                f"{', '.join(unbacked)}. Use only their words and ids."
            )
            return _refused(decision, error, "its arguments were not backed: " + ", ".join(unbacked))
        return _by_model(decision, why)

    def _unbacked_arguments(self, action: ToolCall, state: RunState) -> list[str]:
        # The plant's ids are checked by the tool against the plant; the facts a model can invent in
        # free text (a code, a manual, a page, a value) are the ones the answer check knows.
        texts = [
            value
            for value in (action.args or {}).values()
            if isinstance(value, str) and value and value not in self._plant_ids
        ]
        if not texts:
            return []
        evidence = collect_evidence(state.observations, state.question, self._devices, state.session.summary)
        unbacked = [fact for text in texts for fact in ungrounded(text, evidence)]
        query = (action.args or {}).get("query") if action.tool == _MANUAL else None
        if isinstance(query, str) and not self._about(query, [state.question, *state.session.summary]):
            unbacked.append(f"the query '{query}', which shares no word with the question")
        return list(dict.fromkeys(unbacked))

    def _about(self, query: str, told: list[str]) -> bool:
        """Whether a search's words are the question's: one word in common (a machine's id and a bare
        number do not count: they say which machine, not what is wrong with it), or one glossary
        concept, so a Chinese symptom searched in English words of the same meaning is about it."""
        said = " ".join(told)
        words = self._content_words(query)
        if not words or words & self._content_words(said):
            return True
        return bool({c for *_, c in concepts(query)} & {c for *_, c in concepts(said)})

    def _content_words(self, text: str) -> set[str]:
        return {stem(w) for w in terms(text) if w not in self._machine_words and not w.isdigit()}


def _pinned(args: dict[str, Any] | None) -> dict[str, Any]:
    return {name: value for name, value in (args or {}).items() if name in _PINNED}


def _last_search_args(state: RunState) -> dict[str, Any] | None:
    """The arguments of the search a rewording rewords."""
    return next((step.args for step in reversed(state.steps) if step.action == _MANUAL), None)


def _rules(step: RuleStep, why: str) -> Decision:
    return Decision(action=step.call, decided_by="rules", why=why)


def _by_model(decision: Decision, why: str) -> Decision:
    return Decision(
        action=decision.action,
        format_error=decision.format_error,
        raw=decision.raw,
        usage=decision.usage,
        empty=decision.empty,
        decided_by="model",
        why=why,
    )


def _refused(decision: Decision, error: str, why: str) -> Decision:
    """The model's call, not run: `error` goes back to it as the observation of its step."""
    return Decision(
        action=None, format_error=error, raw=decision.raw, usage=decision.usage, decided_by="model", why=why
    )


def _model_requests(state: RunState) -> int:
    """The model's round trips so far: before the answer, each was a guess at a call."""
    return sum(1 for step in state.steps if step.decided_by == "model" and step.llm is not None)
