"""Confirming a run's proposed work order: a run yields at most one order, however often it is confirmed.

A repeated confirmation returns the order the first one made, whatever became of it since (the
work-order tool would open a new one for a closed order). Confirmations of one run take turns, so
a replay sees the order the first one made.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from starlette.concurrency import run_in_threadpool

from edge.run import WORK_ORDER_TOOL, RunRecord, evidence_of, work_order_ref
from edge.service import metrics
from edge.service.errors import NothingToConfirm, OrderGone, OrderRefused, RunNotFound, RunStillRunning
from edge.service.runs import RunManager
from edge.service.schemas import ConfirmResult
from tools.contract import ToolContext
from tools.registry import ToolRegistry
from tools.work_orders.model import WorkOrder
from tools.work_orders.store import WorkOrderStore


class Confirmations:
    def __init__(self, runs: RunManager, work_orders: WorkOrderStore, registry: ToolRegistry):
        self.runs = runs
        self.run_store = runs.store
        self.work_orders = work_orders
        self.registry = registry
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def confirm(self, run_id: str, request_id: str) -> ConfirmResult:
        turn = self._turns.get(run_id)
        if turn is None:
            turn = self._turns[run_id] = asyncio.Lock()
        async with turn:
            return await run_in_threadpool(self._confirm_once, run_id, request_id)

    def _confirm_once(self, run_id: str, request_id: str) -> ConfirmResult:
        if self.runs.running(run_id):
            raise RunStillRunning(run_id)
        record = self.run_store.get(run_id)
        if record is None:
            raise RunNotFound(run_id)
        earlier = self.run_store.confirmations(run_id)
        order = self._made(run_id, earlier[0].work_order_id) if earlier else self._make(record, request_id)
        confirmation = self.run_store.add_confirmation(run_id, order)
        metrics.CONFIRMATIONS.labels(str(confirmation.created).lower()).inc()
        return ConfirmResult(run_id=run_id, work_order=order, confirmation=confirmation)

    def _made(self, run_id: str, order_id: str) -> dict[str, Any]:
        made = self.work_orders.get(order_id)
        if made is None:
            raise OrderGone(run_id, order_id)
        return order_fields(made)

    def _make(self, record: RunRecord, request_id: str) -> dict[str, Any]:
        """The order the run proposed, made now by the work-order tool with the run's evidence."""
        run_id = record.run_id
        ref = work_order_ref(record)
        if ref is None:
            raise NothingToConfirm(f"run {run_id} proposed no work order")
        step, proposed = ref
        if proposed.get("work_order_status") != "pending_confirmation":
            raise NothingToConfirm(
                f"run {run_id}'s work order {proposed.get('work_order_id')} needs no "
                f"confirmation (status {proposed.get('work_order_status')})"
            )
        ctx = ToolContext(
            request_id=request_id,
            run_id=run_id,
            loop_step=step.n,
            actor="technician",
            require_confirmation=True,
            confirmed=True,
            evidence=tuple(evidence_of([o for o in record.observations if o.loop_step < step.n])),
        )
        observation = self.registry.call(WORK_ORDER_TOOL, step.args, ctx, f"confirm-{step.n}")
        metrics.TOOL_CALLS.labels(WORK_ORDER_TOOL, observation.status).inc()
        order = next(
            (item.fields for item in observation.content if item.kind == "ref" and item.fields.get("work_order_id")),
            None,
        )
        if observation.status != "ok" or order is None:
            raise OrderRefused(observation.error_code, " ".join(item.text for item in observation.content if item.text))
        return order


def order_fields(order: WorkOrder) -> dict[str, Any]:
    """An existing order as the work-order tool describes one it returns rather than creates."""
    return {
        "work_order_id": order.id,
        "work_order_status": order.status,
        "created": False,
        **order.model_dump(include={"device_id", "fault_code", "title", "summary", "priority", "created_at"}),
    }
