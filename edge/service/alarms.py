"""MES alarms: a verified alarm becomes a headless agent run that ends in a work order.

At most `limit` alarms run at once. Another is refused at once (`AlarmsBusy`,
a 503 the MES retries) rather than queued: queued alarms would hold request
threads and run workers for as long as the planner is slow, and the MES
retries a refused delivery anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from edge.run import RunRequest, work_order_ref
from edge.service import metrics
from edge.service.mes import MesAlarm
from edge.service.runs import RunManager
from edge.service.webhooks import AlarmsBusy


class AlarmWithoutOrder(RuntimeError):
    """The alarm's run ended without touching a work order."""


def alarm_question(alarm: MesAlarm) -> str:
    """What the MES asks, phrased like a technician would, so both planners follow their normal rules."""
    message = f" ({alarm.message.strip()})" if alarm.message.strip() else ""
    return (
        f"{alarm.device_id} raised alarm {alarm.fault_code}{message}, severity {alarm.severity}. "
        "Look it up in the manual, check the relevant sensors and open a work order."
    )


def alarm_handler(runs: RunManager, limit: int, retry_after_s: int) -> Callable[[MesAlarm], dict[str, Any]]:
    slots = threading.BoundedSemaphore(limit)

    def handle(alarm: MesAlarm) -> dict[str, Any]:
        if not slots.acquire(blocking=False):
            metrics.ALARMS_REFUSED.inc()
            raise AlarmsBusy(retry_after_s)
        try:
            record = runs.run_sync(
                RunRequest(
                    question=alarm_question(alarm), device_id=alarm.device_id, actor="mes", alarm=alarm.context_alarm()
                )
            )
        finally:
            slots.release()
        ref = work_order_ref(record)
        termination = record.termination
        if ref is None:
            # Stored as the replay response, an answer without an order would stop the MES from retrying.
            raise AlarmWithoutOrder(
                f"run {record.run_id} ended ({termination.reason if termination else 'unfinished'}) without a work "
                f"order for {alarm.fault_code} on {alarm.device_id}; the delivery can be retried"
            )
        return {
            "run_id": record.run_id,
            "request_id": record.request_id,
            "work_order": ref[1] if ref else None,
            "termination": termination.reason if termination else None,
            "answer": termination.final_answer if termination else None,
            # The same answer as a typed document: safety, isolation, readings with verdicts, the order.
            "answer_document": termination.answer.model_dump(mode="json")
            if termination and termination.answer
            else None,
        }

    return handle
