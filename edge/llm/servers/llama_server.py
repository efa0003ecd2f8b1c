"""llama.cpp's own `llama-server`: the nested `response_format` json_schema form, `cache_prompt`, `timings`.

Its replies carry `timings` (`cache_n` prompt tokens reused from the slot's cache, `prompt_n` evaluated,
`prompt_ms`, `predicted_ms`); its `/models` entries are `owned_by: "llamacpp"`.
"""

from __future__ import annotations

from typing import Any

from edge.llm.servers.base import Dialect, ServerReport, _count, _ms


class LlamaServer(Dialect):
    name = "llama-server"

    def extra_fields(self) -> dict[str, Any]:
        # Reuse the slot's KV cache for the prompt's unchanged start: our prompts only grow.
        return {"cache_prompt": True}

    def report(self, reply: dict[str, Any]) -> ServerReport:
        timings = reply.get("timings") or {}
        if not timings:
            return super().report(reply)
        return ServerReport(
            cached_tokens=_count(timings.get("cache_n")),
            prompt_ms=_ms(timings.get("prompt_ms")),
            generation_ms=_ms(timings.get("predicted_ms")),
        )

    def recognises(self, model_entry: dict[str, Any]) -> bool:
        return model_entry.get("owned_by") == "llamacpp"


DIALECT = LlamaServer()
