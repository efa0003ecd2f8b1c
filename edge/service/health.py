"""Start-up warming and readiness.

The service listens before its slow parts are loaded: the SBERT model warms
in a background thread and /readyz says what is still warming. Ready means
the manual index is there, every PLC answers or its cache is fresh, and the
LLM either answers or its absence is announced as degraded mode; an LLM that
is down never makes the service unready, because the rules planner answers.
A model whose profile primes its prompt makes it unready until the priming
request has ended: the first technician's run must not pay the cold prompt
(on a CPU several steps' worth) nor queue behind it.
The LLM circuit breaker's state is shown as it is: while it is open, runs go
straight to the rules planner, and /readyz (and so the tablet banner) says so.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from edge.config import Config
from edge.llm.breaker import LlmBreaker
from tools.plc.store import PlcStore

log = logging.getLogger("fixloop.service")

PROBE_TIMEOUT_S = 0.5
# The warm-up job that sends the system prompt once to the model server.
PRIMING = "llm prompt (priming the server's cache)"


class Warmup:
    """Named background jobs and their state: warming, ready, or failed with a reason."""

    def __init__(self) -> None:
        self._state: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(self, name: str, job: Callable[[], Any]) -> threading.Thread:
        with self._lock:
            self._state[name] = "warming"
        thread = threading.Thread(target=self._run, args=(name, job), name=f"warm-{name}", daemon=True)
        thread.start()
        return thread

    def _run(self, name: str, job: Callable[[], Any]) -> None:
        started = time.perf_counter()
        try:
            job()
        except Exception as exc:  # a failed warm-up is reported, and the tool loads on first use instead
            log.warning("warming %s failed: %s", name, exc)
            state = f"failed: {type(exc).__name__}: {exc}"
        else:
            state = "ready"
            log.info("%s warm in %.1f s", name, time.perf_counter() - started)
        with self._lock:
            self._state[name] = state

    def state(self) -> dict[str, str]:
        with self._lock:
            return dict(self._state)

    def warming(self) -> list[str]:
        return [name for name, state in self.state().items() if state == "warming"]


class Readiness:
    def __init__(self, config: Config, warmup: Warmup, llm_breaker: LlmBreaker | None = None):
        self.config = config
        self.warmup = warmup
        self.llm_breaker = llm_breaker
        self.plc_cache = PlcStore(config.state_path(config.plc.cache_file))

    def close(self) -> None:
        self.plc_cache.close()

    def check(self) -> dict[str, Any]:
        checks = {"index": self.index(), "plc": self.plc(), "llm": self.llm()}
        warming = self.warmup.warming()
        return {
            "ready": all(check["ok"] for check in checks.values()),
            "warming": warming,
            "degraded": checks["llm"]["mode"] == "degraded",
            "checks": checks,
            "warmup": self.warmup.state(),
        }

    def index(self) -> dict[str, Any]:
        path = self.config.state_path(self.config.knowledge.index_file)
        if not path.exists():
            return {"ok": False, "detail": f"manual index {path.name} not found: run `fixloop index build`"}
        return {"ok": True, "detail": f"manual index {path.name}, {path.stat().st_size // 1024} KiB"}

    def plc(self) -> dict[str, Any]:
        devices: dict[str, Any] = {}
        reachable: dict[tuple[str, int], bool] = {}
        max_age_ms = self.config.plc.cache_max_age_s * 1000
        now_ms = time.time() * 1000
        for device_id, device in self.config.devices.items():
            endpoint = (device.plc.host, device.plc.port)
            if endpoint not in reachable:
                reachable[endpoint] = _tcp_reachable(*endpoint)
            if reachable[endpoint]:
                devices[device_id] = {"ok": True, "detail": f"PLC {endpoint[0]}:{endpoint[1]} reachable"}
                continue
            readings = [self.plc_cache.get_reading(device_id, sensor) for sensor in device.sensors]
            ages = [now_ms - r.ts_ms for r in readings if r is not None]
            fresh = bool(ages) and max(ages) <= max_age_ms
            devices[device_id] = {
                "ok": fresh,
                "detail": f"PLC {endpoint[0]}:{endpoint[1]} not reachable; "
                + (
                    f"cache fresh (oldest {max(ages) / 1000:.0f} s)"
                    if fresh
                    else "cache stale or empty"
                    if ages
                    else "no cached readings"
                ),
            }
        return {"ok": all(d["ok"] for d in devices.values()), "devices": devices}

    def llm(self) -> dict[str, Any]:
        url = self.config.llm.url
        if not url:
            return {"ok": True, "mode": "degraded", "detail": "no LLM configured: the rules planner answers"}
        breaker = self.llm_breaker.snapshot() if self.llm_breaker is not None else None
        if PRIMING in self.warmup.warming():
            return {
                "ok": False,
                "mode": "llm",
                "detail": f"priming the model ({self.config.llm.model}) with its prompt",
            }
        if breaker is not None and breaker["state"] != "closed":
            return {
                "ok": True,
                "mode": "degraded",
                "breaker": breaker,
                "detail": f"LLM circuit breaker {breaker['state'].replace('_', '-')} after "
                f"{breaker['consecutive_failures']} failures ({breaker['last_error']}): the rules "
                f"planner answers; next probe in {breaker['retry_in_s']:g} s",
            }
        return {**self._probe_llm(url), **({"breaker": breaker} if breaker is not None else {})}

    def _probe_llm(self, url: str) -> dict[str, Any]:
        try:
            response = httpx.get(
                f"{url.rstrip('/')}/models",
                timeout=PROBE_TIMEOUT_S,
                headers={"Authorization": f"Bearer {self.config.llm.api_key}"} if self.config.llm.api_key else {},
            )
            response.raise_for_status()
        except httpx.ReadTimeout:
            # It took the connection and did not answer in time: llama-cpp-python answers `/models` only
            # between replies, one at a time. A server that is stuck, not busy, fails the runs and the breaker.
            return {"ok": True, "mode": "llm", "detail": f"LLM busy with a reply ({self.config.llm.model})"}
        except httpx.HTTPError as exc:
            return {
                "ok": True,
                "mode": "degraded",
                "detail": f"LLM not reachable ({type(exc).__name__}): the rules planner answers until it is back",
            }
        return {"ok": True, "mode": "llm", "detail": f"LLM answers ({self.config.llm.model})"}


def _tcp_reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False
