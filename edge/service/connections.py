"""uvicorn as fixloop runs it: slow and idle clients cannot hold the server's connections.

    server = uvicorn.Server(uvicorn_config(app, config.service, host, port))

uvicorn times out idle keep-alive connections but not a request head that
arrives a line at a time (slowloris), and its `limit_concurrency` counts open
sockets, so slow sockets filling it would get every real request a 503. The
protocol here adds both missing parts:

- a header timeout: a request head must arrive whole within `header_timeout_s`
  of the connection opening or of the previous response, however slowly it
  trickles in;
- a connection limit: past `max_connections`, the connection that has waited
  longest without a request in progress is dropped (a slow or idle one), so a
  new client with a real request always gets in, and the file descriptors
  never run out. The limit is kept below the process's open-file limit.

Request heads are capped by h11 at uvicorn's default 16 KiB.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from edge.config import ServiceConfig
from edge.service import metrics
from edge.service.log_limits import limit_repeated_errors

log = logging.getLogger("fixloop.service")

# Descriptors kept for everything but client sockets: SQLite files and their WALs, the model, PLC and LLM sockets.
FD_RESERVE = 256


class GuardedH11Protocol(H11Protocol):
    header_timeout_s = 10.0
    max_connections = 1000

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_since = 0.0
        # The request cycle that was current when waiting began: a new request replaces it.
        self._answered: object = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait_for_request()
        if len(self.connections) > self.max_connections:
            waiting = [
                c
                for c in self.connections
                if isinstance(c, GuardedH11Protocol) and c.waiting() and not c.transport.is_closing()
            ]
            # This connection waits too, but it is the newest: it is dropped only when nothing else waits.
            victim = min(waiting, key=lambda c: c._waiting_since, default=self)
            metrics.CONNECTIONS_DROPPED.labels("connection_limit").inc()
            victim.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._wait_for_request()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def waiting(self) -> bool:
        """No request in progress: before the first, or after a response."""
        return self.cycle is self._answered

    def _wait_for_request(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._answered = self.cycle
        self._waiting_since = self.loop.time()
        self._deadline = self.loop.call_later(self.header_timeout_s, self._header_timeout)

    def _header_timeout(self) -> None:
        self._deadline = None
        if self.waiting() and not self.transport.is_closing():
            metrics.CONNECTIONS_DROPPED.labels("header_timeout").inc()
            self.transport.close()


def guarded_protocol(header_timeout_s: float, max_connections: int) -> type[GuardedH11Protocol]:
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout_s": header_timeout_s, "max_connections": max_connections},
    )


def connection_limit(wanted: int) -> int:
    """`wanted`, raising the soft open-file limit to fit it where the hard limit allows, else what fits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (OSError, ValueError):
            pass  # e.g. the unit's SystemCallFilter forbids it: LimitNOFILE= is the way there
    if soft != resource.RLIM_INFINITY and soft < needed:
        fitted = max(16, soft - FD_RESERVE)
        log.warning(
            "open-file limit %d leaves room for %d client connections, not max_connections=%d: "
            "raise LimitNOFILE (systemd) or `ulimit -n`",
            soft,
            fitted,
            wanted,
        )
        return fitted
    return wanted


def uvicorn_config(app: Any, service: ServiceConfig, host: str, port: int, **options: Any) -> uvicorn.Config:
    limit_repeated_errors()
    protocol = guarded_protocol(service.header_timeout_s, connection_limit(service.max_connections))
    return uvicorn.Config(app, host=host, port=port, http=protocol, timeout_keep_alive=service.keep_alive_s, **options)
