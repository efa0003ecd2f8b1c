"""What every OpenAI-compatible server shares, and the few places where each one differs.

A dialect says how a server wants constrained decoding asked for (each one silently drops a form it
does not know, which is why every reply is validated after it arrives), which request fields it adds
(llama-server's `cache_prompt`), what its reply reports beyond OpenAI's `usage` (prompt reuse, prompt
and generation time), and whether a `/models` listing is its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerReport:
    """What a reply says about its own cost, where the server says it."""

    cached_tokens: int | None = None
    prompt_ms: float | None = None
    generation_ms: float | None = None


class Dialect:
    name = "openai"
    # Concurrent requests the server handles well; llama-cpp-python's server runs one at a time.
    serial = False
    # Ask for the reply as a stream of tokens: the only way to stop a request the client gave up on on a
    # server that goes on computing a reply nobody reads. The stream's reply carries no `usage`; the
    # client counts its tokens and times its first one.
    stream = False

    def constraint(self, schema: dict[str, Any], form: str) -> dict[str, Any]:
        """Request fields that constrain decoding to `schema`; `form` is `[llm] structured_outputs`."""
        if form == "none":
            return {}
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "step", "schema": schema}}}

    def extra_fields(self) -> dict[str, Any]:
        return {}

    def report(self, reply: dict[str, Any]) -> ServerReport:
        usage = reply.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return ServerReport(cached_tokens=_count(details.get("cached_tokens")))

    def recognises(self, model_entry: dict[str, Any]) -> bool:
        """Whether an entry of the server's `/models` list is this server's own."""
        return False


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _ms(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None
