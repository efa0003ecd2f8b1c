"""The one LLM client: OpenAI-compatible chat completions to vLLM, llama.cpp or any compatible server.

What differs between servers (how constrained decoding is asked for, extra request fields, what a
reply reports about prompt reuse and timings) is the dialect's (`edge.llm.servers`), chosen by
`[llm] server` or detected from the server's `/models` list on first use.

Every request has a hard deadline (the run's time left, at most `timeout_s`):
httpx's timeouts are per read, so a server that trickles one byte a second
would never trip them; the reply is read in a worker thread and given up at
the deadline. A server that serves one request at a time gets the runs'
requests one at a time: the wait for its turn is bounded by the run's time
left, and `timeout_s` counts from when the request is sent. A breaker
(`edge.llm.breaker`) keeps runs off a server that keeps failing; only a sent
request that fails is the server's failure, a turn that never came is not.
"""

from __future__ import annotations

import functools
import json
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from edge.llm.breaker import LlmBreaker
from edge.llm.servers import Dialect, detect, dialect
from edge.run import LlmCircuitOpen, LlmOutOfTime, LlmUnavailable, strip_stop_residue

__all__ = ["STOP_SEQUENCES", "ChatClient", "Completion", "LlmCircuitOpen", "LlmUnavailable"]

# An observation the model goes on to invent starts a line of its own. A thought may well say "Observation:"
# (Qwen2.5-Coder began its thoughts with it and the stop cut each reply at `{"thought": "`), and a JSON
# string holds no raw newline, so the stop is the line break with the word.
STOP_SEQUENCES = ["\nObservation:"]
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
    # The split of the latency: the server's own (llama-server's timings), or for a streamed reply the time
    # from sending the request to its first token and from there to the last.
    prompt_ms: float | None = None
    generation_ms: float | None = None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process and shared by its clients: building one reads
    the whole CA bundle (about 35 ms of CPU), which every agent and every test client paid again."""
    return httpx.create_ssl_context()


class ChatClient:
    def __init__(
        self,
        url: str,
        model: str,
        timeout_s: float,
        max_tokens: int,
        structured_outputs: str = "auto",
        api_key: str | None = None,
        breaker: LlmBreaker | None = None,
        server: str = "auto",
    ):
        self.url = url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.structured_outputs = structured_outputs
        self.breaker = breaker
        self._dialect: Dialect | None = None if server == "auto" else dialect(server)
        # A server that serves one request at a time gets them one at a time, each within its deadline.
        self._serial = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), headers=headers, verify=tls_context())

    def close(self) -> None:
        self._http.close()

    @property
    def dialect(self) -> Dialect:
        """The server's dialect: configured, or detected once from its `/models` list."""
        if self._dialect is None:
            self._dialect = detect(self.models())
        return self._dialect

    def request_body(
        self, messages: list[dict[str, str]], schema: dict[str, Any] | None, max_tokens: int | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens or self.max_tokens,
            "stop": STOP_SEQUENCES,
            **self.dialect.extra_fields(),
        }
        if self.dialect.stream:
            body["stream"] = True
        if schema is not None:
            body.update(self.dialect.constraint(schema, self.structured_outputs))
        return body

    def chat(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None = None,
        time_left_s: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One completion within `timeout_s` (default: the client's) of being sent and within the run's
        `time_left_s` in all, or LlmUnavailable."""
        cap_s = timeout_s or self.timeout_s
        budget_s = cap_s if time_left_s is None else time_left_s
        if min(cap_s, budget_s) <= 0:
            raise LlmUnavailable("no time left in the run for another LLM request")
        if self.breaker is not None and not self.breaker.allow():
            snapshot = self.breaker.snapshot()
            raise LlmCircuitOpen(
                f"LLM circuit breaker open after {snapshot['consecutive_failures']} failures "
                f"(next probe in {snapshot['retry_in_s']:g} s)"
            )
        try:
            completion = self._chat(messages, schema, cap_s, budget_s, max_tokens)
        except LlmUnavailable as exc:
            if self.breaker is None:
                raise
            if isinstance(exc, LlmOutOfTime):
                self.breaker.release()
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

    def _chat(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        cap_s: float,
        budget_s: float,
        max_tokens: int | None,
    ) -> Completion:
        started = time.perf_counter()
        body = self.request_body(messages, schema, max_tokens)
        if self.dialect.serial:
            if not self._serial.acquire(timeout=budget_s):
                raise LlmOutOfTime(
                    f"LLM at {self.url} was busy with other runs' requests for the {budget_s:.2g} s the run had left"
                )
            try:
                reply = self._send(body, cap_s, budget_s - (time.perf_counter() - started))
            finally:
                self._serial.release()
        else:
            reply = self._send(body, cap_s, budget_s)
        latency_ms = (time.perf_counter() - started) * 1000
        text_of_reply = reply.raw[:200].decode("utf-8", "replace")
        if reply.status != 200:
            raise LlmUnavailable(f"LLM at {self.url} answered HTTP {reply.status}: {text_of_reply}")
        try:
            data = json.loads(reply.raw)
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmUnavailable(
                f"LLM at {self.url} sent a reply that is not a chat completion: {text_of_reply}"
            ) from None
        usage = data.get("usage") or {}
        report = self.dialect.report(data)
        return Completion(
            text=strip_stop_residue(text),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            cached_tokens=report.cached_tokens,
            latency_ms=latency_ms,
            model=str(data.get("model", self.model)),
            finish_reason=choice.get("finish_reason"),
            prompt_ms=report.prompt_ms if report.prompt_ms is not None else reply.prompt_ms,
            generation_ms=report.generation_ms if report.generation_ms is not None else reply.generation_ms,
        )

    def _send(self, body: dict[str, Any], cap_s: float, left_s: float) -> _Reply:
        """The exchange, within `cap_s` and the `left_s` the run has: a reply the run's deadline cut short
        says nothing about the server."""
        total_s = min(cap_s, left_s)
        if total_s <= 0:
            raise LlmOutOfTime(f"no time left in the run after waiting for LLM at {self.url}")
        try:
            return self._exchange(body, total_s)
        except _Overdue as exc:
            if total_s < cap_s:
                raise LlmOutOfTime(str(exc)) from None
            raise

    def _exchange(self, body: dict[str, Any], total_s: float) -> _Reply:
        """POST and read the whole reply by the deadline. The worker that reads it stops at the first
        chunk after the deadline (or its read timeout) and closes the connection, so an abandoned request
        does not linger in the client, nor, streamed, in the server."""
        deadline = time.monotonic() + total_s
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                sent = time.perf_counter()
                with self._http.stream(
                    "POST", f"{self.url}/chat/completions", json=body, timeout=httpx.Timeout(total_s)
                ) as response:
                    if body.get("stream") and response.status_code == 200:
                        reply = self._read_stream(response, deadline, sent)
                        if reply is not None:
                            outcome["reply"] = reply
                        return
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in response.iter_bytes():
                        chunks.append(chunk)
                        size += len(chunk)
                        if size > MAX_REPLY_BYTES:
                            raise _TooLong()
                        if time.monotonic() > deadline:
                            return
                    outcome["reply"] = _Reply(response.status_code, b"".join(chunks))
            except httpx.TimeoutException:
                pass
            except _TooLong:
                outcome["error"] = LlmUnavailable(f"LLM at {self.url} sent a reply over {MAX_REPLY_BYTES // 1024} KiB")
            except LlmUnavailable as exc:
                outcome["error"] = exc
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

    def _read_stream(self, response: httpx.Response, deadline: float, sent: float) -> _Reply | None:
        """A streamed chat completion (server-sent events) as the reply it stands for, with the tokens
        counted and the first one timed; None when the deadline passed first."""
        text: list[str] = []
        tokens = 0
        finish_reason = None
        model = self.model
        first: float | None = None
        size = 0
        for line in response.iter_lines():
            if time.monotonic() > deadline:
                return None
            size += len(line)
            if size > MAX_REPLY_BYTES:
                raise _TooLong()
            if not line.startswith("data:"):
                continue  # blank separators, keep-alive comments
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                break
            try:
                event = json.loads(data)
                choice = event["choices"][0]
                content = choice.get("delta", {}).get("content")
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                raise LlmUnavailable(
                    f"LLM at {self.url} sent an event that is not a chat completion chunk: {data[:200]}"
                ) from None
            model = str(event.get("model", model))
            if content:
                first = first or time.perf_counter()
                text.append(content)
                tokens += 1
            finish_reason = choice.get("finish_reason") or finish_reason
        if finish_reason is None:
            raise LlmUnavailable(
                f"LLM at {self.url} ended its reply before finishing it: an error in the server (its log says "
                "which), or llama-cpp-python started without --interrupt_requests false and another request came"
            )
        done = time.perf_counter()
        reply = {
            "model": model,
            "choices": [{"message": {"role": "assistant", "content": "".join(text)}, "finish_reason": finish_reason}],
            "usage": {"completion_tokens": tokens},
        }
        first = first or done
        return _Reply(200, json.dumps(reply).encode(), (first - sent) * 1000, (done - first) * 1000)

    def models(self) -> list[dict[str, Any]]:
        """The server's `/models` list (used by `fixloop doctor`)."""
        try:
            response = self._http.get(f"{self.url}/models")
            response.raise_for_status()
            return list(response.json().get("data", []))
        except httpx.TransportError as exc:
            raise LlmUnavailable(f"LLM at {self.url} unreachable: {type(exc).__name__}: {exc}") from None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            raise LlmUnavailable(f"LLM at {self.url}: cannot list models: {exc}") from None


@dataclass(frozen=True)
class _Reply:
    status: int
    raw: bytes
    # A streamed reply's time to its first token, and from there to its last.
    prompt_ms: float | None = None
    generation_ms: float | None = None


class _Overdue(LlmUnavailable):
    """The reply did not arrive in the time the request had."""


class _TooLong(Exception):
    """The reply passed MAX_REPLY_BYTES."""


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value > 0 else None
