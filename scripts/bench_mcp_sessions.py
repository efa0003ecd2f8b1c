"""MCP sessions opened and deleted by one token: does the service give the memory back?

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_mcp_sessions.py [--sessions 2000] [--settle 10]

A real `fixloop serve` process on the demo plant (PLCs on the simulator). One technician token, one keep-alive
connection, sequentially:
- baseline: as many authenticated HTTP requests as the sessions take (3 each), on a route that opens no session
  (`GET /v1/devices`): what the same traffic costs without MCP;
- sessions: --sessions times, `initialize` (which opens a session), `notifications/initialized`, and `DELETE /mcp`;
  with `--client sdk`, the MCP SDK's own client instead: initialize, its GET stream, tools/list, DELETE on exit.
The service's RSS and thread count at ready (warm), after the baseline, at the sessions' peak, right after them,
and --settle seconds later. Issue 22's attack left RSS 67 MB higher after 2,000 sessions, for good.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
import httpx
import httpx2
from bench_hardening import TECHNICIAN, serve
from bench_support import PeakSampler, free_port, rss_mb, threads
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from rich.table import Table

from edge.config import load_config
from knowledge.demo import build_demo_index
from tools.plc.simulator import start_simulator

PROTOCOL = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
console = Console()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=2000, help="sessions to open and delete")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds idle before the last figure")
    parser.add_argument("--client", choices=["http", "sdk"], default="http", help="plain HTTP requests or the SDK")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-sessions-") as tmp:
        state = Path(tmp)
        console.print("[dim]building the demo index…[/]")
        build_demo_index(state)
        plc_port = free_port()
        sim = start_simulator(load_config(env={}).devices, "127.0.0.1", plc_port)
        try:
            with serve(state, plc_port) as (url, pid), client_of(url) as client:
                figures = {"ready, warm": (rss_mb(pid), threads(pid))}
                started = time.perf_counter()
                for _ in range(3 * args.sessions):
                    client.get("/v1/devices").raise_for_status()
                baseline_s = time.perf_counter() - started
                figures[f"after {3 * args.sessions} plain requests (baseline)"] = rss_mb(pid), threads(pid)
                started = time.perf_counter()
                with PeakSampler(pid) as peak:
                    if args.client == "sdk":
                        anyio.run(sdk_sessions, url, args.sessions)
                    else:
                        for _ in range(args.sessions):
                            open_and_delete(client)
                sessions_s = time.perf_counter() - started
                figures[f"{args.sessions} sessions: peak"] = peak.rss_mb, peak.threads
                figures[f"{args.sessions} sessions: right after"] = rss_mb(pid), threads(pid)
                time.sleep(args.settle)
                figures[f"{args.settle:g} s later"] = rss_mb(pid), threads(pid)
        finally:
            sim.stop()

    table = Table(title=f"fixloop serve, one token: {args.sessions} MCP sessions opened and deleted")
    for column in ("", "RSS MB", "threads"):
        table.add_column(column, justify="right" if column else "left")
    for stage, (rss, running) in figures.items():
        table.add_row(stage, f"{rss:.0f}", str(running))
    console.print(table)
    ready, baseline, peak_mb, after, settled = (rss for rss, _ in figures.values())
    console.print(
        f"baseline traffic: {baseline - ready:+.0f} MB in {baseline_s:.1f} s; sessions, over the baseline: "
        f"{peak_mb - baseline:+.0f} MB at peak, {after - baseline:+.0f} MB right after "
        f"({sessions_s:.1f} s, {sessions_s / args.sessions * 1000:.1f} ms a session), {settled - baseline:+.0f} MB settled"
    )
    return 0


def client_of(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TECHNICIAN}"}, timeout=30)


def open_and_delete(client: httpx.Client) -> None:
    opened = client.post("/mcp", json=INITIALIZE, headers={"Accept": ACCEPT})
    if opened.status_code != 200:
        raise SystemExit(f"initialize: HTTP {opened.status_code} {opened.text[:200]}")
    session = {"Accept": ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": PROTOCOL}
    ready = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    deleted = client.delete("/mcp", headers=session)
    if (ready.status_code, deleted.status_code) != (202, 200):
        raise SystemExit(f"initialized: HTTP {ready.status_code}, DELETE: HTTP {deleted.status_code} {deleted.text}")


async def sdk_sessions(url: str, count: int) -> None:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TECHNICIAN}"}, timeout=30) as http:
        for _ in range(count):
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                await client.list_tools()


if __name__ == "__main__":
    sys.exit(main())
