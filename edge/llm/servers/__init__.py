"""The servers fixloop speaks to, one module per request shape, and how to tell which one answers.

`[llm] server` names the server; "auto" asks its `/models` list (each server marks its entries in its
own way) and takes the plain OpenAI form when none says.
"""

from __future__ import annotations

from typing import Any, Literal

from edge.llm.servers import llama_cpp_python, llama_server, openai, vllm
from edge.llm.servers.base import Dialect, ServerReport

__all__ = ["DIALECTS", "Dialect", "ServerName", "ServerReport", "detect", "dialect"]

ServerName = Literal["auto", "vllm", "llama-server", "llama-cpp-python", "openai"]
DIALECTS: dict[str, Dialect] = {
    d.name: d for d in (vllm.DIALECT, llama_server.DIALECT, llama_cpp_python.DIALECT, openai.DIALECT)
}


def dialect(name: str) -> Dialect:
    return DIALECTS[name]


def detect(models: list[dict[str, Any]]) -> Dialect:
    """The dialect whose server listed `models` (the `data` of `GET /models`); plain OpenAI if none claims it."""
    for entry in models:
        for candidate in DIALECTS.values():
            if candidate.recognises(entry):
                return candidate
    return openai.DIALECT
