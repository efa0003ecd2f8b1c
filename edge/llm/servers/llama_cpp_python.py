"""llama-cpp-python's server (`python -m llama_cpp.server`): `{"type": "json_object", "schema": S}`.

It refuses OpenAI's `json_schema` type with HTTP 500, turns the schema into a GBNF grammar itself, and
serves one request at a time. It reports no prompt reuse or timings. Its `/models` entries are
`owned_by: "me"`.
"""

from __future__ import annotations

from typing import Any

from edge.llm.servers.base import Dialect


class LlamaCppPython(Dialect):
    name = "llama-cpp-python"
    serial = True

    def constraint(self, schema: dict[str, Any], form: str) -> dict[str, Any]:
        if form == "none":
            return {}
        return {"response_format": {"type": "json_object", "schema": schema}}

    def recognises(self, model_entry: dict[str, Any]) -> bool:
        return model_entry.get("owned_by") == "me"


DIALECT = LlamaCppPython()
