"""OpenAI-compatible chat client (vLLM, llama.cpp's server, Ollama).

The only place that knows vLLM-specific request fields: how constrained
decoding of the action JSON is asked for depends on `structured_outputs`:
- "structured_outputs": vLLM >= 0.12, `{"structured_outputs": {"json": schema}}`
- "response_format": the portable OpenAI form (`json_schema`), also llama.cpp
- "guided_json": vLLM before 0.12
- "none": plain decoding; the parser and format-error observations cope
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from edge.actions import strip_stop_residue
from edge.planner import LlmUnavailable

__all__ = ["ChatClient", "Completion", "LlmUnavailable", "STOP_SEQUENCES"]

STOP_SEQUENCES = ["Observation:"]


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    latency_ms: float
    model: str


class ChatClient:
    def __init__(self, url: str, model: str, timeout_s: float, max_tokens: int,
                 structured_outputs: str = "structured_outputs", api_key: str | None = None):
        self.url = url.rstrip("/")
        self.model = model
        self.max_tokens = max_tokens
        self.structured_outputs = structured_outputs
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), headers=headers)

    def close(self) -> None:
        self._http.close()

    def request_body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "stop": STOP_SEQUENCES,
        }
        if schema is not None:
            if self.structured_outputs == "structured_outputs":
                body["structured_outputs"] = {"json": schema}
            elif self.structured_outputs == "response_format":
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "step", "schema": schema}}
            elif self.structured_outputs == "guided_json":
                body["guided_json"] = schema
        return body

    def chat(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> Completion:
        started = time.perf_counter()
        try:
            response = self._http.post(f"{self.url}/chat/completions", json=self.request_body(messages, schema))
        except httpx.TimeoutException:
            raise LlmUnavailable(f"LLM at {self.url} did not answer within {self._http.timeout.read:g} s") from None
        except httpx.HTTPError as exc:
            raise LlmUnavailable(f"LLM at {self.url} unreachable: {type(exc).__name__}: {exc}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise LlmUnavailable(f"LLM at {self.url} answered HTTP {response.status_code}: {response.text[:200]}")
        try:
            data = response.json()
            text = data["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmUnavailable(f"LLM at {self.url} sent a reply that is not a chat completion: {response.text[:200]}") from None
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return Completion(
            text=strip_stop_residue(text),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=details.get("cached_tokens"),
            latency_ms=latency_ms,
            model=str(data.get("model", self.model)),
        )

    def models(self) -> list[dict[str, Any]]:
        """The server's `/models` list (used by `fixloop doctor`)."""
        try:
            response = self._http.get(f"{self.url}/models")
            response.raise_for_status()
            return list(response.json().get("data", []))
        except (httpx.HTTPError, ValueError) as exc:
            raise LlmUnavailable(f"LLM at {self.url}: cannot list models: {exc}") from None
