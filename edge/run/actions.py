"""Parsing one model step into a tool call or a final answer.

The model writes our own JSON object in the assistant message:
``{"thought": ..., "action": TOOL, "args": {...}}`` or
``{"thought": ..., "final_answer": ..., "evidence": [...]}``. Constrained
decoding makes this reliable on vLLM; the parser still tolerates what
unconstrained servers add around it (a "Thought:" preamble, code fences,
a hallucinated "Observation" after the object). It refuses what would make
the loop guess: a reply holding both an action and a final answer (the
action would never run while the answer claims it did) or two JSON objects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edge.run.document import AnswerDocument

_TRAILING_OBSERVATION = re.compile(r"\s*Observ(?:ation)?:?\s*$")
# A server that ignores the stop sequence goes on to invent the tool's reply: never ours to read.
_INVENTED_OBSERVATION = re.compile(r"\n\s*Observation:")
_FENCE = "```"


class FormatError(ValueError):
    """The step could not be read; the message is shown to the model."""


@dataclass(frozen=True)
class ToolCall:
    thought: str
    tool: str
    args: Any

    def key(self) -> str:
        return json.dumps([self.tool, self.args], sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class FinalAnswer:
    thought: str
    text: str
    evidence: list[str] = field(default_factory=list)
    # A planner that writes no prose of its own (the rules planner) hands over the document it built from
    # the observations; a model's `text` is its prose, checked sentence by sentence (`edge.run.prose`).
    document: AnswerDocument | None = None


Action = ToolCall | FinalAnswer


def strip_stop_residue(text: str) -> str:
    """Qwen tokenises "Observation:" in two, so a stop sequence can leave "Observ" behind."""
    return _TRAILING_OBSERVATION.sub("", text)


def decode_object(text: str) -> dict[str, Any]:
    """The reply's one JSON object, as the model wrote it."""
    return _first_json_object(strip_stop_residue(text))


def parse_action(text: str) -> Action:
    return action_of(decode_object(text))


def action_of(obj: dict[str, Any]) -> Action:
    """The tool call or final answer a decoded reply holds."""
    thought = obj.get("thought", "")
    if not isinstance(thought, str):
        raise FormatError('"thought" must be a string.')
    if "final_answer" in obj and "action" in obj:
        raise FormatError(
            'The reply holds both "action" and "final_answer". Either call one tool and wait for '
            "its observation, or give the final answer; never both in one reply."
        )
    if "final_answer" in obj:
        answer = obj["final_answer"]
        if not isinstance(answer, str) or not answer.strip():
            raise FormatError('"final_answer" must be a non-empty string.')
        evidence = obj.get("evidence", [])
        if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
            raise FormatError('"evidence" must be a list of observation ids (strings).')
        return FinalAnswer(thought=thought, text=answer.strip(), evidence=evidence)
    if "action" in obj:
        tool = obj["action"]
        if not isinstance(tool, str) or not tool.strip():
            raise FormatError('"action" must be a tool name (string).')
        return ToolCall(thought=thought, tool=tool.strip(), args=obj.get("args", {}))
    raise FormatError('The JSON object needs either "action" with "args", or "final_answer".')


def _first_json_object(text: str) -> dict[str, Any]:
    # The object is decoded in place, never cut out between fences first: a fence inside one of its
    # strings would cut it short. Prose before an opening fence may hold braces of its own.
    opening = text.find(_FENCE)
    start = text.find("{", opening if opening >= 0 else 0)
    if start < 0:
        raise FormatError("No JSON object found. Reply with exactly one JSON object.")
    decoder = json.JSONDecoder()
    try:
        obj, end = decoder.raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"Invalid JSON at character {exc.pos}: {exc.msg}. Reply with exactly one JSON object."
        ) from None
    if not isinstance(obj, dict):
        raise FormatError(
            f"The reply is a JSON {type(obj).__name__}, not an object. Reply with exactly one JSON object."
        )
    rest = _INVENTED_OBSERVATION.split(text[start + end :], maxsplit=1)[0]
    if "{" in rest:
        second = rest.index("{")
        try:
            decoder.raw_decode(rest[second:])
        except json.JSONDecodeError:
            return obj  # braces in trailing prose are no second object
        raise FormatError(
            "The reply holds two JSON objects. Reply with exactly one: one tool call, "
            "or the final answer after the observations."
        )
    return obj
