"""The LLM planner: the prompt in, one parsed action out."""

from __future__ import annotations

import json

from edge.actions import FormatError, parse_action
from edge.llm_client import ChatClient
from edge.planner import Decision, RunState
from edge.prompt import (format_error_message, observation_message, question_message, shared_prefix_chars,
                         system_prompt)
from edge.run_record import LlmUsage
from tools.registry import ToolRegistry


class LlmPlanner:
    name = "llm"

    def __init__(self, client: ChatClient, registry: ToolRegistry, devices: list[str], observation_max_chars: int):
        self.client = client
        self._devices = devices
        self._observation_max_chars = observation_max_chars
        self._system = system_prompt(registry)
        self._schema = registry.action_schema() if client.structured_outputs != "none" else None

    def messages(self, state: RunState) -> list[dict[str, str]]:
        messages = [
            {"role": "system", "content": self._system},
            {"role": "user", "content": question_message(state.question, state.device_id, state.session.summary, self._devices)},
        ]
        for step in state.steps:
            if step.planner != self.name:
                continue
            messages.append({"role": "assistant", "content": step.raw or ""})
            if step.format_error:
                messages.append({"role": "user", "content": format_error_message(step.format_error)})
            elif step.observation is not None:
                messages.append({"role": "user", "content": observation_message(step.observation.render(self._observation_max_chars))})
        return messages

    def decide(self, state: RunState) -> Decision:
        messages = self.messages(state)
        flat = json.dumps(messages, ensure_ascii=False)
        completion = self.client.chat(messages, self._schema)  # LlmUnavailable propagates: the loop degrades
        previous = state.scratch.get("previous_prompt", "")
        state.scratch["previous_prompt"] = flat
        shared = round(completion.prompt_tokens * shared_prefix_chars(previous, flat) / max(len(flat), 1))
        usage = LlmUsage(
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            shared_prefix_tokens=shared,
            cached_tokens=completion.cached_tokens,
            latency_ms=completion.latency_ms,
        )
        try:
            action = parse_action(completion.text)
        except FormatError as exc:
            return Decision(action=None, format_error=str(exc), raw=completion.text, usage=usage)
        return Decision(action=action, raw=completion.text, usage=usage)
