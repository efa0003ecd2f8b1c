"""The tool registry: the single source of truth for what the agent can call.

The prompt's numbered tool list, the constrained-decoding schema and the
tool docs are all generated from here, so they cannot drift apart.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ValidationError

from tools.contract import Item, Tool, ToolContext, ToolOutput
from tools.observation import Observation


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"tool name registered twice: {tool.name}")
            self._tools[tool.name] = tool
        # Threads, not processes: tools do network and SQLite I/O and hold connections.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="tool")

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for tool in self._tools.values():
            tool.close()

    # -- generated views -------------------------------------------------

    def prompt_tool_list(self) -> str:
        """Numbered list for the system prompt; numbering stops invented names. A tool's first sentence
        says what it is for (the rest of its description is for people reading the docs); every argument
        keeps its format hint, which is what keeps a model's arguments right."""
        lines = []
        for number, tool in enumerate(self._tools.values(), start=1):
            effect = " Creates a record: call at most once per fault." if tool.side_effect else ""
            lines.append(f"{number}. {tool.name}: {_first_sentence(tool.description)}{effect}")
            for arg, spec in tool.input_schema().get("properties", {}).items():
                required = arg in tool.input_schema().get("required", [])
                lines.append(f"   - {arg}{'' if required else ' (optional)'}: {spec.get('description', '')}")
        return "\n".join(lines)

    def action_schema(self) -> dict[str, Any]:
        """JSON Schema of one assistant step: a tool call or a final answer."""
        calls = [
            {
                "type": "object",
                "properties": {
                    "thought": {"type": "string"},
                    "action": {"type": "string", "const": tool.name},
                    "args": _strip_titles(tool.input_schema()),
                },
                "required": ["thought", "action", "args"],
                "additionalProperties": False,
            }
            for tool in self._tools.values()
        ]
        final = {
            "type": "object",
            "properties": {
                "thought": {"type": "string"},
                "final_answer": {"type": "string"},
                "evidence": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["thought", "final_answer"],
            "additionalProperties": False,
        }
        return {"anyOf": [*calls, final]}

    def docs_markdown(self) -> str:
        parts = ["# Tools\n", "Generated from the tool registry (`fixloop tools --markdown`).\n"]
        for tool in self._tools.values():
            parts.append(f"## `{tool.name}`\n\n{tool.description}\n")
            parts.append(f"- timeout: {tool.timeout_s:g} s\n- side effect: {'yes' if tool.side_effect else 'no'}\n")
            parts.append(f"- output fields: {', '.join(sorted(tool.output_fields))}\n\n")
            parts.append("| argument | required | description |\n|---|---|---|\n")
            schema = tool.input_schema()
            for arg, spec in schema.get("properties", {}).items():
                required = "yes" if arg in schema.get("required", []) else "no"
                parts.append(f"| `{arg}` | {required} | {spec.get('description', '')} |\n")
            parts.append("\n")
        return "".join(parts)

    # -- execution -------------------------------------------------------

    def call(
        self, name: str, args: Any, ctx: ToolContext, observation_id: str, time_left_s: float | None = None
    ) -> Observation:
        """Run a tool within its own timeout, and within `time_left_s` (the caller's deadline) if sooner."""
        started = time.perf_counter()
        output = self._call(name, args, ctx, time_left_s)
        tool = self._tools.get(name)
        content, dropped = _whitelist(output.items, tool.output_fields if tool else frozenset())
        return Observation(
            id=observation_id,
            request_id=ctx.request_id,
            loop_step=ctx.loop_step,
            tool=name,
            status=output.status,
            source=output.source or name,
            confidence=output.confidence,
            content=content,
            error_code=output.error_code,
            suggestion=output.suggestion,
            dropped_fields=dropped,
            prompt_fields=sorted(tool.prompt_fields) if tool and tool.prompt_fields is not None else None,
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )

    def _call(self, name: str, args: Any, ctx: ToolContext, time_left_s: float | None) -> ToolOutput:
        tool = self._tools.get(name)
        if tool is None:
            closest = difflib.get_close_matches(name, self.names, n=1, cutoff=0.0)
            return ToolOutput.error(
                "unknown_tool",
                f"There is no tool named {name!r}. Available tools: {', '.join(self.names)}.",
                f"Use {closest[0]!r} if that is what you meant; copy tool names exactly from the numbered list."
                if closest
                else "Answer from the observations you have.",
            )
        if not isinstance(args, dict):
            return ToolOutput.error(
                "invalid_arguments",
                f"Arguments for {name} must be a JSON object, got {type(args).__name__}.",
                f"Send args as an object, e.g. {_example_args(tool)}.",
            )
        try:
            parsed = tool.input_model.model_validate(args)
        except ValidationError as exc:
            return _validation_error(tool, exc)
        timeout_s = tool.timeout_s if time_left_s is None else max(0.0, min(tool.timeout_s, time_left_s))
        future = self._pool.submit(tool.run, parsed, ctx)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            return ToolOutput.error(
                "timeout",
                f"{name} did not answer within {round(timeout_s, 2):g} s.",
                "Do not repeat the same call; answer from what you have and say what is missing.",
            )
        except Exception as exc:  # a tool bug must become an observation, not kill the run
            return ToolOutput.error(
                "tool_failed",
                f"{name} failed: {type(exc).__name__}: {exc}",
                "Do not repeat the same call; answer from what you have and say what is missing.",
            )


def _whitelist(items: list[Item], allowed: frozenset[str]) -> tuple[list[Item], list[str]]:
    kept: list[Item] = []
    dropped: set[str] = set()
    for item in items:
        fields = {k: v for k, v in item.fields.items() if k in allowed}
        dropped.update(k for k in item.fields if k not in allowed)
        kept.append(item.model_copy(update={"fields": fields}))
    return kept, sorted(dropped)


def _validation_error(tool: Tool, exc: ValidationError) -> ToolOutput:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(arguments)"
    spec = tool.input_schema().get("properties", {}).get(field.split(".")[0], {})
    hint = spec.get("description") or f"see the schema of {tool.name}"
    return ToolOutput.error(
        "invalid_arguments",
        f"Argument {field!r} of {tool.name}: {first['msg']}.",
        f"Fix {field!r}: {hint}",
    )


def _example_args(tool: Tool) -> str:
    schema = tool.input_schema()
    example = {
        arg: (spec.get("examples") or ["..."])[0]
        for arg, spec in schema.get("properties", {}).items()
        if arg in schema.get("required", [])
    }
    return str(example)


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _strip_titles(schema: Any) -> Any:
    """Titles add tokens to the decoding schema and carry no constraint."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema
