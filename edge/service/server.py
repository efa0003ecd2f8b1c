"""uvicorn on a background thread, for `fixloop demo`, the benchmark and the tests.

`fixloop serve` runs uvicorn on the main thread instead, where it handles
SIGTERM from systemd itself.
"""

from __future__ import annotations

import threading
import time

import uvicorn
from fastapi import FastAPI

from edge.config import ServiceConfig
from edge.service.connections import uvicorn_config


class ServerThread:
    def __init__(
        self, app: FastAPI, host: str, port: int, log_level: str = "warning", limits: ServiceConfig | None = None
    ):
        self.server = uvicorn.Server(
            uvicorn_config(
                app,
                limits or ServiceConfig(),
                host,
                port,
                log_level=log_level,
                access_log=False,
                timeout_graceful_shutdown=5,
            )
        )
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError(f"the service could not start on {self.host}:{self.port} (port in use?)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start on {self.host}:{self.port} within {timeout_s:g} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
