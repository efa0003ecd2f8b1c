"""The LLM circuit breaker: a dead or stalling model server costs one window, not every run's budget.

Closed: requests go out. After `threshold` consecutive failures (no answer,
timeouts, HTTP errors) it opens: runs go straight to the rules planner for
`open_s` seconds. Then one request is let through as a probe while the
others still go to the rules planner; its success closes the breaker, its
failure opens it for another window. A readable reply that is a bad action
is the model's fault, not the server's: it does not count.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal

State = Literal["closed", "open", "half_open"]


class LlmBreaker:
    def __init__(self, threshold: int, open_s: float, clock=time.monotonic):
        self.threshold = threshold
        self.open_s = open_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self._last_error = ""

    def allow(self) -> bool:
        """May a request go out now? In the half-open state only the one probe may."""
        with self._lock:
            if self._opened_at is None:
                return True
            if self._probing or self._clock() - self._opened_at < self.open_s:
                return False
            self._probing = True
            return True

    def success(self) -> None:
        with self._lock:
            self._failures, self._opened_at, self._probing = 0, None, False

    def failure(self, error: str) -> None:
        with self._lock:
            self._failures += 1
            self._last_error = error
            if self._probing or self._failures >= self.threshold:
                self._opened_at = self._clock()
            self._probing = False

    def release(self) -> None:
        """A request ended without telling whether the server works: free the probe slot, count nothing."""
        with self._lock:
            self._probing = False

    def state(self) -> State:
        with self._lock:
            return self._state()

    def _state(self) -> State:
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._clock() - self._opened_at >= self.open_s else "open"

    def snapshot(self) -> dict[str, Any]:
        """For /readyz and the tablet banner."""
        with self._lock:
            state = self._state()
            retry_in = 0.0 if self._opened_at is None else max(0.0, self.open_s - (self._clock() - self._opened_at))
            return {
                "state": state,
                "consecutive_failures": self._failures,
                "retry_in_s": round(retry_in, 1),
                "last_error": self._last_error if state != "closed" else "",
            }
