"""A real language model on this box: llama-cpp-python's server with a GGUF that comes in wheels.

`fixloop demo --llm local [--model NAME]`, the real-model tier of the suite and `scripts/bench_llm.py
--local [--model NAME]` start one of `edge.llm.local_models.KNOWN_MODELS` (SmolLM2-135M by default)
behind `python -m llama_cpp.server` on loopback, its file checked before the server is given it.

The server is started as a plant would run it: threads from the cores the box has, less one for fixloop
itself; replies streamed (`edge.llm.servers.llama_cpp_python`), so that a request the client gives up on
stops at its next token; and one request at a time (`--interrupt_requests false`: a request arriving
while another streams waits its turn instead of cutting that one short).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from edge.llm.local_models import DEFAULT_MODEL, KnownModel, LocalModelError, known_model, model_file
from edge.llm.profiles import BUILT_IN_PROFILES

__all__ = ["LocalServer", "LocalServerError", "service_threads", "start_local_server"]


class LocalServerError(RuntimeError):
    """The model or its server is missing or did not start; the message says what to do."""


@dataclass
class LocalServer:
    url: str
    model: str
    process: subprocess.Popen[bytes]
    log_path: Path
    profile: str
    threads: int

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def service_threads() -> int:
    """llama.cpp's threads: the cores this process may use, less one for fixloop (its API, PLC reads and
    manual search). llama.cpp's threads spin on each other: one of them sharing a core with other work
    slows all of them (measured here: 2 threads on 2 cores with one busy were 4x slower than 1 thread)."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


def start_local_server(
    model: KnownModel | str = DEFAULT_MODEL,
    state_dir: Path | None = None,
    port: int = 0,
    threads: int | None = None,
    log_path: Path | None = None,
    ready_timeout_s: float = 120.0,
) -> LocalServer:
    """Start llama-cpp-python's OpenAI-compatible server on loopback and wait until it lists its model.
    `state_dir` holds joined model files (default: the temporary directory)."""
    try:
        import llama_cpp.server  # noqa: F401  # only to say what is missing before a process starts
    except ImportError:
        raise LocalServerError(
            "llama-cpp-python's server is not installed: "
            "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install 'llama-cpp-python[server]' (`make demo` installs it)"
        ) from None
    temporary = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        model = known_model(model) if isinstance(model, str) else model
        path = model_file(model, state_dir or temporary)
    except LocalModelError as exc:
        raise LocalServerError(str(exc)) from None
    threads = threads or service_threads()
    port = port or _free_port()
    log_path = log_path or temporary / f"fixloop-llama-{port}.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        model.served_as,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(BUILT_IN_PROFILES[model.profile].context_tokens),
        # Generation's threads and the prompt's (whose default is every core).
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--interrupt_requests",
        "false",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = LocalServer(
        url=f"http://127.0.0.1:{port}/v1",
        model=model.served_as,
        process=process,
        log_path=log_path,
        profile=model.profile,
        threads=threads,
    )
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalServerError(f"the model server exited with {process.returncode}; its log: {log_path}")
        try:
            if httpx.get(f"{server.url}/models", timeout=1.0).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise LocalServerError(f"the model server did not answer within {ready_timeout_s:g} s; its log: {log_path}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
