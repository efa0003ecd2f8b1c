"""The PLC sensor tool: Modbus TCP reads with cache fallback, breakers, poller and a plant simulator.

The names below are the package's API; everything else (the Modbus reader, the codec, the breakers,
the read policy in `reading`) is internal to it. Each name is imported from its module on first use,
so importing `tools.plc.config` for the configuration does not load pymodbus's server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tools.plc.config import PlcConfig
    from tools.plc.errors import NoCommunication, PlcReadError, PlcRejected
    from tools.plc.gateway import BreakerState, PlcGateway, SensorProbe, breaker_states, probe_device
    from tools.plc.history import SensorHistory, UnknownSensor, sensor_history
    from tools.plc.poller import Poller, PollReport, poll_once
    from tools.plc.reading import Reading
    from tools.plc.sim_control import ControlServer
    from tools.plc.simulator import SimulatorHandle, start_simulator
    from tools.plc.store import PlcStore
    from tools.plc.tool import PlcReadArgs, PlcReadTool

_EXPORTS = {
    "PlcConfig": "tools.plc.config",
    "PlcReadTool": "tools.plc.tool",
    "PlcReadArgs": "tools.plc.tool",
    "PlcGateway": "tools.plc.gateway",
    "SensorProbe": "tools.plc.gateway",
    "BreakerState": "tools.plc.gateway",
    "probe_device": "tools.plc.gateway",
    "breaker_states": "tools.plc.gateway",
    "Reading": "tools.plc.reading",
    "PlcStore": "tools.plc.store",
    "SensorHistory": "tools.plc.history",
    "UnknownSensor": "tools.plc.history",
    "sensor_history": "tools.plc.history",
    "PlcReadError": "tools.plc.errors",
    "NoCommunication": "tools.plc.errors",
    "PlcRejected": "tools.plc.errors",
    "Poller": "tools.plc.poller",
    "PollReport": "tools.plc.poller",
    "poll_once": "tools.plc.poller",
    "SimulatorHandle": "tools.plc.simulator",
    "start_simulator": "tools.plc.simulator",
    "ControlServer": "tools.plc.sim_control",
}

__all__ = [
    "BreakerState",
    "ControlServer",
    "NoCommunication",
    "PlcConfig",
    "PlcGateway",
    "PlcReadArgs",
    "PlcReadError",
    "PlcReadTool",
    "PlcRejected",
    "PlcStore",
    "PollReport",
    "Poller",
    "Reading",
    "SensorHistory",
    "SensorProbe",
    "SimulatorHandle",
    "UnknownSensor",
    "breaker_states",
    "poll_once",
    "probe_device",
    "sensor_history",
    "start_simulator",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
