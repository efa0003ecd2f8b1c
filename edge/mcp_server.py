"""The plant's three tools for other agents, over MCP: `fixloop mcp` (stdio) and `/mcp` on the service.

    server = mcp_server(registry, config)     # tools/list and tools/call, generated from the registry
    await server.run(...)                     # `fixloop mcp` over stdio
    mcp = McpHttpApp(registry, config)        # streamable HTTP behind the technician tokens
    async with mcp.running(): ...             # in the host app's lifespan; route "/mcp" to `mcp`

Names, descriptions and input schemas are the registry's, as in the prompt's tool list, so another agent
sees the tools exactly as our planner does. Every call goes through `ToolRegistry.call` with actor "mcp":
the same argument validation, timeouts and observation envelope as a run. The result's text is the
observation as our planner reads it (`Observation.payload`); its structured content is the whole envelope.

`generate_work_order` keeps the plant's confirmation policy. With `[work_orders] require_confirmation` an
MCP call only proposes the order (status pending_confirmation, nothing written) or returns the order
already open for the fault: an MCP client cannot confirm, because a confirmation is a technician's act on
the tablet, where the order is made from a run's proposal (`POST /v1/runs/{id}/confirm`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from edge.config import Config
from edge.llm.prompt import plant_section
from edge.run import new_id
from edge.service.auth import token_matches
from tools.contract import Actor, ToolContext
from tools.observation import Observation
from tools.registry import ToolRegistry

SERVER_NAME = "fixloop"
ACTOR: Actor = "mcp"
# The observation envelope is the same for every tool, so its schema is every tool's output schema.
OUTPUT_SCHEMA = Observation.model_json_schema(mode="serialization")


def mcp_tools(registry: ToolRegistry) -> list[types.Tool]:
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            output_schema=OUTPUT_SCHEMA,
            annotations=types.ToolAnnotations(read_only_hint=not tool.side_effect),
        )
        for tool in registry
    ]


def call_result(observation: Observation) -> types.CallToolResult:
    """An error observation is a tool error (isError) that says what was wrong and how to fix it."""
    if observation.status == "error":
        text = " ".join(item.text for item in observation.content if item.text)
        text = " ".join(part for part in (text, observation.suggestion) if part)
    else:
        text = observation.payload_json()
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=observation.model_dump(mode="json"),
        is_error=observation.status == "error",
    )


def instructions(config: Config) -> str:
    if config.work_orders.require_confirmation:
        policy = (
            "generate_work_order only proposes an order here (work_order_status pending_confirmation; "
            "nothing is created) or returns the order already open for the device and fault code. An MCP "
            "client cannot confirm: tell a technician, who confirms orders on the fixloop tablet."
        )
    else:
        policy = (
            "generate_work_order creates the order, or returns the one already open for the device and "
            "fault code; call it once per fault."
        )
    about = (
        "The tools of one plant: its maintenance manuals, live PLC readings and work orders. "
        "Every result is an observation with a status and a suggestion to follow when a call fails."
    )
    return "\n\n".join([about, policy, plant_section(config.devices)])


def mcp_server(registry: ToolRegistry, config: Config) -> Server[Any]:
    tools = mcp_tools(registry)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tool_ctx = ToolContext(
            request_id=new_id("req"),
            run_id=new_id(ACTOR),
            loop_step=1,
            actor=ACTOR,
            require_confirmation=config.work_orders.require_confirmation,
        )
        # The registry blocks up to the tool's timeout; a worker thread keeps other sessions answering.
        observation = await anyio.to_thread.run_sync(
            registry.call, params.name, params.arguments or {}, tool_ctx, new_id("obs")
        )
        return call_result(observation)

    schemas = {tool.name: tool.input_schema for tool in tools}
    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions=instructions(config),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )


async def serve_stdio(registry: ToolRegistry, config: Config) -> None:
    from mcp.server.stdio import stdio_server

    server = mcp_server(registry, config)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class TechnicianTokens:
    """The service's technician tokens as an MCP token verifier. A session is bound to the token that opened
    it (the SDK compares the subject); the subject is a digest, so a log naming the session's owner shows no token."""

    def __init__(self, tokens: Sequence[str]):
        self.tokens = list(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token_matches(token, self.tokens):
            return None
        return AccessToken(
            token=token,
            client_id="technician",
            scopes=["technician"],
            subject=hashlib.sha256(token.encode()).hexdigest()[:16],
        )


class SessionCapReached(Exception):
    """A token asked for one more session than `[mcp] max_sessions_per_token` allows."""

    def __init__(self, cap: int, idle_timeout_s: float):
        super().__init__(
            f"this token already holds {cap} open MCP sessions, the most [mcp] max_sessions_per_token allows: "
            f"end one with DELETE /mcp (its Mcp-Session-Id header), or wait until one has been idle "
            f"{idle_timeout_s:g} s"
        )


class TokenSessions(StreamableHTTPSessionManager):
    """The SDK's session manager, with at most `cap` sessions open per token.

    The SDK ends a session on DELETE and after its idle timeout, and forgets it then; its own `max_sessions`
    bounds all tokens together, so one token could take every place. The cap is checked where the SDK admits
    a session (`_admit_session`, under its creation lock, pinned by `mcp<3`), so concurrent opening requests
    cannot slip past it."""

    def __init__(self, app: Server[Any], cap: int, idle_timeout_s: float):
        super().__init__(app=app, session_idle_timeout=idle_timeout_s)
        self.cap, self.idle_timeout_s = cap, idle_timeout_s

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        held = sum(owner == requestor for owner in self._session_owners.values())
        if requestor is not None and held >= self.cap:
            raise SessionCapReached(self.cap, self.idle_timeout_s)
        return super()._admit_session(requestor)

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().handle_request(scope, receive, send)
        except SessionCapReached as refused:
            # Admission comes before the transport answers anything, so the response is still ours to send.
            await _json_rpc_error(str(refused), 429)(scope, receive, send)


def _json_rpc_error(message: str, status_code: int) -> Response:
    """An error as the SDK's own session refusals are shaped: a JSON-RPC error without a request id."""
    body = types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=types.INVALID_REQUEST, message=message)
    )
    return Response(body.model_dump_json(exclude_unset=True), status_code=status_code, media_type="application/json")


class McpHttpApp:
    """The streamable HTTP endpoint as one ASGI app; a request without a technician token gets 401, a token's
    session over `[mcp] max_sessions_per_token` 429, a request for a session that ended (deleted, idle) 404.

    The session manager runs in the host's lifespan (`running()`), stopped before the registry closes."""

    def __init__(self, registry: ToolRegistry, config: Config):
        self.sessions = TokenSessions(
            mcp_server(registry, config), config.mcp.max_sessions_per_token, config.mcp.session_idle_timeout_s
        )
        self.app = AuthenticationMiddleware(
            RequireAuthMiddleware(self.sessions.handle_request, required_scopes=[]),
            backend=BearerAuthBackend(TechnicianTokens(config.service.technician_tokens)),
        )

    def running(self) -> AbstractAsyncContextManager[None]:
        return self.sessions.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
