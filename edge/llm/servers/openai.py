"""A plain OpenAI-compatible server (Ollama, a gateway): the portable `response_format` json_schema form."""

from __future__ import annotations

from edge.llm.servers.base import Dialect

DIALECT = Dialect()
