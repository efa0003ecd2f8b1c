"""The LLM planner: the prompt in, one parsed action out.

Every reply is checked, whatever the server claims to constrain: servers drop a constraint they do
not understand without a word. An empty, cut, unreadable or off-schema reply is a format error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from edge.llm.action_schema import ReplyEnvelope, decoding_schema
from edge.llm.client import ChatClient
from edge.llm.prompt import (
    answer_now_note,
    format_error_message,
    holding_note,
    observation_message,
    question_message,
    shared_prefix_chars,
    system_prompt,
)
from edge.llm.tokens import estimate_prompt_tokens, estimate_text_tokens
from edge.run import ContextFull, Decision, FormatError, LlmUsage, RunState, action_of, cap_text, decode_object
from edge.run.actions import FinalAnswer, ToolCall
from edge.run.record import Step
from edge.run.sessions import key_results
from tools.observation import Observation
from tools.plant import DeviceConfig
from tools.registry import ToolRegistry

# How many request timeouts priming the prompt cache may take.
PRIME_TIMEOUTS = 4
# The model's round trips per answer, its tool calls and the answer's prose together (round trips decide
# latency on a GPU box, and each costs seconds on a CPU): with the rules taking the certain steps, one
# guessed call and the answer. A rewording after `not_found` is the model's only when the rules made the
# search; a model that guessed the search has had its try.
MODEL_ROUND_TRIPS = 2
# Its tool calls before it is asked only for the answer (the holding note tells it how many are left).
MODEL_TOOL_CALLS = MODEL_ROUND_TRIPS - 1
# `RunState.scratch` keys: the steps after which the model was told to answer now (kept so that every
# later prompt repeats the same words and the prefix cache holds), and the prompt's length in messages
# at the model's last request.
ANSWER_NOW_AFTER = "answer_now_after"
LAST_REQUEST_MESSAGES = "last_request_messages"


class LlmPlanner:
    name = "llm"
    degraded = False

    def __init__(
        self,
        client: ChatClient,
        registry: ToolRegistry,
        devices: dict[str, DeviceConfig],
        observation_max_chars: int,
        raw_reply_max_chars: int,
        context_tokens: int,
    ):
        self.client = client
        self._devices = list(devices)
        self._observation_max_chars = observation_max_chars
        self._raw_reply_max_chars = raw_reply_max_chars
        self._context_tokens = context_tokens
        self._system = system_prompt(registry, devices)
        action_schema = registry.action_schema()
        self._envelope = ReplyEnvelope(action_schema)
        self._schema = decoding_schema(action_schema, devices) if client.structured_outputs != "none" else None

    def _expected_prompt_tokens(self, state: RunState, messages: list[dict[str, str]]) -> int:
        """The server's count of the last prompt and reply plus an estimate of what was appended since
        (observations, and the steps the rules took); the estimate alone before the first reply."""
        last = next((s for s in reversed(state.steps) if s.planner == self.name and s.llm is not None), None)
        if last is None or last.llm is None or last.llm.estimated:
            return estimate_prompt_tokens(messages)
        # The reply is in the prompt already: one assistant message after the last request's prompt.
        appended = messages[state.scratch.get(LAST_REQUEST_MESSAGES, len(messages) - 1) + 1 :]
        return last.llm.prompt_tokens + last.llm.completion_tokens + estimate_prompt_tokens(appended)

    def prime(self) -> None:
        """One request holding the system prompt, for the server's prefix cache (`ModelProfile.prime_prompt`).
        A cold server evaluates the whole prompt, several steps' worth on a CPU: it gets that long."""
        self.client.chat(
            [{"role": "system", "content": self._system}, {"role": "user", "content": "Ready?"}],
            max_tokens=1,
            timeout_s=PRIME_TIMEOUTS * self.client.timeout_s,
        )

    def messages(self, state: RunState) -> list[dict[str, str]]:
        """The prompt: the constant system prompt, the question, then each step of this planner, the
        model's and the rules' alike, as the model would have written it and what it returned."""
        device_id = state.device_id or state.session.device_id
        messages = [
            {"role": "system", "content": self._system},
            {
                "role": "user",
                "content": question_message(
                    state.question, device_id, state.session.summary, self._devices, from_session=not state.device_id
                ),
            },
        ]
        answer_now = state.scratch.get(ANSWER_NOW_AFTER, set())
        held: list[str] = []
        facts: dict[str, list[str]] = {}
        model_calls = 0
        for n, step in enumerate(state.steps, 1):
            if step.planner != self.name:
                continue
            messages.append({"role": "assistant", "content": step.raw or _as_written(step)})
            if step.format_error:
                messages.append({"role": "user", "content": format_error_message(step.format_error)})
            elif step.observation is not None:
                held.append(step.observation.id)
                facts[step.observation.id] = key_results(step.observation)
                model_calls += step.decided_by == "model"
                note = holding_note(held, max(MODEL_TOOL_CALLS - model_calls, 0))
                messages.append(
                    {
                        "role": "user",
                        "content": observation_message(step.observation.render(self._observation_max_chars), note),
                    }
                )
            if n in answer_now:
                _tell(messages, answer_now_note(held, facts))
        if not state.steps and 0 in answer_now:
            _tell(messages, answer_now_note(held, facts))
        return messages

    def answer_now(self, state: RunState) -> Decision:
        """Ask only for the final answer: the model is told so, and decoding allows nothing else."""
        state.scratch.setdefault(ANSWER_NOW_AFTER, set()).add(len(state.steps))
        return self.decide(state, tools=())

    def decide(
        self,
        state: RunState,
        tools: tuple[str, ...] | None = None,
        arguments: tuple[str, ...] | None = None,
        answer: bool = True,
        fixed: dict[str, Any] | None = None,
    ) -> Decision:
        """The model's next action; with `tools`, only a call of one of them or the final answer is
        decoded (and accepted): () asks for the final answer alone. `arguments`: the names a call must
        fill, no others; `answer=False`: a call only, no final answer; `fixed`: arguments the caller
        knows, set on the call whatever the model wrote for them."""
        messages = self.messages(state)
        if self._expected_prompt_tokens(state, messages) + self.client.max_tokens > self._context_tokens:
            raise ContextFull(f"the next prompt and its reply would not fit {self._context_tokens} tokens")
        flat = json.dumps(messages, ensure_ascii=False)
        # LlmUnavailable propagates: the loop degrades.
        completion = self.client.chat(
            messages,
            self._schema if tools is None else _only(self._schema, tools, arguments, answer, state.observations),
            time_left_s=state.time_left(),
        )
        state.scratch[LAST_REQUEST_MESSAGES] = len(messages)
        previous = state.scratch.get("previous_prompt", "")
        state.scratch["previous_prompt"] = flat
        # Without the server's usage the budget counts a conservative estimate of the same tokens.
        estimated = completion.prompt_tokens is None or completion.completion_tokens is None
        prompt_tokens = completion.prompt_tokens or estimate_prompt_tokens(messages)
        completion_tokens = completion.completion_tokens or estimate_text_tokens(completion.text)
        usage = LlmUsage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            shared_prefix_tokens=round(prompt_tokens * shared_prefix_chars(previous, flat) / max(len(flat), 1)),
            cached_tokens=completion.cached_tokens,
            latency_ms=completion.latency_ms,
            prompt_ms=completion.prompt_ms,
            generation_ms=completion.generation_ms,
            model=completion.model,
            estimated=estimated,
            finish_reason=completion.finish_reason,
        )
        raw = cap_text(completion.text, self._raw_reply_max_chars)
        if not completion.text.strip():
            return Decision(action=None, format_error="The reply was empty.", raw=raw, usage=usage, empty=True)
        if completion.finish_reason == "length":
            return Decision(
                action=None,
                raw=raw,
                usage=usage,
                format_error=(
                    f"The reply was cut at the limit of {self.client.max_tokens} tokens before it was complete. "
                    "Keep the thought to one short sentence and reply with one complete JSON object."
                ),
            )
        try:
            reply = decode_object(completion.text)
            written = reply.get("args")
            if fixed and isinstance(reply.get("action"), str):
                reply["args"] = {**(written if isinstance(written, dict) else {}), **fixed}
            action = action_of(reply)
            errors = self._envelope.errors(reply)
            if errors:
                raise FormatError(" ".join(errors[:2]))
        except FormatError as exc:
            return Decision(action=None, format_error=str(exc), raw=raw, usage=usage)
        error = _not_accepted(action, tools, (*arguments, *(fixed or {})) if arguments is not None else None, answer)
        if error:
            return Decision(action=None, format_error=error, raw=raw, usage=usage)
        return Decision(action=action, raw=raw, usage=usage)


def _not_accepted(
    action: ToolCall | FinalAnswer, tools: tuple[str, ...] | None, arguments: tuple[str, ...] | None, answer: bool
) -> str:
    """Why a reply the request did not allow is refused ("" when it is allowed): a server may drop the
    grammar that would have held it."""
    if tools is None:
        return ""
    if isinstance(action, FinalAnswer):
        return "" if answer else f"Nothing is observed yet to answer from: only {' or '.join(tools)} is accepted now."
    if action.tool not in tools:
        if not tools:
            return "You hold every result the tools will give: only the final answer is accepted now."
        return f"Only {' or '.join([*tools] + (['the final answer'] if answer else []))} is accepted now."
    extra = sorted(set(action.args or {}) - set(arguments)) if arguments is not None else []
    return f"Only the arguments {', '.join(arguments or ())} are accepted now, not {', '.join(extra)}." if extra else ""


def _as_written(step: Step) -> str:
    """A step the rules took, in the shape the model writes its own (the model reads it as its own turn)."""
    return json.dumps({"thought": step.thought, "action": step.action, "args": step.args}, ensure_ascii=False)


def _tell(messages: list[dict[str, str]], note: str) -> None:
    """`note` at the end of the last user turn (a new one after an assistant turn)."""
    if messages[-1]["role"] == "user":
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n{note}"}
    else:
        messages.append({"role": "user", "content": note})


def _only(
    schema: dict[str, Any] | None,
    tools: tuple[str, ...],
    arguments: tuple[str, ...] | None,
    answer: bool,
    observations: Sequence[Observation],
) -> dict[str, Any] | None:
    """`schema` with the calls of `tools` (with exactly `arguments`, when given) and the final answer
    (unless `answer` is False), whose evidence is the ids of `observations` (Qwen2.5-Coder-0.5B cited an
    order id, a tool's name, a manual step's text: the answer was refused for it). With no tool there is
    nothing to decide and so no thought to give: the grammar holds it empty and the reply's tokens are
    the prose (its thoughts there were 30-60 tokens copied from the prompt's notes)."""
    if schema is None:
        return None
    ids = [obs.id for obs in observations]
    kept = []
    for branch in schema["anyOf"]:
        properties = branch["properties"]
        if "final_answer" in properties:
            if answer:
                thought = {"type": "string", "const": ""} if not tools else properties["thought"]
                evidence = (
                    {"type": "array", "items": {"type": "string", "enum": ids}} if ids else properties["evidence"]
                )
                kept.append({**branch, "properties": {**properties, "thought": thought, "evidence": evidence}})
        elif properties["action"].get("const") in tools:
            if arguments is not None:
                args = properties["args"]
                named = {name: spec for name, spec in args["properties"].items() if name in arguments}
                args = {**args, "properties": named, "required": list(named)}
                branch = {**branch, "properties": {**properties, "args": args}}
            kept.append(branch)
    return {**schema, "anyOf": kept}
