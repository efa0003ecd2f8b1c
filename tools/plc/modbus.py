"""Raw register reads over Modbus TCP within a hard time budget.

One reused connection per PLC endpoint (host, port), guarded by a lock: the
units behind one endpoint share it, as they share the wire, and reads queue for
it. pymodbus retries multiply its timeout, so retries are 0 and the budget
(including connect and the queue) is ours: each step gets only what is left of
it. Time spent in the queue is ours, not the PLC's: a read that ran out of
budget there, or whose exchange had only the queue's leftovers, is `PlcBusy`,
which never counts towards a breaker.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ConnectionException, ModbusException

from tools.plant import PlcEndpoint, SensorConfig
from tools.plc.errors import GATEWAY_CODES, MalformedReply, ModbusExceptionReply, PlcBusy, PlcTimeout, PlcUnreachable

# Every pymodbus failure becomes one of our typed errors, which callers report;
# its own error logs (with frame dumps) would only repeat them on stderr.
logging.getLogger("pymodbus").setLevel(logging.CRITICAL)

# A failure this close to the deadline is the deadline.
_DEADLINE_SLACK_S = 0.005


@dataclass
class _Link:
    client: ModbusTcpClient
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModbusReader:
    def __init__(self) -> None:
        self._links: dict[tuple[str, int], _Link] = {}
        self._links_lock = threading.Lock()

    def read_registers(self, plc: PlcEndpoint, sensor: SensorConfig, budget_s: float) -> list[int]:
        started = time.monotonic()
        deadline = started + budget_s
        where = f"{sensor.register_type} register {sensor.address} of unit {plc.unit_id} at {plc.host}:{plc.port}"
        link = self._link(plc, budget_s)
        if not link.lock.acquire(timeout=budget_s):
            raise PlcBusy(f"{plc.host}:{plc.port} stayed busy with other reads for the whole {budget_s:g} s budget")
        queued_s = time.monotonic() - started
        try:
            return self._read_locked(link, plc, sensor, deadline, where)
        except PlcTimeout as exc:
            if queued_s <= _DEADLINE_SLACK_S:
                raise
            # A PLC that answers in 0.3 s misses a deadline 0.2 s away: no sign of a fault.
            raise PlcBusy(
                f"{exc}: the queue for {plc.host}:{plc.port} had taken {queued_s:.2f} s of the {budget_s:g} s budget"
            ) from None
        finally:
            link.lock.release()

    def close(self) -> None:
        with self._links_lock:
            for link in self._links.values():
                with link.lock:
                    link.client.close()
            self._links.clear()

    def _link(self, plc: PlcEndpoint, budget_s: float) -> _Link:
        key = (plc.host, plc.port)
        with self._links_lock:
            link = self._links.get(key)
            if link is None:
                client = ModbusTcpClient(plc.host, port=plc.port, timeout=budget_s, retries=0, reconnect_delay=0)
                link = self._links[key] = _Link(client)
            return link

    def _read_locked(
        self, link: _Link, plc: PlcEndpoint, sensor: SensorConfig, deadline: float, where: str
    ) -> list[int]:
        reused = link.client.connected
        try:
            return self._attempt(link.client, plc, sensor, deadline, where)
        except ConnectionException as exc:
            link.client.close()
            lost = exc
            # A reused socket may be stale (PLC restarted): one fresh connection is allowed within the budget.
            if reused and time.monotonic() < deadline - _DEADLINE_SLACK_S:
                try:
                    return self._attempt(link.client, plc, sensor, deadline, where)
                except ConnectionException as again:
                    link.client.close()
                    lost = again
            raise PlcUnreachable(f"connection to {plc.host}:{plc.port} lost: {lost}") from None

    def _attempt(
        self, client: ModbusTcpClient, plc: PlcEndpoint, sensor: SensorConfig, deadline: float, where: str
    ) -> list[int]:
        self._connect(client, plc, deadline)
        self._set_timeout(client, deadline, where)
        read = client.read_holding_registers if sensor.register_type == "holding" else client.read_input_registers
        try:
            reply = read(sensor.address, count=sensor.width, device_id=plc.unit_id)
        except ConnectionException:
            raise
        except ModbusException as exc:
            # A late answer to this request would confuse the next one on the same socket.
            client.close()
            if time.monotonic() >= deadline - _DEADLINE_SLACK_S:
                raise PlcTimeout(f"no answer from {where} within the read budget") from None
            raise MalformedReply(f"unreadable reply from {where}: {exc}") from None
        if reply.isError():
            code = getattr(reply, "exception_code", 0)
            if code in GATEWAY_CODES:
                raise PlcUnreachable(str(ModbusExceptionReply(code, where)))
            raise ModbusExceptionReply(code, where)
        return list(reply.registers)

    @staticmethod
    def _connect(client: ModbusTcpClient, plc: PlcEndpoint, deadline: float) -> None:
        if client.connected:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PlcTimeout(f"no time left to connect to {plc.host}:{plc.port}")
        client.comm_params.timeout_connect = remaining
        if not client.connect():
            if time.monotonic() >= deadline - _DEADLINE_SLACK_S:
                raise PlcTimeout(f"connecting to {plc.host}:{plc.port} took longer than the read budget")
            raise PlcUnreachable(f"cannot connect to {plc.host}:{plc.port}")

    @staticmethod
    def _set_timeout(client: ModbusTcpClient, deadline: float, where: str) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            client.close()
            raise PlcTimeout(f"the read budget ran out before asking {where}")
        client.comm_params.timeout_connect = remaining
