"""vLLM: `structured_outputs` (>= 0.12), `guided_json` (older), or the portable `response_format` form.

Prefix reuse comes as `usage.prompt_tokens_details.cached_tokens` when vLLM runs with
`--enable-prompt-tokens-details`; its `/models` entries are `owned_by: "vllm"` with `max_model_len`.
"""

from __future__ import annotations

from typing import Any

from edge.llm.servers.base import Dialect


class Vllm(Dialect):
    name = "vllm"

    def constraint(self, schema: dict[str, Any], form: str) -> dict[str, Any]:
        if form in ("auto", "structured_outputs"):
            return {"structured_outputs": {"json": schema}}
        if form == "guided_json":
            return {"guided_json": schema}
        return super().constraint(schema, form)

    def recognises(self, model_entry: dict[str, Any]) -> bool:
        return model_entry.get("owned_by") == "vllm"


DIALECT = Vllm()
