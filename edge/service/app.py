"""The FastAPI app: run streaming, run records, takeover, confirmation, health, metrics, the tablet app.

    service = Service(config, poller=True)   # agent, stores, run workers
    app = create_app(service)                # routes; the app's lifespan starts and closes the service
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, AsyncIterator

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edge.agent import Agent, plc_gateway, work_order_store
from edge.config import Config
from edge.loop import RunRequest, evidence_of
from edge.run_record import TerminationReason
from edge.run_store import WORK_ORDER_TOOL, RunFilter, RunStore, RunSummary, work_order_ref
from edge.service import metrics
from edge.service.alarms import alarm_handler
from edge.service.auth import require
from edge.service.body_limit import BodyLimit
from edge.service.health import Readiness, Warmup
from edge.service.json_body import json_body, json_body_openapi
from edge.service.mes import ALARMS_PATH, build_mes_router
from edge.service.runs import EventBridge, RunManager
from edge.service.schemas import (AskBody, ConfirmResult, DeviceView, RunView, SensorView, TakeoverResult)
from edge.service.strict_query import known_query_only
from edge.sessions import session_context
from tools.contract import ToolContext
from tools.plc.poller import Poller
from tools.work_orders.model import ACTIVE_STATUSES, WorkOrder

SESSION_SUMMARY_RUNS = 5
# A takeover waits for the step in progress: one LLM request plus one tool call at most.
TAKEOVER_GRACE_S = 3.0
# The work-order tool runs in this process, so its refusals are ours to classify, not a bad gateway's.
# The stored proposal no longer fits the tool (arguments) or the plant (device removed since the run).
CONFIRM_ERROR_STATUS = {"invalid_arguments": 422, "unknown_device": 409, "timeout": 504, "tool_failed": 500}
# `GET /v1/runs?min_steps=`: far above any loop budget, and far inside SQLite's 64-bit integers.
MAX_STEPS_FILTER = 10_000


class Service:
    """Everything a running service holds; built once, shared by all requests."""

    def __init__(self, config: Config, agent: Agent | None = None, poller: bool = False):
        self.config = config
        self.with_poller = poller
        self.agent = agent or Agent(config)
        self.run_store = RunStore(config.state_path(config.service.run_store_file))
        self.work_orders = work_order_store(config)
        self.runs = RunManager(self.agent, self.run_store, config.service.max_concurrent_runs)
        self.warmup = Warmup()
        self.readiness = Readiness(config, self.warmup, self.agent.llm_breaker)
        # Readiness probes block (TCP, HTTP); on threads of their own they never queue behind runs and
        # alarms in the shared thread pool, nor take its threads from them.
        self.health_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="health")
        # One confirmation of a run at a time: a replay must see the order the first one made.
        self.confirming: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self.poller: Poller | None = None

    def start(self) -> None:
        """Background work, begun once the server is up: warming competes for the CPU with start-up imports."""
        self.warmup.start("models (manual search, lexicon)", self.agent.warm)
        if self.with_poller:
            self.poller = Poller(plc_gateway(self.config), self.config.plc.poll_interval_s)
            self.poller.start()

    def confirm_lock(self, run_id: str) -> asyncio.Lock:
        lock = self.confirming.get(run_id)
        if lock is None:
            lock = self.confirming[run_id] = asyncio.Lock()
        return lock

    def close(self) -> None:
        self.runs.close()
        self.health_pool.shutdown(wait=False, cancel_futures=True)
        if self.poller is not None:
            self.poller.stop()
            self.poller.gateway.close()
        self.readiness.close()
        self.agent.close()


class RequestIds:
    """ASGI middleware: every request gets an id (kept from `X-Request-ID` if the caller sent a sane one)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = sent if sent and len(sent) <= 64 and sent.replace("-", "").isalnum() else f"req-{uuid.uuid4().hex[:12]}"
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        await self.app(scope, receive, send_with_id)


def create_app(service: Service) -> FastAPI:
    config = service.config

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.start()
        yield
        await run_in_threadpool(service.close)

    app = FastAPI(
        title="fixloop",
        version="0.1.0",
        summary="Edge maintenance agent: ask about a machine, watch the agent's steps stream in, act on the answer.",
        lifespan=lifespan,
        dependencies=[Depends(known_query_only)],
    )
    app.state.service = service
    app.add_middleware(BodyLimit, default_bytes=config.service.max_body_bytes,
                       route_bytes={ALARMS_PATH: config.service.max_alarm_body_bytes})
    app.add_middleware(RequestIds)
    app.add_middleware(metrics.RequestMetrics)

    technician = Depends(require("technician", config.service.technician_tokens))
    admin = Depends(require("admin", [config.service.admin_token] if config.service.admin_token else []))

    # -- health and metrics ------------------------------------------------
    # Health and the device list answer on the event loop, never from the shared thread pool, where
    # they would wait behind whatever holds its threads.

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> JSONResponse:
        report = await asyncio.get_running_loop().run_in_executor(service.health_pool, service.readiness.check)
        return JSONResponse(report, status_code=200 if report["ready"] else 503)

    @app.get("/metrics", tags=["health"], dependencies=[admin], response_class=Response)
    async def prometheus() -> Response:
        rows = await run_in_threadpool(service.work_orders.outbox, ("pending", "failed"), 100_000)
        for status in ("pending", "failed"):
            metrics.OUTBOX_BACKLOG.labels(status).set(sum(1 for row in rows if row.status == status))
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    # -- plant -------------------------------------------------------------

    @app.get("/v1/devices", tags=["plant"], dependencies=[technician])
    async def devices() -> list[DeviceView]:
        return [DeviceView(id=device_id, name=d.name, name_zh=d.name_zh, vendor=d.vendor, model=d.model,
                           sensors=[SensorView(id=s.id, label=s.label, label_zh=s.label_zh, unit=s.unit)
                                    for s in d.sensors.values()])
                for device_id, d in config.devices.items()]

    @app.get("/v1/work-orders", tags=["plant"], dependencies=[technician])
    def work_orders(device_id: str | None = None, active: bool = True,
                    limit: int = Query(default=20, ge=1, le=200)) -> list[WorkOrder]:
        return service.work_orders.list(ACTIVE_STATUSES if active else (), device_id=device_id, limit=limit)

    # -- runs --------------------------------------------------------------

    @app.post("/v1/runs", tags=["runs"], dependencies=[technician], response_class=StreamingResponse,
              openapi_extra=json_body_openapi(AskBody), responses={200: {"content": {"text/event-stream": {}},
                               "description": "Server-sent events: run_started, thought, action, observation, "
                                              "format_error, warning, final_answer, termination, then stored "
                                              "(the record is saved) or error."}})
    async def start_run(request: Request, body: AskBody = Depends(json_body(AskBody))) -> StreamingResponse:
        received = time.perf_counter()
        if body.device_id is not None and body.device_id not in config.devices:
            raise HTTPException(422, f"unknown device {body.device_id!r}; known devices: {', '.join(config.devices)}")
        session_id = body.session_id or f"ses-{uuid.uuid4().hex[:12]}"
        earlier = await run_in_threadpool(service.run_store.session_records, session_id, SESSION_SUMMARY_RUNS)
        run_request = RunRequest(
            question=body.question, device_id=body.device_id, session_id=session_id,
            session=session_context(earlier), actor="technician",
            require_confirmation=config.work_orders.require_confirmation,
            propose_work_order=config.work_orders.require_confirmation,
            request_id=request.state.request_id,
        )
        bridge = EventBridge()
        service.runs.start(run_request, bridge)

        async def stream() -> AsyncIterator[bytes]:
            first = True
            async for event in bridge.events():
                if first:
                    metrics.FIRST_EVENT_SECONDS.observe(time.perf_counter() - received)
                    first = False
                yield sse(event)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={
            "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
            "X-Run-ID": run_request.run_id, "X-Session-ID": session_id,
        })

    @app.get("/v1/runs", tags=["runs"], dependencies=[technician])
    def list_runs(device_id: str | None = None, session_id: str | None = None,
                  reason: TerminationReason | None = None, fault_code: str | None = None,
                  min_steps: int | None = Query(default=None, ge=0, le=MAX_STEPS_FILTER),
                  limit: int = Query(default=20, ge=1, le=200)) -> list[RunSummary]:
        return service.run_store.list(RunFilter(device_id=device_id, session_id=session_id, reason=reason,
                                                fault_code=fault_code, min_steps=min_steps, limit=limit))

    @app.get("/v1/runs/{run_id}", tags=["runs"], dependencies=[technician])
    def get_run(run_id: str) -> RunView:
        # Live set first: a run is stored before it leaves the live set, so this order cannot miss it.
        if service.runs.get(run_id) is not None:
            return RunView(run_id=run_id, running=True)
        record = service.run_store.get(run_id)
        if record is not None:
            return RunView(run_id=run_id, running=False, record=record,
                           confirmations=service.run_store.confirmations(run_id))
        raise HTTPException(404, f"no run {run_id!r}")

    @app.post("/v1/runs/{run_id}/takeover", tags=["runs"], dependencies=[technician])
    async def takeover(run_id: str) -> TakeoverResult:
        live = service.runs.get(run_id)
        if live is None:
            record = await run_in_threadpool(service.run_store.get, run_id)
            if record is None:
                raise HTTPException(404, f"no run {run_id!r}")
            reason = record.termination.reason if record.termination else "unknown"
            raise HTTPException(409, f"run {run_id} already finished ({reason}); nothing to take over")
        live.cancel.set()
        stopped = await run_in_threadpool(live.done.wait, TAKEOVER_GRACE_S + config.llm.timeout_s)
        record = live.record
        termination = record.termination if record else None
        return TakeoverResult(run_id=run_id, stopped=stopped, record=record,
                              taken_over=bool(termination and termination.reason == "takeover"),
                              pending_action=termination.pending_action if termination else None)

    @app.post("/v1/runs/{run_id}/confirm", tags=["runs"], dependencies=[technician])
    async def confirm(run_id: str, request: Request) -> ConfirmResult:
        async with service.confirm_lock(run_id):
            return await confirm_once(run_id, request.state.request_id)

    async def confirm_once(run_id: str, request_id: str) -> ConfirmResult:
        """A run yields at most one order: a repeated confirmation returns the order the first one made,
        whatever became of it since (the work-order tool would open a new one for a closed order)."""
        if service.runs.get(run_id) is not None:
            raise HTTPException(409, f"run {run_id} is still running; confirm after it has answered")
        record = await run_in_threadpool(service.run_store.get, run_id)
        if record is None:
            raise HTTPException(404, f"no run {run_id!r}")
        earlier = await run_in_threadpool(service.run_store.confirmations, run_id)
        if earlier:
            made = await run_in_threadpool(service.work_orders.get, earlier[0].work_order_id)
            if made is None:
                raise HTTPException(409, f"run {run_id}'s work order {earlier[0].work_order_id} no longer exists")
            order = order_fields(made)
            confirmation = await run_in_threadpool(service.run_store.add_confirmation, run_id, order)
            metrics.CONFIRMATIONS.labels("false").inc()
            return ConfirmResult(run_id=run_id, work_order=order, confirmation=confirmation)
        ref = work_order_ref(record)
        if ref is None:
            raise HTTPException(409, f"run {run_id} proposed no work order")
        step, proposed = ref
        if proposed.get("work_order_status") != "pending_confirmation":
            raise HTTPException(409, f"run {run_id}'s work order {proposed.get('work_order_id')} needs no "
                                     f"confirmation (status {proposed.get('work_order_status')})")
        ctx = ToolContext(request_id=request_id, run_id=run_id, loop_step=step.n, actor="technician",
                          require_confirmation=True, confirmed=True, evidence=tuple(evidence_of([o for o in record.observations if o.loop_step < step.n])))
        observation = await run_in_threadpool(service.agent.registry.call, WORK_ORDER_TOOL, step.args, ctx,
                                              f"confirm-{step.n}")
        metrics.TOOL_CALLS.labels(WORK_ORDER_TOOL, observation.status).inc()
        order = next((item.fields for item in observation.content
                      if item.kind == "ref" and item.fields.get("work_order_id")), None)
        if observation.status != "ok" or order is None:
            text = " ".join(item.text for item in observation.content if item.text)
            status = CONFIRM_ERROR_STATUS.get(observation.error_code or "", 500)
            reason = observation.error_code or "no order returned"
            raise HTTPException(status, f"the work-order tool refused the order ({reason})"
                                        + (f": {text}" if text else ""))
        confirmation = await run_in_threadpool(service.run_store.add_confirmation, run_id, order)
        metrics.CONFIRMATIONS.labels(str(confirmation.created).lower()).inc()
        return ConfirmResult(run_id=run_id, work_order=order, confirmation=confirmation)

    # -- MES and operations ------------------------------------------------

    app.include_router(build_mes_router(config.mes.secrets,
                                        alarm_handler(service.runs, config.service.max_concurrent_alarms,
                                                      alarm_retry_after_s(config)),
                                        service.work_orders,
                                        known_devices=list(config.devices), tolerance_s=config.mes.tolerance_s,
                                        replay_ttl_s=config.mes.replay_ttl_s), tags=["mes"])

    @app.get("/v1/admin/outbox", tags=["admin"], dependencies=[admin])
    def outbox(limit: int = Query(default=100, ge=1, le=1000)) -> dict[str, Any]:
        rows = service.work_orders.outbox(("pending", "failed"), limit)
        return {"backlog": len(rows), "rows": [row.model_dump() for row in rows]}

    @app.post("/v1/admin/outbox/retry", tags=["admin"], dependencies=[admin])
    def outbox_retry() -> dict[str, int]:
        return {"requeued": service.work_orders.requeue()}

    @app.get("/v1/admin/index", tags=["admin"], dependencies=[admin])
    def index_status() -> dict[str, Any]:
        return {**service.readiness.index(), "warmup": service.warmup.state()}

    # -- the tablet app ----------------------------------------------------

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/app/")

    app.mount("/app", StaticFiles(directory=str(resources.files("edge") / "app"), html=True), name="app")
    return app


def alarm_retry_after_s(config: Config) -> int:
    """When a busy alarm slot is free again: a run ends within its wall budget plus the step in progress."""
    return math.ceil(config.loop.max_wall_s + config.llm.timeout_s)


def order_fields(order: WorkOrder) -> dict[str, Any]:
    """An existing order as the work-order tool describes one it returns rather than creates."""
    return {"work_order_id": order.id, "work_order_status": order.status, "created": False,
            **order.model_dump(include={"device_id", "fault_code", "title", "summary", "priority", "created_at"})}


def sse(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"event: {event['type']}\ndata: {data}\n\n".encode()
