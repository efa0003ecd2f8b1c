"""Circuit breakers per sensor and per PLC unit, persisted in the PLC store.

`threshold` consecutive communication failures on a sensor (or on any sensors
of one unit) open its breaker: reads skip the network and answer from the
cache. After the window one caller probes (half-open); success closes the
breaker, failure re-opens it for a window twice as long, up to the configured
maximum (`PlcConfig.breaker_window_s`). Any successful read closes it, the
poller's included. Operations hears about an opening once: a structured log
event, a Prometheus counter and the hook.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from tools.plc import metrics
from tools.plc.config import PlcConfig
from tools.plc.store import BreakerRow, PlcStore

UNIT = "*"
STATE_VALUE = {"closed": 0, "open": 1, "half_open": 2}

log = logging.getLogger("fixloop.plc")

Decision = Literal["closed", "open", "probe"]


class Breakers:
    def __init__(
        self,
        store: PlcStore,
        config: PlcConfig,
        on_open: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self._store = store
        self._config = config
        self._on_open = on_open
        self._clock = clock

    def decide(self, device_id: str, sensor: str) -> tuple[Decision, BreakerRow | None]:
        """Whether to touch the network; returns the breaker that decided, if any."""
        now_ms = self._now_ms()
        for row in self._store.breakers_for(device_id, sensor):
            if row.state == "closed":
                continue
            reopen_at_ms = self.reopen_at_ms(row)
            due = reopen_at_ms is not None and now_ms >= reopen_at_ms
            if due and self._store.claim_probe(row, now_ms):
                metrics.BREAKER_STATE.labels(row.device_id, row.sensor).set(STATE_VALUE["half_open"])
                return "probe", row
            # Open inside its window, or another caller is already probing.
            return "open", row
        return "closed", None

    def unit_open(self, device_id: str) -> bool:
        return any(row.state != "closed" for row in self._store.breakers_for(device_id, UNIT))

    def succeeded(self, device_id: str, sensor: str) -> None:
        for key in (sensor, UNIT):
            metrics.BREAKER_STATE.labels(device_id, key).set(STATE_VALUE["closed"])

    def failed(self, device_id: str, sensor: str, reason: str) -> None:
        now_ms = self._now_ms()
        opened: list[BreakerRow] = []
        for key in (sensor, UNIT):
            row, opened_now = self._store.count_failure(device_id, key, self._config.breaker_threshold, now_ms)
            metrics.BREAKER_STATE.labels(device_id, key).set(STATE_VALUE[row.state])
            if opened_now:
                opened.append(row)
        if opened:
            # Sensor and unit opening on the same read are one outage: tell operations once, at the wider scope.
            self._notify(opened[-1], reason)

    def reopen_at_ms(self, row: BreakerRow) -> int | None:
        if row.opened_at_ms is None:
            return None
        return row.opened_at_ms + int(self._config.breaker_window_s(row.failures) * 1000)

    def _notify(self, row: BreakerRow, reason: str) -> None:
        metrics.BREAKER_OPENED.labels(row.device_id, row.sensor).inc()
        event = {
            "event": "plc_breaker_open",
            "device_id": row.device_id,
            "sensor": row.sensor,
            "scope": "unit" if row.sensor == UNIT else "sensor",
            "consecutive_failures": row.failures,
            "reason": reason,
            "opened_at_ms": row.opened_at_ms,
            "probe_after_ms": self.reopen_at_ms(row),
        }
        log.warning("plc_breaker_open %s", json.dumps(event, ensure_ascii=False), extra={"plc_event": event})
        if self._on_open is not None:
            try:
                self._on_open(event)
            except Exception:  # a notification hook must never fail a sensor read
                log.exception("plc_breaker_open hook failed for %s/%s", row.device_id, row.sensor)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
