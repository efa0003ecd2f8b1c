"""OpenAI-compatible chat client (vLLM, llama.cpp's server, Ollama).

The only place that knows vLLM-specific request fields: how constrained
decoding of the action JSON is asked for depends on `structured_outputs`:
- "structured_outputs": vLLM >= 0.12, `{"structured_outputs": {"json": schema}}`
- "response_format": the portable OpenAI form (`json_schema`), also llama.cpp
- "guided_json": vLLM before 0.12
- "none": plain decoding; the parser and format-error observations cope

Every request has a hard deadline (the run's time left, at most `timeout_s`):
httpx's timeouts are per read, so a server that trickles one byte a second
would never trip them; the reply is read in a worker thread and given up at
the deadline. A breaker (`edge.llm_breaker`) keeps runs off a server that
keeps failing.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from edge.actions import strip_stop_residue
from edge.llm_breaker import LlmBreaker
from edge.planner import LlmCircuitOpen, LlmUnavailable

__all__ = ["STOP_SEQUENCES", "ChatClient", "Completion", "LlmCircuitOpen", "LlmUnavailable"]

STOP_SEQUENCES = ["Observation:"]
# A reply of a few hundred tokens is a few KiB; a server that ignores max_tokens is cut off here.
MAX_REPLY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Completion:
    text: str
    # None: the server sent no usage (the planner estimates it).
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    latency_ms: float
    model: str
    # "length": the reply was cut at max_tokens.
    finish_reason: str | None = None


class ChatClient:
    def __init__(
        self,
        url: str,
        model: str,
        timeout_s: float,
        max_tokens: int,
        structured_outputs: str = "structured_outputs",
        api_key: str | None = None,
        breaker: LlmBreaker | None = None,
    ):
        self.url = url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.structured_outputs = structured_outputs
        self.breaker = breaker
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

    def chat(
        self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None, time_left_s: float | None = None
    ) -> Completion:
        """One completion, finished within `time_left_s` (and `timeout_s`) or LlmUnavailable."""
        total_s = self.timeout_s if time_left_s is None else min(self.timeout_s, time_left_s)
        if total_s <= 0:
            raise LlmUnavailable("no time left in the run for another LLM request")
        if self.breaker is not None and not self.breaker.allow():
            snapshot = self.breaker.snapshot()
            raise LlmCircuitOpen(
                f"LLM circuit breaker open after {snapshot['consecutive_failures']} failures "
                f"(next probe in {snapshot['retry_in_s']:g} s)"
            )
        try:
            completion = self._chat(messages, schema, total_s)
        except LlmUnavailable as exc:
            if self.breaker is None:
                raise
            if isinstance(exc, _Overdue) and total_s < self.timeout_s:
                self.breaker.release()  # cut short by the run's own deadline: no verdict on the server
            else:
                self.breaker.failure(str(exc))
            raise
        except BaseException:
            if self.breaker is not None:  # a half-open probe must not stay taken
                self.breaker.failure("request failed")
            raise
        if self.breaker is not None:
            self.breaker.success()
        return completion

    def _chat(self, messages: list[dict[str, str]], schema: dict[str, Any] | None, total_s: float) -> Completion:
        started = time.perf_counter()
        status, raw = self._exchange(self.request_body(messages, schema), total_s)
        latency_ms = (time.perf_counter() - started) * 1000
        text_of_reply = raw[:200].decode("utf-8", "replace")
        if status != 200:
            raise LlmUnavailable(f"LLM at {self.url} answered HTTP {status}: {text_of_reply}")
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmUnavailable(
                f"LLM at {self.url} sent a reply that is not a chat completion: {text_of_reply}"
            ) from None
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return Completion(
            text=strip_stop_residue(text),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            cached_tokens=details.get("cached_tokens"),
            latency_ms=latency_ms,
            model=str(data.get("model", self.model)),
            finish_reason=choice.get("finish_reason"),
        )

    def _exchange(self, body: dict[str, Any], total_s: float) -> tuple[int, bytes]:
        """POST and read the whole reply by the deadline. The worker that reads it stops at the first
        chunk after the deadline (or its read timeout), so an abandoned request does not linger."""
        deadline = time.monotonic() + total_s
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                with self._http.stream(
                    "POST", f"{self.url}/chat/completions", json=body, timeout=httpx.Timeout(total_s)
                ) as response:
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in response.iter_bytes():
                        chunks.append(chunk)
                        size += len(chunk)
                        if size > MAX_REPLY_BYTES:
                            outcome["error"] = LlmUnavailable(
                                f"LLM at {self.url} sent a reply over {MAX_REPLY_BYTES // 1024} KiB"
                            )
                            return
                        if time.monotonic() > deadline:
                            return
                    outcome["reply"] = (response.status_code, b"".join(chunks))
            except httpx.TimeoutException:
                pass
            except httpx.HTTPError as exc:
                outcome["error"] = LlmUnavailable(f"LLM at {self.url} unreachable: {type(exc).__name__}: {exc}")
            finally:
                done.set()

        threading.Thread(target=work, name="llm-request", daemon=True).start()
        done.wait(total_s)
        if "error" in outcome:
            raise outcome["error"]
        if "reply" not in outcome:
            raise _Overdue(f"LLM at {self.url} did not finish its reply within {total_s:.2g} s")
        return outcome["reply"]

    def models(self) -> list[dict[str, Any]]:
        """The server's `/models` list (used by `fixloop doctor`)."""
        try:
            response = self._http.get(f"{self.url}/models")
            response.raise_for_status()
            return list(response.json().get("data", []))
        except (httpx.HTTPError, ValueError) as exc:
            raise LlmUnavailable(f"LLM at {self.url}: cannot list models: {exc}") from None


class _Overdue(LlmUnavailable):
    """The reply did not arrive in the time the request had."""


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value > 0 else None
