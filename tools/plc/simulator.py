"""A plant simulator: the configured devices served over real Modbus TCP.

Each device is one unit id on a pymodbus server. Values are computed at read
time from the sensor map: a nominal value inside the normal band (between the
alarm thresholds) with a slow sine wave, so the demo shows live, plausible
numbers. Faults are injected through the handle, for tests and demos:

    sim = start_simulator(devices, "127.0.0.1", 0)
    sim.silence("press-3")                       # accept the request, never answer
    sim.slow("press-3", 1.5)                     # answer after 1.5 s
    sim.exception("press-3", "coolant_level", 4) # Modbus exception 4 for that sensor
    sim.set_value("press-3", "motor_temp", 3276) # pin a value, out of range if you like
    sim.drift("press-3", "motor_temp", 95, 2.0)  # move towards 95 °C at 2 °C/s
    sim.malformed("press-3")                     # replies one register short
    sim.end("press-3", "slow")                   # end one kind (a per-sensor kind: on one sensor, or all)
    sim.clear("press-3"); sim.stop()
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from tools.plant import DeviceConfig, SensorConfig
from tools.plc.codec import encode

PERIOD_S = 600.0
# Share of the normal band the sine wave spans either way: visible, never near an alarm.
AMPLITUDE = 0.04
READ_FUNCTIONS = {3: "holding", 4: "input"}
_MBAP_LEN = 7


def nominal_value(sensor: SensorConfig) -> float:
    """Where a healthy machine sits: well inside the band the alarms leave."""
    low = sensor.alarm_low if sensor.alarm_low is not None else sensor.plausible_min
    high = sensor.alarm_high if sensor.alarm_high is not None else sensor.plausible_max
    if sensor.alarm_high is not None and sensor.alarm_low is None:
        return low + (high - low) * 0.65 if low > 0 else high * 0.65
    if sensor.alarm_low is not None and sensor.alarm_high is None:
        return low + (high - low) * 0.625
    return (low + high) / 2


@dataclass
class _SensorSim:
    sensor: SensorConfig
    nominal: float
    amplitude: float
    phase: float
    pinned: float | None = None
    drift: tuple[float, float, float, float] | None = None  # start value, start time, target, per second
    exception: int | None = None

    def value(self, now: float) -> float:
        if self.pinned is not None:
            return self.pinned
        if self.drift is not None:
            start, since, target, per_s = self.drift
            moved = per_s * (now - since)
            return target if moved >= abs(target - start) else start + math.copysign(moved, target - start)
        return self.nominal + self.amplitude * math.sin(2 * math.pi * now / PERIOD_S + self.phase)


@dataclass
class _UnitSim:
    device: DeviceConfig
    sensors: dict[str, _SensorSim]
    silent: bool = False
    delay_s: float = 0.0
    malformed: bool = False
    requests: int = 0
    by_table: dict[str, list[_SensorSim]] = field(default_factory=dict)


# Each fault kind as the attribute it sets, and that attribute's value on a healthy unit or sensor.
DEVICE_FAULTS: dict[str, tuple[str, object]] = {
    "silence": ("silent", False),
    "slow": ("delay_s", 0.0),
    "malformed": ("malformed", False),
}
SENSOR_FAULTS: dict[str, str] = {"exception": "exception", "set_value": "pinned", "drift": "drift"}
FAULT_KINDS = (*DEVICE_FAULTS, *SENSOR_FAULTS)


def _end(unit: _UnitSim, fault: str, sensors: list[_SensorSim] | None) -> None:
    """Caller holds the handle's lock; `sensors` None means all of the unit's."""
    if fault in DEVICE_FAULTS:
        attribute, healthy = DEVICE_FAULTS[fault]
        setattr(unit, attribute, healthy)
        return
    for sim in unit.sensors.values() if sensors is None else sensors:
        setattr(sim, SENSOR_FAULTS[fault], None)


def _unit_sim(device: DeviceConfig) -> _UnitSim:
    sensors = {}
    for index, (sensor_id, sensor) in enumerate(device.sensors.items()):
        low = sensor.alarm_low if sensor.alarm_low is not None else sensor.plausible_min
        high = sensor.alarm_high if sensor.alarm_high is not None else sensor.plausible_max
        sensors[sensor_id] = _SensorSim(sensor, nominal_value(sensor), (high - low) * AMPLITUDE, phase=index * 1.3)
    unit = _UnitSim(device, sensors)
    for sim in sensors.values():
        unit.by_table.setdefault(sim.sensor.register_type, []).append(sim)
    return unit


class SimulatorHandle:
    """A running simulator; every method is safe to call from any thread."""

    def __init__(self, devices: dict[str, DeviceConfig], host: str, port: int):
        units = [device.plc.unit_id for device in devices.values()]
        if len(set(units)) != len(units):
            raise ValueError(f"devices served on one port need distinct unit ids, got {units}")
        self.host = host
        self._units = {device_id: _unit_sim(device) for device_id, device in devices.items()}
        self._by_unit_id = {unit.device.plc.unit_id: unit for unit in self._units.values()}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: ModbusTcpServer  # set by `_start` on the loop thread before `started` is set
        started = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._serve, args=(port, started, failure), name=f"plc-sim-{host}:{port}", daemon=True
        )
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        self.port = _listening_port(self._server)

    # -- fault injection ---------------------------------------------------

    def silence(self, device: str, on: bool = True) -> None:
        with self._lock:
            self._unit(device).silent = on

    def slow(self, device: str, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"slow({device!r}): seconds must be >= 0, got {seconds}")
        with self._lock:
            self._unit(device).delay_s = seconds

    def exception(self, device: str, sensor: str, code: int | None) -> None:
        """Answer reads of `sensor` with Modbus exception `code` (None: stop)."""
        if code is not None:
            ExcCodes(code)  # raises ValueError naming an unknown code
        with self._lock:
            self._sensor(device, sensor).exception = code

    def set_value(self, device: str, sensor: str, value: float) -> None:
        sim = self._sensor(device, sensor)
        encode(sim.sensor, value)  # fails now, naming the sensor, if the registers cannot hold it
        with self._lock:
            sim.pinned, sim.drift = value, None

    def drift(self, device: str, sensor: str, target: float, per_s: float) -> None:
        if per_s <= 0:
            raise ValueError(f"drift({device!r}, {sensor!r}): per_s must be > 0, got {per_s}")
        sim = self._sensor(device, sensor)
        encode(sim.sensor, target)
        with self._lock:
            now = time.time()
            sim.drift, sim.pinned = (sim.value(now), now, target, per_s), None

    def malformed(self, device: str, on: bool = True) -> None:
        with self._lock:
            self._unit(device).malformed = on

    def end(self, device: str, fault: str, sensor: str | None = None) -> None:
        """End one kind of fault on `device`; a per-sensor kind on `sensor`, or on all its sensors without one."""
        unit = self._unit(device)
        if fault in DEVICE_FAULTS and sensor is not None:
            raise ValueError(f"fault {fault!r} is on the whole device, not on sensor {sensor!r}")
        if fault not in FAULT_KINDS:
            raise ValueError(f"no fault {fault!r}; the faults are {', '.join(FAULT_KINDS)}")
        sims = None if sensor is None else [self._sensor(device, sensor)]
        with self._lock:
            _end(unit, fault, sims)

    def clear(self, device: str | None = None) -> None:
        """Remove every fault (of one device, or all)."""
        with self._lock:
            for device_id, unit in self._units.items():
                if device in (None, device_id):
                    for fault in FAULT_KINDS:
                        _end(unit, fault, None)

    def requests(self, device: str) -> int:
        """Requests this unit has received; tests use it to prove a read never reached the network."""
        with self._lock:
            return self._unit(device).requests

    def value(self, device: str, sensor: str) -> float:
        """What the simulated sensor reads right now (before encoding)."""
        with self._lock:
            return self._sensor(device, sensor).value(time.time())

    def state(self) -> dict[str, Any]:
        now = time.time()
        with self._lock:
            return {
                device_id: {
                    "unit_id": unit.device.plc.unit_id,
                    "silent": unit.silent,
                    "delay_s": unit.delay_s,
                    "malformed": unit.malformed,
                    "sensors": {
                        sensor_id: {
                            "value": round(sim.value(now), 3),
                            "unit": sim.sensor.unit,
                            "pinned": sim.pinned is not None,
                            "drifting": sim.drift is not None,
                            "exception": sim.exception,
                        }
                        for sensor_id, sim in unit.sensors.items()
                    },
                }
                for device_id, unit in self._units.items()
            }

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=5)
        self._thread.join(timeout=5)

    def __enter__(self) -> SimulatorHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------

    def _unit(self, device: str) -> _UnitSim:
        try:
            return self._units[device]
        except KeyError:
            raise KeyError(f"the simulator serves no device {device!r}; it serves {', '.join(self._units)}") from None

    def _sensor(self, device: str, sensor: str) -> _SensorSim:
        unit = self._unit(device)
        try:
            return unit.sensors[sensor]
        except KeyError:
            raise KeyError(f"device {device!r} has no sensor {sensor!r}; it has {', '.join(unit.sensors)}") from None

    def _serve(self, port: int, started: threading.Event, failure: list[BaseException]) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start(port))
        except BaseException as exc:  # handed to the constructor's thread
            failure.append(exc)
            started.set()
            self._loop.close()
            return
        started.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self, port: int) -> None:
        devices = [self._sim_device(unit) for unit in self._units.values()]
        self._server = ModbusTcpServer(devices, address=(self.host, port), trace_packet=self._trace_packet)
        try:
            await self._server.serve_forever(background=True)
        except RuntimeError:  # pymodbus' way of saying the address is taken or invalid
            raise OSError(
                f"the simulator could not listen on {self.host}:{port} (in use, or not an address of this host)"
            ) from None

    async def _shutdown(self) -> None:
        await self._server.shutdown()
        # Requests parked by `silence` would otherwise outlive the loop.
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()
        self._loop.call_soon(self._loop.stop)

    def _sim_device(self, unit: _UnitSim) -> SimDevice:
        def block(table: str) -> list[SimData]:
            sims = unit.by_table.get(table, [])
            if not sims:
                return [SimData(0, datatype=DataType.INVALID)]
            return [SimData(s.sensor.address, count=s.sensor.width, datatype=DataType.REGISTERS) for s in sims]

        bits = [SimData(0, values=False, datatype=DataType.BITS)]

        async def action(
            function_code: int, start: int, address: int, count: int, registers: list[int], values: Any
        ) -> ExcCodes | None:
            return await self._answer(unit, function_code, start, address, count, registers, values)

        return SimDevice(
            unit.device.plc.unit_id, simdata=(bits, list(bits), block("holding"), block("input")), action=action
        )

    async def _answer(
        self,
        unit: _UnitSim,
        function_code: int,
        start: int,
        address: int,
        count: int,
        registers: list[int],
        values: Any,
    ) -> ExcCodes | None:
        with self._lock:
            unit.requests += 1
        while self._silent(unit):
            await asyncio.sleep(0.02)
        with self._lock:
            delay = unit.delay_s
        if delay:
            await asyncio.sleep(delay)
        table = READ_FUNCTIONS.get(function_code)
        if table is None or values is not None:
            return ExcCodes.ILLEGAL_FUNCTION  # a read-only view of the plant
        now = time.time()
        with self._lock:
            for sim in unit.by_table.get(table, []):
                sensor = sim.sensor
                overlaps = sensor.address < address + count and address < sensor.address + sensor.width
                if overlaps and sim.exception is not None:
                    return ExcCodes(sim.exception)
                offset = sensor.address - start
                registers[offset : offset + sensor.width] = encode(sensor, sim.value(now))
        return None

    def _silent(self, unit: _UnitSim) -> bool:
        with self._lock:
            return unit.silent

    def _trace_packet(self, sending: bool, data: bytes) -> bytes:
        """Fault `malformed`: a register-read reply one register short but correctly framed."""
        if not sending or len(data) < _MBAP_LEN + 2:
            return data
        unit = self._by_unit_id.get(data[6])
        with self._lock:
            broken = unit is not None and unit.malformed
        if not broken or data[7] not in READ_FUNCTIONS or data[8] < 2:
            return data
        byte_count = data[8] - 2
        length = 3 + byte_count
        return data[:4] + length.to_bytes(2, "big") + data[6:8] + bytes([byte_count]) + data[9 : 9 + byte_count]


def _listening_port(server: ModbusTcpServer) -> int:
    # pymodbus keeps the asyncio.Server it listens with in `transport`, which it types as a BaseTransport.
    listener = server.transport
    if not isinstance(listener, asyncio.Server):
        raise RuntimeError(f"pymodbus listens with a {type(listener).__name__}, not an asyncio.Server")
    return int(listener.sockets[0].getsockname()[1])


def start_simulator(devices: dict[str, DeviceConfig], host: str = "127.0.0.1", port: int = 0) -> SimulatorHandle:
    """Serve `devices` (each on its own unit id) on host:port in a background thread; port 0 picks a free one."""
    return SimulatorHandle(devices, host, port)
