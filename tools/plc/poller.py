"""Refresh every configured sensor into the cache, every `poll_interval_s`.

Runs as a thread of the service (`Poller.start`) or as its own process
(`fixloop poller`, a systemd unit in production). Each cycle reads through
open breakers too: it is their probe, so a PLC that is back closes its breaker
(and the agent's reads are live again) within one poll interval. Once a unit's
breaker is open, its first failed read ends that unit's cycle, so a dead PLC
costs one read budget per cycle instead of one per sensor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tools.plc.errors import PlcRejected
from tools.plc.gateway import PlcGateway

log = logging.getLogger("fixloop.plc")


@dataclass
class PollReport:
    refreshed: int = 0
    no_communication: int = 0
    skipped: int = 0
    rejected: dict[str, str] = field(default_factory=dict)  # "device/sensor" -> why
    elapsed_s: float = 0.0

    @property
    def total(self) -> int:
        return self.refreshed + self.no_communication + self.skipped + len(self.rejected)


def poll_once(gateway: PlcGateway) -> PollReport:
    report = PollReport()
    started = time.perf_counter()
    for device_id, device in gateway.devices.items():
        silent = False
        for sensor_id in device.sensors:
            if silent:
                report.skipped += 1
                continue
            try:
                refreshed = gateway.refresh(device_id, sensor_id)
            except PlcRejected as exc:
                report.rejected[f"{device_id}/{sensor_id}"] = str(exc)
                continue
            if refreshed:
                report.refreshed += 1
            else:
                report.no_communication += 1
                silent = gateway.breakers.unit_open(device_id)
    report.elapsed_s = time.perf_counter() - started
    return report


class Poller:
    def __init__(self, gateway: PlcGateway, interval_s: float, on_cycle: Callable[[PollReport], None] | None = None):
        self.gateway = gateway
        self.interval_s = interval_s
        self._on_cycle = on_cycle
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Poll until `stop()`; each cycle starts `interval_s` after the previous one started.

        A failed cycle (say the cache file stayed locked) is logged and the next one runs on
        schedule: a poller thread that died would leave its process looking healthy while the
        cache goes stale.
        """
        while not self._stop.is_set():
            started = time.perf_counter()
            self._cycle()
            self._stop.wait(max(0.0, self.interval_s - (time.perf_counter() - started)))

    def _cycle(self) -> None:
        try:
            report = poll_once(self.gateway)
        except Exception:
            log.exception("plc_poll cycle failed; retrying next cycle")
            return
        log.info(
            "plc_poll refreshed=%d no_communication=%d skipped=%d rejected=%d elapsed_s=%.3f",
            report.refreshed,
            report.no_communication,
            report.skipped,
            len(report.rejected),
            report.elapsed_s,
        )
        if self._on_cycle is not None:
            try:
                self._on_cycle(report)
            except Exception:
                log.exception("plc_poll on_cycle hook failed")

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="plc-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
