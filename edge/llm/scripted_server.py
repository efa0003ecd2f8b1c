"""A scripted OpenAI-compatible server: the stand-in for vLLM in tests, benchmarks and `doctor` checks.

It speaks real HTTP on loopback. The reply to a request is chosen by how far
the conversation has got (the number of assistant messages in it), so many
concurrent conversations can follow the same script. A script entry is a
dict: `content` (the assistant text), optional `delay_s`, `status` (an HTTP
error instead), `usage` (token counts; otherwise estimated at 4 chars/token),
`drop` (close the connection without answering), `timings` (llama-server's block), and the ways
small models' servers misbehave: `finish_reason` (e.g. "length"), `omit_usage` (no usage
block), `trickle_s` (send the reply one byte at a time, this many seconds
apart, as a stalled server does). A request with `"stream": true` gets the reply as llama-cpp-python
streams it: server-sent events of a few characters each, no usage.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = list[dict[str, Any]] | Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedLlmServer:
    def __init__(
        self,
        script: Script,
        model: str = "Qwen/Qwen2-7B-Instruct-AWQ",
        host: str = "127.0.0.1",
        port: int = 0,
        root: str = "/v1",
        owned_by: str = "vllm",
    ):
        self.script = script
        self.model = model
        # Which server it plays in its /models list (edge.llm.servers detects the request shape from it).
        self.owned_by = owned_by
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._root = root
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        # serve_forever's default poll of 0.5 s is how long `stop` waits: every test and benchmark run paid it.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="scripted-llm", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.socket.getsockname()[:2]  # what `server_address` holds, typed as str | bytes
        return f"http://{host}:{port}{self._root}"

    def __enter__(self) -> ScriptedLlmServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ScriptedLlmServer:
        return self.__enter__()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def reply_for(self, body: dict[str, Any]) -> dict[str, Any]:
        if callable(self.script):
            return self.script(body)
        turn = sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")
        return self.script[min(turn, len(self.script) - 1)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes; with Nagle on, delayed ACKs add 40 ms to every reply.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                if self.path == f"{server._root}/models":
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": server.model, "object": "model", "owned_by": server.owned_by}],
                        },
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                if self.path != f"{server._root}/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with server._lock:
                    server.requests.append(body)
                entry = server.reply_for(body)
                if entry.get("delay_s"):
                    time.sleep(entry["delay_s"])
                if entry.get("drop"):
                    self.close_connection = True
                    self.connection.close()
                    return
                if entry.get("status"):
                    self._send(entry["status"], {"error": {"message": entry.get("content", "scripted error")}})
                    return
                content = entry.get("content", "")
                if body.get("stream"):
                    self._stream(content, entry.get("finish_reason", "stop"))
                    return
                reply: dict[str, Any] = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "model": server.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": entry.get("finish_reason", "stop"),
                        }
                    ],
                }
                if not entry.get("omit_usage"):
                    prompt_chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
                    usage = entry.get("usage") or {
                        "prompt_tokens": prompt_chars // 4 + 1,
                        "completion_tokens": len(content or "") // 4 + 1,
                    }
                    reply["usage"] = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
                if entry.get("timings"):  # what llama-server adds about its prompt cache and speed
                    reply["timings"] = entry["timings"]
                self._send(200, reply, entry.get("trickle_s"))

            def _stream(self, content: str, finish_reason: str) -> None:
                def event(delta: dict[str, str], finish: str | None = None) -> bytes:
                    chunk = {
                        "object": "chat.completion.chunk",
                        "model": server.model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }
                    return f"data: {json.dumps(chunk)}\n\n".encode()

                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = [content[i : i + 4] for i in range(0, len(content), 4)]
                events = [event({"role": "assistant"}), *(event({"content": p}) for p in pieces)]
                try:
                    self.wfile.write(b"".join([*events, event({}, finish_reason), b"data: [DONE]\n\n"]))
                except OSError:
                    self.close_connection = True
                self.close_connection = True

            def _send(self, status: int, payload: dict[str, Any], trickle_s: float | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    if not trickle_s:
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(trickle_s)
                except OSError:  # the client gave up waiting, as it should
                    self.close_connection = True

        return Handler
