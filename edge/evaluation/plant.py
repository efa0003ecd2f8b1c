"""The demo plant for one evaluation run: a PLC simulator in-process, fresh stores, injectable faults.

Every run starts clean: the simulator serves the configured devices on a free
loopback port (the devices are re-pointed at it), and the PLC cache and the
work-order store live in the run's own directory. The manual index is the
configured one; when it does not exist, the demo index is built in the run's
directory. Faults are set just before a case's question and cleared after it,
including the breakers they opened, so cases do not leak into each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from edge.config import Config
from edge.evaluation.cases import Fault
from tools import plant
from tools.plc.gateway import PlcGateway
from tools.plc.simulator import SimulatorHandle, start_simulator


class EvalPlant:
    def __init__(self, config: Config, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.index_built = False
        index = config.state_path(config.knowledge.index_file)
        if not index.exists():
            from knowledge.demo import build_demo_index

            index = build_demo_index(workdir, config.knowledge.model_path, workdir / "manuals.sqlite")
            self.index_built = True
        self.index_path = index.resolve()
        self.sim: SimulatorHandle = start_simulator(config.devices, "127.0.0.1", 0)
        devices = plant.repoint(config.devices, self.sim.host, self.sim.port)
        self.config = config.model_copy(
            update={
                "state_dir": str(workdir),
                "devices": devices,
                "knowledge": config.knowledge.model_copy(update={"index_file": str(self.index_path)}),
                "plc": config.plc.model_copy(update={"cache_file": "plc_cache.sqlite"}),
                "work_orders": config.work_orders.model_copy(update={"store_file": "work_orders.sqlite"}),
            }
        )
        # The poller's role: it fills the cache that a PLC outage falls back on.
        self.poller = PlcGateway(devices, self.config.plc, self.config.state_path(self.config.plc.cache_file))

    @contextlib.contextmanager
    def fault(self, fault: Fault | None) -> Iterator[None]:
        if fault is None:
            yield
            return
        device = self.config.devices[fault.device_id]
        if fault.kind == "broken_sensor":
            assert fault.sensor is not None
            sensor = device.sensors[fault.sensor]
            stuck = (
                fault.value
                if fault.value is not None
                else sensor.plausible_max + (sensor.plausible_max - sensor.plausible_min)
            )
            self.sim.set_value(fault.device_id, fault.sensor, stuck)
        else:
            for sensor_id in device.sensors:
                self.poller.refresh(fault.device_id, sensor_id)
            self.sim.silence(fault.device_id)
        try:
            yield
        finally:
            self.sim.clear(fault.device_id)
            for sensor_id in device.sensors:
                self.poller.store.clear_breakers(fault.device_id, sensor_id)

    def close(self) -> None:
        self.poller.close()
        self.sim.stop()
