"""Fault injection into a running `fixloop plc-sim`, over HTTP on loopback.

    GET  /state  -> every simulated device: faults and current values
    POST /fault  {"fault": "silence", "device": "press-3"}
                 {"fault": "slow", "device": "press-3", "seconds": 1.5}
                 {"fault": "exception", "device": "press-3", "sensor": "coolant_level", "code": 4}  (code 4 if left out)
                 {"fault": "set_value", "device": "press-3", "sensor": "motor_temp", "value": 3276.7}
                 {"fault": "drift", "device": "press-3", "sensor": "motor_temp", "target": 95, "per_s": 0.5}
                 {"fault": "malformed", "device": "cnc-7"}
                 {"fault": "clear"}  (all devices, or one with "device")
                 {"fault": "slow", "device": "press-3", "on": false}  ends that kind, without its parameters;
                     a per-sensor kind (exception, set_value, drift) on "sensor", or on every sensor without one

`fixloop plc-fault` is the client. Bad requests get 400 with the reason.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tools.plc.simulator import SENSOR_FAULTS, SimulatorHandle

Fault = Literal["silence", "slow", "exception", "set_value", "drift", "malformed", "clear"]


class FaultRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fault: Fault
    device: str | None = None
    sensor: str | None = None
    on: bool = True
    seconds: float | None = None
    code: int | None = None
    value: float | None = None
    target: float | None = None
    per_s: float | None = None


# What each kind needs to start; ending one (`"on": false`) takes none of these, only a sensor if per-sensor.
_NEEDS = {
    "silence": (),
    "slow": ("seconds",),
    "exception": ("sensor",),
    "set_value": ("sensor", "value"),
    "drift": ("sensor", "target", "per_s"),
    "malformed": (),
}
_PARAMETERS = ("sensor", "seconds", "code", "value", "target", "per_s")
# Modbus SERVER DEVICE FAILURE, what a PLC answers when a sensor's input has failed.
_DEFAULT_EXCEPTION = 4


def apply_fault(sims: dict[str, SimulatorHandle], request: FaultRequest) -> None:
    """Route one fault to the simulator serving its device; raises ValueError/KeyError naming what is wrong."""
    if request.fault == "clear":
        for device_id, sim in sims.items():
            if request.device in (None, device_id):
                sim.clear(device_id)
        return
    if request.device is None:
        raise ValueError(f"fault {request.fault!r} needs a device")
    if request.device not in sims:
        raise KeyError(f"no simulated device {request.device!r}; simulated: {', '.join(sims)}")
    sim, device = sims[request.device], request.device
    if request.on:
        takes = _NEEDS[request.fault] + (("code",) if request.fault == "exception" else ())
    else:
        takes = ("sensor",) if request.fault in SENSOR_FAULTS else ()
    given = [name for name in _PARAMETERS if getattr(request, name) is not None]
    if unexpected := [name for name in given if name not in takes]:
        doing = "ending fault" if not request.on else "fault"
        raise ValueError(f"{doing} {request.fault!r} takes no {', '.join(unexpected)}")
    if not request.on:
        sim.end(device, request.fault, request.sensor)
        return
    if missing := [name for name in _NEEDS[request.fault] if name not in given]:
        raise ValueError(f"fault {request.fault!r} needs {', '.join(missing)}")
    if request.fault == "silence":
        sim.silence(device)
    elif request.fault == "malformed":
        sim.malformed(device)
    elif request.fault == "slow":
        sim.slow(device, request.seconds)  # type: ignore[arg-type]
    elif request.fault == "exception":
        code = _DEFAULT_EXCEPTION if request.code is None else request.code
        sim.exception(device, request.sensor, code)  # type: ignore[arg-type]
    elif request.fault == "set_value":
        sim.set_value(device, request.sensor, request.value)  # type: ignore[arg-type]
    else:
        sim.drift(device, request.sensor, request.target, request.per_s)  # type: ignore[arg-type]


class ControlServer:
    def __init__(self, sims: dict[str, SimulatorHandle], host: str, port: int):
        handler = _handler(sims)
        self._server = ThreadingHTTPServer((host, port), handler)
        self.port = self._server.server_address[1]
        # A short poll: `stop` waits for it (0.5 s by default).
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="plc-sim-control", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler(sims: dict[str, SimulatorHandle]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/state":
                return self._reply(404, {"error": "GET /state or POST /fault"})
            state: dict[str, Any] = {}
            for sim in {id(s): s for s in sims.values()}.values():
                state.update(sim.state())
            self._reply(200, state)

        def do_POST(self) -> None:
            if self.path != "/fault":
                return self._reply(404, {"error": "GET /state or POST /fault"})
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = FaultRequest.model_validate_json(self.rfile.read(length) or b"{}")
                apply_fault(sims, request)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "body"
                return self._reply(400, {"error": f"{where}: {first['msg']}"})
            except (KeyError, ValueError) as exc:
                return self._reply(400, {"error": str(exc.args[0]) if exc.args else str(exc)})
            self._reply(200, {"applied": request.model_dump(exclude_none=True)})

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the CLI prints what was applied; per-request access lines would drown it

    return Handler
