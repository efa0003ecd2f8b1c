"""Operations, behind the admin token: Prometheus metrics, the MES outbox, the manual index."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from edge.service import metrics
from edge.service.service import ServiceDep

router = APIRouter()


@router.get("/metrics", tags=["health"], response_class=Response)
async def prometheus(service: ServiceDep) -> Response:
    rows = await run_in_threadpool(service.work_orders.outbox, ("pending", "failed"), 100_000)
    for status in ("pending", "failed"):
        metrics.OUTBOX_BACKLOG.labels(status).set(sum(1 for row in rows if row.status == status))
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/admin/outbox", tags=["admin"])
def outbox(service: ServiceDep, limit: int = Query(default=100, ge=1, le=1000)) -> dict[str, Any]:
    rows = service.work_orders.outbox(("pending", "failed"), limit)
    return {"backlog": len(rows), "rows": [row.model_dump() for row in rows]}


@router.post("/v1/admin/outbox/retry", tags=["admin"])
def outbox_retry(service: ServiceDep) -> dict[str, int]:
    return {"requeued": service.work_orders.requeue()}


@router.get("/v1/admin/index", tags=["admin"])
def index_status(service: ServiceDep) -> dict[str, Any]:
    return {**service.readiness.index(), "warmup": service.warmup.state()}
