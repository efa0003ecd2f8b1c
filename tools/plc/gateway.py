"""Live read, cache fallback and breakers for one sensor: the policy in one place.

Used by the agent tool (`read`) and the poller (`refresh`). A live value is
stored in the cache as it is read, so the tool's own reads keep the cache
fresh between polls (best effort: a cache that cannot be written does not
cost the agent a live value it already has). A readiness check (`fixloop
doctor`) asks the PLCs and the cache through `probe_device` and
`breaker_states`, which change neither.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tools.plant import DeviceConfig, SensorConfig
from tools.plc import metrics
from tools.plc.breaker import UNIT, Breakers
from tools.plc.codec import decode
from tools.plc.config import PlcConfig
from tools.plc.errors import NoCommunication, PlcRejected
from tools.plc.modbus import ModbusReader
from tools.plc.reading import Quality, Reading, Source, alarm_for, fallback_quality, is_outlier
from tools.plc.store import BUSY_TIMEOUT_S, BreakerRow, HistoryLimits, PlcStore

log = logging.getLogger("fixloop.plc")


class PlcGateway:
    def __init__(
        self,
        devices: dict[str, DeviceConfig],
        config: PlcConfig,
        cache_path: Path,
        on_breaker_open: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.time,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ):
        self.devices = devices
        self.config = config
        self.store = PlcStore(cache_path, busy_timeout_s, HistoryLimits.of(config))
        self.breakers = Breakers(self.store, config, on_breaker_open, clock)
        self._reader = ModbusReader()
        self._clock = clock

    def read(self, device_id: str, sensor_id: str) -> Reading:
        """Live if possible, else the cache; raises `PlcRejected` when the PLC answered unusably."""
        device, sensor = self.devices[device_id], self.devices[device_id].sensors[sensor_id]
        decision, row = self.breakers.decide(device_id, sensor_id)
        if decision == "open":
            assert row is not None
            scope = "the PLC unit" if row.sensor == UNIT else "this sensor"
            reading = self._from_cache(
                device, sensor, f"breaker open for {scope} after repeated timeouts", self.breakers.reopen_at_ms(row)
            )
        else:
            try:
                value, ts_ms = self._live(device, sensor)
            except NoCommunication as exc:
                reading = self._from_cache(device, sensor, f"{exc.reason}: {exc}")
            else:
                try:
                    self._store_live(device_id, sensor_id, value, ts_ms)
                except sqlite3.Error:
                    log.exception(
                        "plc_cache_write_failed %s/%s: returning the live value uncached", device_id, sensor_id
                    )
                reading = self._reading(device, sensor, value, ts_ms, "Good", "live")
        metrics.READS.labels(device_id, sensor_id, reading.quality).inc()
        return reading

    def refresh(self, device_id: str, sensor_id: str) -> bool:
        """The poller's read: True refreshed, False no communication.

        It goes to the network even behind an open breaker: the poller is the probe that closes
        a breaker within one poll interval of the PLC's return, however long the open window.
        """
        device, sensor = self.devices[device_id], self.devices[device_id].sensors[sensor_id]
        try:
            value, ts_ms = self._live(device, sensor)
        except NoCommunication:
            return False
        # Filling the cache is the poller's whole job, so a failed write is the poller's error.
        self._store_live(device_id, sensor_id, value, ts_ms)
        return True

    def close(self) -> None:
        self._reader.close()
        self.store.close()

    def _live(self, device: DeviceConfig, sensor: SensorConfig) -> tuple[float, int]:
        """The decoded value and its timestamp in ms; counts communication failures on the breakers."""
        try:
            registers = self._reader.read_registers(device.plc, sensor, self.config.read_budget_ms / 1000)
            value = decode(sensor, registers)
        except NoCommunication as exc:
            if exc.counts_against_plc:
                self.breakers.failed(device.id, sensor.id, exc.reason)
            raise
        except PlcRejected:
            # It answered, so it is communicating; the rejection itself is reported by the caller.
            self.store.clear_breakers(device.id, sensor.id)
            self.breakers.succeeded(device.id, sensor.id)
            raise
        return value, int(self._clock() * 1000)

    def _store_live(self, device_id: str, sensor_id: str, value: float, ts_ms: int) -> None:
        self.store.put_reading(device_id, sensor_id, value, ts_ms)
        self.breakers.succeeded(device_id, sensor_id)

    def _from_cache(
        self, device: DeviceConfig, sensor: SensorConfig, reason: str, probe_after_ms: int | None = None
    ) -> Reading:
        cached = self.store.get_reading(device.id, sensor.id)
        ts_ms = None if cached is None else cached.ts_ms
        quality = fallback_quality(self._age_s(ts_ms), self.config.cache_max_age_s)
        # Too old or missing: withheld, not guessed; the timestamp still tells how old the last value was.
        value = cached.value if cached is not None and quality != "BadNoCommunication" else None
        return self._reading(
            device,
            sensor,
            value,
            ts_ms,
            quality,
            "cache_fallback",
            fallback_reason=reason,
            breaker_probe_after_ms=probe_after_ms,
        )

    def _reading(
        self,
        device: DeviceConfig,
        sensor: SensorConfig,
        value: float | None,
        ts_ms: int | None,
        quality: Quality,
        source: Source,
        **extra: Any,
    ) -> Reading:
        age_s = self._age_s(ts_ms)
        return Reading(
            device_id=device.id,
            sensor=sensor.id,
            label=sensor.label or sensor.id,
            value=value,
            unit=sensor.unit,
            ts_ms=ts_ms,
            age_s=None if age_s is None else round(age_s, 3),
            quality=quality,
            source=source,
            is_outlier=value is not None and is_outlier(sensor, value),
            alarm=None if value is None else alarm_for(sensor, value),
            plausible_min=sensor.plausible_min,
            plausible_max=sensor.plausible_max,
            **extra,
        )

    def _age_s(self, ts_ms: int | None) -> float | None:
        return None if ts_ms is None else max(0.0, self._clock() - ts_ms / 1000)


class SensorProbe(BaseModel):
    """One sensor read straight from its PLC by a readiness check."""

    sensor: str
    value: float | None = None
    # The PLC answered, but unusably: a Modbus exception, or a reply that does not fit the sensor map.
    rejected: str | None = None
    is_outlier: bool = False


class BreakerState(BaseModel):
    """A breaker as the PLC cache holds it, with when it lets a read through again."""

    device_id: str
    sensor: str
    state: str
    failures: int
    opened_at_ms: int | None
    reopen_at_ms: int | None

    @property
    def whole_unit(self) -> bool:
        return self.sensor == UNIT


def probe_device(device: DeviceConfig, config: PlcConfig) -> list[SensorProbe]:
    """Every sensor of the device read once straight over Modbus: no cache read or written and no breaker
    counted, so a check never trips one. Raises `NoCommunication` at the first sensor the PLC does not
    answer for."""
    reader = ModbusReader()
    try:
        return [_probe(reader, device, sensor, config.read_budget_ms / 1000) for sensor in device.sensors.values()]
    finally:
        reader.close()


def _probe(reader: ModbusReader, device: DeviceConfig, sensor: SensorConfig, budget_s: float) -> SensorProbe:
    try:
        value = decode(sensor, reader.read_registers(device.plc, sensor, budget_s))
    except PlcRejected as exc:
        return SensorProbe(sensor=sensor.id, rejected=str(exc))
    return SensorProbe(sensor=sensor.id, value=value, is_outlier=is_outlier(sensor, value))


def breaker_states(config: PlcConfig, cache_path: Path) -> list[BreakerState]:
    """The breakers in an existing PLC cache (a missing cache is an error here, never created)."""
    if not cache_path.exists():
        raise FileNotFoundError(f"no PLC cache at {cache_path}")
    store = PlcStore(cache_path)
    try:
        breakers = Breakers(store, config)
        return [_breaker_state(row, breakers.reopen_at_ms(row)) for row in store.all_breakers()]
    finally:
        store.close()


def _breaker_state(row: BreakerRow, reopen_at_ms: int | None) -> BreakerState:
    return BreakerState(
        device_id=row.device_id,
        sensor=row.sensor,
        state=row.state,
        failures=row.failures,
        opened_at_ms=row.opened_at_ms,
        reopen_at_ms=reopen_at_ms,
    )
