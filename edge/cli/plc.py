"""`fixloop plc sim|fault|read|poll`: the PLC simulator, fault injection, one reading, the cache poller.

    fixloop plc sim                          # serve the configured plant (demo: 127.0.0.1:15020)
    fixloop plc fault silence press-3        # the simulator stops answering press-3
    fixloop plc fault set_value press-3 motor_temp --value 3276.7
    fixloop plc fault slow press-3 --off     # end one kind of fault, whatever options started it
    fixloop plc fault clear                  # end them all
    fixloop plc read press-3 coolant_level   # one reading through the agent's tool
    fixloop plc poll                         # refresh the cache every [plc] poll_interval_s

The earlier flat names `plc-sim`, `plc-fault`, `plc-read` and `poller` still work, hidden from the help.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading

from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.cli.terminal import console as terminal
from edge.config import Config
from tools import plant

_QUALITY_STYLE = {"Good": "green", "UncertainNoCommunicationLastUsableValue": "yellow", "BadNoCommunication": "red"}


def register(subparsers: argparse._SubParsersAction) -> None:
    plc = subparsers.add_parser("plc", help="the PLCs: simulator, fault injection, one reading, the cache poller")
    actions = plc.add_subparsers(dest="plc_command", metavar="ACTION", required=True)
    for name, alias, help, arguments, func in (
        (
            "sim",
            "plc-sim",
            "serve the configured plant over Modbus TCP, with fault injection",
            _sim_arguments,
            run_plc_sim,
        ),
        ("fault", "plc-fault", "inject a fault into a running `fixloop plc sim`", _fault_arguments, run_plc_fault),
        ("read", "plc-read", "read one sensor through the agent's PLC tool", _read_arguments, run_plc_read),
        ("poll", "poller", "refresh every sensor into the PLC cache until stopped", _poll_arguments, run_poller),
    ):
        # The flat name each command had before the group: kept for scripts and systemd units, hidden from the help.
        for parser in (actions.add_parser(name, help=help), subparsers.add_parser(alias, help=argparse.SUPPRESS)):
            arguments(parser)
            parser.set_defaults(func=func)


def _sim_arguments(sim: argparse.ArgumentParser) -> None:
    sim.add_argument("--host", help="listen address (default: each device's configured PLC host)")
    sim.add_argument(
        "--port", type=int, help="serve every device on this port (default: each device's configured port)"
    )
    sim.add_argument(
        "--control-port", type=int, help="loopback HTTP port for fault injection (default: Modbus port + 1)"
    )


def _fault_arguments(fault: argparse.ArgumentParser) -> None:
    fault.add_argument(
        "fault", choices=["silence", "slow", "exception", "set_value", "drift", "malformed", "clear", "state"]
    )
    fault.add_argument("device", nargs="?")
    fault.add_argument("sensor", nargs="?")
    fault.add_argument(
        "--off",
        action="store_true",
        help="end a fault of this kind, without its options (exception, set_value, drift: on SENSOR, or on all)",
    )
    fault.add_argument("--seconds", type=float, help="slow: answer delay")
    fault.add_argument("--code", type=int, help="exception: Modbus exception code (default 4)")
    fault.add_argument("--value", type=float, help="set_value: the value to serve")
    fault.add_argument("--target", type=float, help="drift: where the value moves to")
    fault.add_argument("--per-s", type=float, help="drift: units per second")
    fault.add_argument("--control", help="control URL (default: http://127.0.0.1:<Modbus port + 1>)")


def _read_arguments(read: argparse.ArgumentParser) -> None:
    read.add_argument("device")
    read.add_argument("sensor")
    json_option(read, help="print the tool output as JSON")


def _poll_arguments(poll: argparse.ArgumentParser) -> None:
    poll.add_argument("--interval", type=float, help="seconds between cycles (default: [plc] poll_interval_s)")
    poll.add_argument("--once", action="store_true", help="one cycle, then exit")


def run_plc_sim(args: argparse.Namespace, config: Config) -> int:
    from tools.plc.sim_control import ControlServer
    from tools.plc.simulator import start_simulator

    if not config.devices:
        raise CliError("the config has no [devices] to simulate")
    sims = {}
    handles = []
    try:
        for (host, port), devices in plant.endpoints(plant.repoint(config.devices, args.host, args.port)).items():
            handle = start_simulator(devices, host, port)
            handles.append(handle)
            sims.update({device_id: handle for device_id in devices})
        first = handles[0]
        control = ControlServer(sims, "127.0.0.1", args.control_port or first.port + 1)
    except (OSError, ValueError) as exc:
        for handle in handles:
            handle.stop()
        raise CliError(str(exc), exit_code=1) from None
    console = terminal()
    table = Table(title="Simulated plant", show_lines=False)
    for column in ("device", "endpoint", "unit", "sensors"):
        table.add_column(column)
    for device_id, device in config.devices.items():
        handle = sims[device_id]
        table.add_row(device_id, f"{handle.host}:{handle.port}", str(device.plc.unit_id), ", ".join(device.sensors))
    console.print(table)
    console.print(
        f"Fault injection: [bold]fixloop plc fault silence press-3[/] or POST http://127.0.0.1:{control.port}/fault "
        "(GET /state shows values). Ctrl-C stops."
    )
    _wait_for_stop()
    control.stop()
    for handle in handles:
        handle.stop()
    console.print("simulator stopped")
    return 0


def run_plc_fault(args: argparse.Namespace, config: Config) -> int:
    import httpx

    base = args.control or _default_control_url(config)
    try:
        if args.fault == "state":
            response = httpx.get(f"{base}/state", timeout=2.0)
        else:
            body = {
                "fault": args.fault,
                "device": args.device,
                "sensor": args.sensor,
                "on": not args.off,
                "seconds": args.seconds,
                "code": args.code,
                "value": args.value,
                "target": args.target,
                "per_s": args.per_s,
            }
            response = httpx.post(f"{base}/fault", json={k: v for k, v in body.items() if v is not None}, timeout=2.0)
    except httpx.HTTPError as exc:
        raise CliError(
            f"cannot reach the simulator at {base} ({exc}); is `fixloop plc sim` running?", exit_code=1
        ) from None
    if response.status_code != 200:
        raise CliError(response.json().get("error", response.text))
    terminal().print_json(json.dumps(response.json(), ensure_ascii=False))
    return 0


def run_plc_read(args: argparse.Namespace, config: Config) -> int:
    from tools.contract import ToolContext
    from tools.plc.tool import PlcReadArgs, PlcReadTool

    console = terminal()
    tool = PlcReadTool(config.devices, config.plc, config.state_path(config.plc.cache_file))
    try:
        output = tool.run(
            PlcReadArgs(device_id=args.device, sensor=args.sensor),
            ToolContext(request_id="cli", run_id="cli", loop_step=1, actor="operator"),
        )
    finally:
        tool.close()
    if args.json:
        print(output.model_dump_json(indent=2))
        return 0 if output.status in ("ok", "degraded") else 1
    refs = [item for item in output.items if item.kind == "ref"]
    quality = refs[0].fields.get("quality", "") if refs else ""
    style = _QUALITY_STYLE.get(quality, "red")
    for item in output.items:
        console.print(f"[{style}]{item.text}[/]")
    if refs:
        fields = refs[0].fields
        console.print(
            f"[dim]quality {fields['quality']} · source {fields['source']} · age {fields['age_s']} s"
            f" · outlier {fields['is_outlier']} · alarm {fields['alarm']}[/]"
        )
    if output.suggestion:
        console.print(f"[bold]suggestion:[/] {output.suggestion}")
    return 0 if output.status in ("ok", "degraded") else 1


def run_poller(args: argparse.Namespace, config: Config) -> int:
    from edge.agent import plc_gateway
    from tools.plc.poller import Poller, PollReport, poll_once

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    console = terminal()
    gateway = plc_gateway(config)

    def show(report: PollReport) -> None:
        style = "green" if report.no_communication == report.skipped == len(report.rejected) == 0 else "yellow"
        console.print(
            f"[{style}]poll[/] refreshed {report.refreshed}/{report.total}, no communication "
            f"{report.no_communication}, skipped (breaker open) {report.skipped}, rejected "
            f"{len(report.rejected)} in {report.elapsed_s * 1000:.0f} ms"
        )
        for key, why in report.rejected.items():
            console.print(f"  [red]{key}[/]: {why}")

    try:
        if args.once:
            show(poll_once(gateway))
            return 0
        poller = Poller(gateway, args.interval or config.plc.poll_interval_s, on_cycle=show)
        poller.start()
        _wait_for_stop()
        poller.stop()
        return 0
    finally:
        gateway.close()


def _default_control_url(config: Config) -> str:
    port = next(iter(config.devices.values())).plc.port if config.devices else 15020
    return f"http://127.0.0.1:{port + 1}"


def _wait_for_stop() -> None:
    """Block until Ctrl-C or SIGTERM (systemd stop)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
