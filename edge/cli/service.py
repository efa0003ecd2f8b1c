"""`fixloop serve` (the API and the tablet app) and `fixloop demo` (simulator + service + a first answer)."""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from rich.console import Console

from edge.cli.errors import CliError
from edge.cli.terminal import console as terminal
from edge.config import Config, with_model
from edge.llm.local_models import DEFAULT_MODEL, KNOWN_MODELS
from tools import plant

_DEMO_QUESTION = "Press-3 shows E102, what should I do?"
_DEMO_DEVICE = "press-3"


def register(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve", help="run the API and the tablet app")
    serve.add_argument("--host", help="listen address (default: [service] host)")
    serve.add_argument("--port", type=int, help="listen port (default: [service] port)")
    serve.add_argument(
        "--poller",
        action="store_true",
        help="poll the PLCs into the cache in this process (production runs `fixloop plc poll` as its own unit)",
    )
    serve.set_defaults(func=run_serve)

    demo = subparsers.add_parser("demo", help="PLC simulator + service + tablet app on the demo plant; prints the URL")
    demo.add_argument("--host", help="listen address (default: [service] host)")
    demo.add_argument("--port", type=int, help="listen port (default: [service] port)")
    demo.add_argument(
        "--plc-port", type=int, help="serve the simulated PLCs on this port instead of the configured one"
    )
    demo.add_argument(
        "--llm",
        choices=["local"],
        help="local: plan with a model from a wheel (SmolLM2-135M unless --model) under llama.cpp's Python "
        "server on loopback",
    )
    demo.add_argument(
        "--model",
        choices=list(KNOWN_MODELS),
        default=DEFAULT_MODEL,
        help="with --llm local: which model (qwen-0.5b after `make qwen-0.5b`; docs/deploy-cpu-only.md)",
    )
    demo.add_argument("--once", action="store_true", help="exit after the first answer (for checks and CI)")
    demo.set_defaults(func=run_demo)


def _listening_on(config: Config, host: str | None, port: int | None) -> Config:
    service = config.service.model_copy(update={k: v for k, v in (("host", host), ("port", port)) if v is not None})
    return config.model_copy(update={"service": service})


def run_serve(args: argparse.Namespace, config: Config) -> int:
    import uvicorn

    from edge.service.app import create_app
    from edge.service.connections import uvicorn_config
    from edge.service.service import Service

    config = _listening_on(config, args.host, args.port)
    console = terminal(stderr=True)
    if not config.service.technician_tokens:
        console.print("[yellow]warning:[/] [service] technician_tokens is empty: no tablet can use the API")
    service = Service(config, poller=args.poller)
    console.print(
        f"fixloop serving on http://{config.service.host}:{config.service.port}/app/ "
        f"(planner: {'rules, degraded mode' if service.agent.degraded else config.llm.url})"
    )
    uvicorn.Server(
        uvicorn_config(
            create_app(service),
            config.service,
            config.service.host,
            config.service.port,
            log_level="info",
            timeout_graceful_shutdown=10,
        )
    ).run()
    return 0


def run_demo(args: argparse.Namespace, config: Config) -> int:
    from edge.service.app import create_app
    from edge.service.server import ServerThread
    from edge.service.service import Service
    from knowledge.demo import build_demo_index
    from tools.plc.simulator import start_simulator

    console = terminal()
    config = _listening_on(config, args.host, args.port)
    model_server = None
    if args.llm == "local":
        from edge.llm.local_server import LocalServerError, start_local_server

        model = KNOWN_MODELS[args.model]
        try:
            with console.status(f"Checking {model.served_as} and starting it under llama.cpp…"):
                model_server = start_local_server(
                    model, state_dir=Path(config.state_dir), log_path=Path(config.state_dir) / "llama-server.log"
                )
        except LocalServerError as exc:
            raise CliError(str(exc)) from None
        config = with_model(config, model_server.url, model_server.model, model_server.profile)
        console.print(
            f"language model: {model_server.model} at {model_server.url} (profile {model_server.profile}, "
            f"{config.loop.max_wall_s:g} s a run, {model_server.threads} threads; log {model_server.log_path})"
        )
    if args.plc_port:
        config = config.model_copy(update={"devices": plant.repoint(config.devices, port=args.plc_port)})
    with console.status("Building the demo manual index (only what changed)…"):
        build_demo_index(
            Path(config.state_dir), config.knowledge.model_path, config.state_path(config.knowledge.index_file)
        )

    simulators = []
    server = None
    # systemd and `kill` stop the demo with SIGTERM: it must stop the model server it started (that
    # runs in a session of its own, out of reach of the terminal's Ctrl-C) as Ctrl-C does.
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _interrupt)
    try:
        for (host, port), devices in plant.endpoints(config.devices).items():
            simulators.append(start_simulator(devices, host, port))
            console.print(f"PLC simulator: modbus://{host}:{port} ({', '.join(devices)})")
        service = Service(config, poller=True)
        server = ServerThread(
            create_app(service), config.service.host, config.service.port, limits=config.service
        ).start()
        if model_server is not None:
            # The first question waits for the model's prompt cache, not behind it.
            with console.status("Priming the model with the system prompt…"):
                while service.warmup.warming():
                    time.sleep(0.2)
        token = config.service.technician_tokens[0] if config.service.technician_tokens else None
        console.print(f"[bold green]fixloop is running:[/] {server.url}/app/" + (f"#token={token}" if token else ""))
        if token:
            console.print(
                f"technician token (demo only): [bold]{token}[/]   metrics: {server.url}/metrics "
                f"(admin token)   API: {server.url}/docs"
            )
            _ask_first_question(server.url, token, console, config.loop.max_wall_s + config.loop.handover_wall_s)
        if args.once:
            return 0
        console.print("[dim]Ctrl-C stops the demo.[/]")
        while server.thread.is_alive():
            server.thread.join(0.5)
    except KeyboardInterrupt:
        console.print("stopping…")
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        try:
            if server is not None:
                server.stop()
            for simulator in simulators:
                simulator.stop()
            if model_server is not None:
                model_server.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """The first Ctrl-C or SIGTERM stops the demo. A second one (make and `timeout` pass theirs on as well)
    must not cut the clean-up short, even while it prints "stopping…", and leave the model server running:
    it is ignored until the demo has stopped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _ask_first_question(url: str, token: str, console: Console, run_budget_s: float) -> None:
    """One question through the real API, so a terminal user sees the whole path work."""
    import httpx

    from edge.cli.agent import print_trace
    from edge.run import RunRecord

    console.rule(f"asking: {_DEMO_QUESTION}")
    headers = {"Authorization": f"Bearer {token}"}
    started = time.perf_counter()
    first_ms = None
    events = 0
    run_id = None
    with httpx.stream(
        "POST",
        f"{url}/v1/runs",
        headers=headers,
        timeout=run_budget_s + 60,
        json={"question": _DEMO_QUESTION, "device_id": _DEMO_DEVICE},
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            events += 1
            first_ms = first_ms if first_ms is not None else (time.perf_counter() - started) * 1000
            if event["type"] == "stored":
                run_id = event["run_id"]
            elif event["type"] == "error":
                console.print(f"[red]run failed:[/] {event['error']}")
    console.print(f"[dim]{events} events streamed, the first after {first_ms or 0:.0f} ms[/]")
    if run_id is None:
        return
    view = httpx.get(f"{url}/v1/runs/{run_id}", headers=headers, timeout=10).json()
    print_trace(RunRecord.model_validate(view["record"]), console)
