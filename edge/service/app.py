"""The FastAPI app: middleware, the routers (edge.service.routes, the MES webhook), MCP and the tablet app.

service = Service(config, poller=True)   # agent, stores, run workers
app = create_app(service)                # routes; the app's lifespan starts and closes the service
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from edge.config import Config
from edge.mcp_server import McpHttpApp
from edge.service import metrics
from edge.service.alarms import alarm_handler
from edge.service.auth import require
from edge.service.body_limit import BodyLimit
from edge.service.errors import install_error_handlers
from edge.service.isolation import IsolationGate
from edge.service.mes import ALARMS_PATH, build_mes_router
from edge.service.request_ids import RequestIds
from edge.service.routes import admin, health, manuals, plant, runs, supervisor
from edge.service.service import Service
from edge.service.strict_query import known_query_only


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    service: Service = app.state.service
    service.start()
    try:
        # The MCP sessions end before the service closes the tools they call.
        async with app.state.mcp.running():
            yield
    finally:
        await run_in_threadpool(service.close)


def create_app(service: Service) -> FastAPI:
    config = service.config
    app = FastAPI(
        title="fixloop",
        version="0.1.0",
        summary="Edge maintenance agent: ask about a machine, watch the agent's steps stream in, act on the answer.",
        lifespan=lifespan,
        dependencies=[Depends(known_query_only)],
    )
    app.state.service = service
    app.add_middleware(
        BodyLimit,
        default_bytes=config.service.max_body_bytes,
        route_bytes={ALARMS_PATH: config.service.max_alarm_body_bytes},
    )
    app.add_middleware(RequestIds)
    app.add_middleware(metrics.RequestMetrics)
    install_error_handlers(app)

    # A supervisor uses the tablet as a technician does, and may also vouch for what technicians report.
    technician = [
        Depends(require("technician", [*config.service.technician_tokens, *config.service.supervisor_tokens]))
    ]
    supervisor_only = [Depends(require("supervisor", config.service.supervisor_tokens))]
    admin_only = [Depends(require("admin", [config.service.admin_token] if config.service.admin_token else []))]
    app.include_router(health.router)
    app.include_router(plant.router, dependencies=technician)
    app.include_router(manuals.router, dependencies=technician)
    app.include_router(runs.router, dependencies=technician)
    app.include_router(supervisor.router, dependencies=supervisor_only)
    app.include_router(mes_router(service), tags=["mes"])
    app.include_router(admin.router, dependencies=admin_only)

    # The MCP endpoint checks technician tokens itself (MCP clients expect its 401 with WWW-Authenticate).
    app.state.mcp = McpHttpApp(service.agent.registry, config)
    app.router.routes.append(Route("/mcp", app.state.mcp, include_in_schema=False))
    app.add_api_route("/", to_the_app, include_in_schema=False)
    app.mount("/app", StaticFiles(directory=str(resources.files("edge") / "app"), html=True), name="app")
    return app


def to_the_app() -> RedirectResponse:
    return RedirectResponse("/app/")


def mes_router(service: Service) -> APIRouter:
    """The MES webhook: its own signatures instead of tokens; its alarms run as headless runs."""
    config = service.config
    handle = alarm_handler(service.runs, config.service.max_concurrent_alarms, alarm_retry_after_s(config))
    return build_mes_router(
        config.mes.secrets,
        handle,
        service.work_orders,
        known_devices=list(config.devices),
        tolerance_s=config.mes.tolerance_s,
        replay_ttl_s=config.mes.replay_ttl_s,
        isolation=IsolationGate.of(service, actor="mes"),
    )


def alarm_retry_after_s(config: Config) -> int:
    """When a busy alarm slot is free again: a run ends within its wall budget plus the step in progress."""
    return math.ceil(config.loop.max_wall_s + config.llm.timeout_s)
