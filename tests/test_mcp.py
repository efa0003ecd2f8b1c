"""The plant's tools for other agents over MCP, through the official SDK's client: `fixloop mcp` as a
subprocess over stdio, and the streamable HTTP endpoint on uvicorn behind the technician tokens.

Everything is real: the demo manual index, the PLC simulator over Modbus TCP, the SQLite work-order store."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from starlette.routing import Route

from edge.agent import build_registry, work_order_store
from edge.config import Config, load_config
from edge.mcp_server import McpHttpApp
from edge.service.server import ServerThread
from tests.fixtures.service import TECHNICIAN_TOKEN, free_port, run_service
from tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]
MANUAL, PLC, WORK_ORDER = ("search_maintenance_manual_by_fault_code", "read_plc_sensor_value", "generate_work_order")
ORDER_ARGS = {"device_id": "press-3", "fault_code": "E102", "summary": "motor overheating reported over MCP"}
TOKEN = "mcp-test-technician-token"
OTHER_TOKEN = "mcp-test-second-technician-token"


def stdio_server(state: Path, plc_port: int, **overrides: str) -> StdioServerParameters:
    """`fixloop mcp` on the demo plant, its PLCs on the simulator, its state (and index copy) in `state`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIXLOOP")}
    env.update(
        {
            "FIXLOOP_STATE_DIR": str(state),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "FIXLOOP__DEVICES__PRESS-3__PLC__PORT": str(plc_port),
            "FIXLOOP__DEVICES__CNC-7__PLC__PORT": str(plc_port),
            **overrides,
        }
    )
    return StdioServerParameters(command=sys.executable, args=["-m", "edge.cli.main", "mcp"], env=env, cwd=ROOT)


@pytest.fixture
def state(tmp_path, demo_index) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(demo_index, state / "manuals.sqlite")
    return state


def over_stdio(server: StdioServerParameters, session: Any) -> Any:
    """Run `session(client)` against a fresh `fixloop mcp` process; returns what it returns."""

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await session(client)

    return anyio.run(main)


def registry_of(state: Path) -> ToolRegistry:
    return build_registry(load_config(env={"FIXLOOP_STATE_DIR": str(state)}))


def test_an_mcp_client_lists_the_registry_tools_with_their_schemas(state, plc_sim):
    async def session(client: Client) -> Any:
        return (await client.list_tools()).tools, client.instructions

    tools, instructions = over_stdio(stdio_server(state, plc_sim.port), session)

    registry = registry_of(state)
    try:
        assert [tool.name for tool in tools] == registry.names
        for listed in tools:
            tool = registry.get(listed.name)
            assert listed.description == tool.description
            assert listed.input_schema == tool.input_schema()
            assert listed.annotations.read_only_hint is (not tool.side_effect)
    finally:
        registry.close()
    assert "cannot confirm" in instructions and "press-3" in instructions


def test_each_tool_answers_an_mcp_client_on_the_demo_plant(state, plc_sim):
    async def session(client: Client) -> dict[str, Any]:
        return {
            MANUAL: await client.call_tool(MANUAL, {"fault_code": "E102", "device_id": "press-3"}),
            PLC: await client.call_tool(PLC, {"device_id": "press-3", "sensor": "motor_temp"}),
            WORK_ORDER: await client.call_tool(WORK_ORDER, ORDER_ARGS),
        }

    results = over_stdio(stdio_server(state, plc_sim.port), session)

    for name, result in results.items():
        assert not result.is_error, (name, result.content)
        observation = result.structured_content
        assert observation["tool"] == name and observation["status"] == "ok"
        # The text is the observation as our own planner reads it.
        assert json.loads(result.content[0].text)["tool"] == name
    manual = results[MANUAL].structured_content["content"][0]["fields"]
    assert manual["fault_code"] == "E102" and manual["title"] == "Motor over-temperature protection"
    reading = results[PLC].structured_content["content"][0]["fields"]
    assert reading["sensor"] == "motor_temp" and reading["source"] == "live" and reading["quality"] == "Good"
    assert isinstance(reading["value"], float) and reading["unit"] == "°C"
    # The demo plant requires confirmation: an MCP call proposes, and nothing is written.
    order = results[WORK_ORDER].structured_content["content"][0]["fields"]
    assert order["work_order_status"] == "pending_confirmation" and order["created"] is False
    assert "work_order_id" not in order
    assert work_order_store(load_config(env={"FIXLOOP_STATE_DIR": str(state)})).list(()) == []


def test_without_the_confirmation_policy_an_mcp_call_creates_the_order_once(state, plc_sim):
    async def session(client: Client) -> list[Any]:
        return [await client.call_tool(WORK_ORDER, ORDER_ARGS) for _ in range(2)]

    first, again = over_stdio(
        stdio_server(state, plc_sim.port, FIXLOOP__WORK_ORDERS__REQUIRE_CONFIRMATION="false"), session
    )

    created = first.structured_content["content"][0]["fields"]
    returned = again.structured_content["content"][0]["fields"]
    assert created["created"] is True and created["work_order_status"] == "open"
    assert returned["created"] is False and returned["work_order_id"] == created["work_order_id"]
    [stored] = work_order_store(load_config(env={"FIXLOOP_STATE_DIR": str(state)})).list(())
    assert stored.id == created["work_order_id"] and stored.created_by == "mcp"


def test_an_invalid_call_is_an_mcp_tool_error_that_says_what_to_fix(state, plc_sim):
    async def session(client: Client) -> list[Any]:
        return [
            await client.call_tool(WORK_ORDER, {"fault_code": "E102", "summary": "no device given"}),
            await client.call_tool(PLC, {"device_id": "press-9", "sensor": "motor_temp"}),
            await client.call_tool("read_plc_value", {"device_id": "press-3", "sensor": "motor_temp"}),
        ]

    missing, unknown_device, unknown_tool = over_stdio(stdio_server(state, plc_sim.port), session)

    for result, code in [
        (missing, "invalid_arguments"),
        (unknown_device, "unknown_device"),
        (unknown_tool, "unknown_tool"),
    ]:
        assert result.is_error, result
        assert result.structured_content["status"] == "error" and result.structured_content["error_code"] == code
    assert "Argument 'device_id' of generate_work_order: Field required." in missing.content[0].text
    assert "press-3" in unknown_device.content[0].text
    assert f"Use {PLC!r}" in unknown_tool.content[0].text


# -- streamable HTTP --------------------------------------------------------------------------------


def host_app(mcp: McpHttpApp) -> FastAPI:
    """A host app wired as the service is: the route, and the session manager in the lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with mcp.running():
            yield

    app = FastAPI(lifespan=lifespan)
    app.router.routes.append(Route("/mcp", mcp, include_in_schema=False))
    return app


@contextmanager
def serving_mcp(agent_config: Config, **mcp: Any) -> Iterator[str]:
    """The endpoint on uvicorn for two technician tokens; keyword arguments update `[mcp]`."""
    config = agent_config.model_copy(
        update={
            "service": agent_config.service.model_copy(update={"technician_tokens": [TOKEN, OTHER_TOKEN]}),
            "mcp": agent_config.mcp.model_copy(update=mcp),
        }
    )
    registry = build_registry(config)
    server = ServerThread(host_app(McpHttpApp(registry, config)), "127.0.0.1", free_port()).start()
    try:
        yield f"{server.url}/mcp"
    finally:
        server.stop()
        registry.close()


@pytest.fixture
def mcp_url(agent_config: Config) -> Iterator[str]:
    with serving_mcp(agent_config) as url:
        yield url


def over_http(url: str, token: str | None, session: Any, statuses: list[int] | None = None) -> Any:
    """Run `session(client)` with the SDK's streamable HTTP client; `statuses` collects its HTTP statuses."""
    seen = [] if statuses is None else statuses

    async def record(response: httpx2.Response) -> None:
        seen.append(response.status_code)

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [record]}) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
        ):
            return await session(client)

    return anyio.run(main)


def test_the_http_endpoint_serves_the_tools_to_a_client_with_a_technician_token(mcp_url):
    async def session(client: Client) -> tuple[list[str], Any]:
        names = [tool.name for tool in (await client.list_tools()).tools]
        return names, await client.call_tool(PLC, {"device_id": "cnc-7", "sensor": "spindle_speed"})

    names, reading = over_http(mcp_url, TOKEN, session)

    assert names == [MANUAL, PLC, WORK_ORDER]
    assert not reading.is_error
    fields = reading.structured_content["content"][0]["fields"]
    assert fields["sensor"] == "spindle_speed" and fields["source"] == "live"


@pytest.mark.parametrize("token", [None, "not-a-technician-token"], ids=["no token", "wrong token"])
def test_the_http_endpoint_refuses_a_client_without_a_technician_token(mcp_url, token):
    async def session(client: Client) -> Any:
        return await client.list_tools()

    statuses: list[int] = []
    with pytest.raises(Exception) as refused:
        over_http(mcp_url, token, session, statuses)
    assert "MCPError" in _chain(refused.value)
    assert statuses and set(statuses) == {401}

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.post(
        mcp_url,
        headers={**headers, "Accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")


ACCEPT = {"Accept": "application/json, text/event-stream"}
PROTOCOL = "2025-06-18"


def open_session(url: str, token: str) -> httpx.Response:
    """An `initialize` without a session id: it opens a session, named by the response's Mcp-Session-Id."""
    return httpx.post(
        url,
        headers={**ACCEPT, "Authorization": f"Bearer {token}"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        },
    )


def in_session(url: str, token: str, session_id: str, method: str = "POST") -> httpx.Response:
    """tools/list in the session (or, with method DELETE, the session's end)."""
    return httpx.request(
        method,
        url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"} if method == "POST" else None,
        headers={
            **ACCEPT,
            "Authorization": f"Bearer {token}",
            "Mcp-Session-Id": session_id,
            "Mcp-Protocol-Version": PROTOCOL,
        },
    )


def test_an_mcp_session_answers_only_the_token_that_opened_it(mcp_url):
    opened = open_session(mcp_url, TOKEN)
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]

    assert in_session(mcp_url, OTHER_TOKEN, session_id).status_code == 404
    assert in_session(mcp_url, TOKEN, session_id).status_code == 200


def test_a_token_holds_at_most_its_cap_of_sessions_and_a_deleted_one_frees_a_place(agent_config):
    with serving_mcp(agent_config, max_sessions_per_token=3) as url:
        opened = [open_session(url, TOKEN) for _ in range(3)]
        assert [response.status_code for response in opened] == [200] * 3
        sessions = [response.headers["mcp-session-id"] for response in opened]

        refused = open_session(url, TOKEN)
        assert refused.status_code == 429 and "mcp-session-id" not in refused.headers
        message = refused.json()["error"]["message"]
        assert "already holds 3 open MCP sessions" in message and "[mcp] max_sessions_per_token" in message
        assert "DELETE /mcp" in message
        assert open_session(url, OTHER_TOKEN).status_code == 200  # the cap is each token's own
        assert all(in_session(url, TOKEN, session).status_code == 200 for session in sessions)  # none was dropped

        assert in_session(url, TOKEN, sessions[0], "DELETE").status_code == 200
        assert in_session(url, TOKEN, sessions[0]).status_code == 404
        assert open_session(url, TOKEN).status_code == 200
        assert open_session(url, TOKEN).status_code == 429


def test_an_idle_session_is_ended_and_its_place_freed(agent_config):
    with serving_mcp(agent_config, max_sessions_per_token=1, session_idle_timeout_s=0.5) as url:
        idle = open_session(url, TOKEN).headers["mcp-session-id"]
        assert open_session(url, TOKEN).status_code == 429
        time.sleep(1.5)
        assert in_session(url, TOKEN, idle).status_code == 404
        again = open_session(url, TOKEN)
        assert again.status_code == 200 and again.headers["mcp-session-id"] != idle


def _chain(error: BaseException) -> str:
    """Every message in an exception, its causes and (for task groups) its sub-exceptions."""
    parts = [f"{type(error).__name__}: {error}"]
    for inner in [error.__cause__, error.__context__, *getattr(error, "exceptions", ())]:
        if inner is not None and inner is not error:
            parts.append(_chain(inner))
    return "\n".join(parts)


# -- the service's own endpoint --------------------------------------------------------------------


def test_the_service_serves_mcp_behind_its_technician_tokens_each_time_it_starts(tmp_path, demo_index):
    """`/mcp` on the whole service (`create_app(Service(config))`), started and stopped twice in one process:
    each app has its own session manager, which runs once, in that app's lifespan."""

    async def session(client: Client) -> tuple[list[str], Any]:
        names = [tool.name for tool in (await client.list_tools()).tools]
        return names, await client.call_tool(MANUAL, {"fault_code": "E102", "device_id": "press-3"})

    for start in ("first", "second"):
        with run_service(tmp_path / start, demo_index) as running:
            url = f"{running.url}/mcp"
            names, found = over_http(url, TECHNICIAN_TOKEN, session)
            refused = httpx.post(
                url,
                headers={"Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )

        assert names == [MANUAL, PLC, WORK_ORDER], start
        assert not found.is_error, found.content
        assert found.structured_content["status"] == "ok"
        manual = found.structured_content["content"][0]["fields"]
        assert manual["fault_code"] == "E102" and manual["title"] == "Motor over-temperature protection"
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer"), start
