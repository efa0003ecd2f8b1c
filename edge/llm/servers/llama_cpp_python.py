"""llama-cpp-python's server (`python -m llama_cpp.server`): `{"type": "json_object", "schema": S}`.

It refuses OpenAI's `json_schema` type with HTTP 500, turns the schema into a GBNF grammar itself, and
serves one request at a time. It reports no prompt reuse or timings. Its `/models` entries are
`owned_by: "me"`.

A reply it computes without streaming runs to its end even when the client has gone (the request runs
in a worker thread that nothing interrupts); a streamed one stops at the token after the client closes
the connection (`get_event_publisher` checks `request.is_disconnected()` after each chunk). So fixloop
streams, and starts the server with `--interrupt_requests false`: by default a streamed reply is also
cut short whenever another request (even `GET /models`) arrives. The prompt's evaluation before the
first token cannot be interrupted. A streamed reply has no `usage`: the completion's tokens are counted
from the stream (one event a token, a multi-byte character's tokens in one), the prompt's are estimated.
"""

from __future__ import annotations

from typing import Any

from edge.llm.servers.base import Dialect


class LlamaCppPython(Dialect):
    name = "llama-cpp-python"
    serial = True
    stream = True

    def constraint(self, schema: dict[str, Any], form: str) -> dict[str, Any]:
        if form == "none":
            return {}
        return {"response_format": {"type": "json_object", "schema": schema}}

    def recognises(self, model_entry: dict[str, Any]) -> bool:
        return model_entry.get("owned_by") == "me"


DIALECT = LlamaCppPython()
