"""Liveness and readiness, open to all (probes and load balancers carry no token).

They answer on the event loop, never from the shared thread pool, where they would wait behind
whatever holds its threads; readiness probes run on the service's own health threads.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from edge.service.service import ServiceDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(service: ServiceDep) -> dict[str, str]:
    # Who decides the steps: a model that routed worse than the rules at start writes only the prose.
    return {"status": "ok", **service.agent.planning_status()}


@router.get("/readyz")
async def readyz(service: ServiceDep) -> JSONResponse:
    report = await asyncio.get_running_loop().run_in_executor(service.health_pool, service.readiness.check)
    return JSONResponse(report, status_code=200 if report["ready"] else 503)
