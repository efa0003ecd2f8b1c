"""MES alarms: a verified alarm becomes a headless agent run that ends in a work order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edge.loop import RunRequest
from edge.run_store import work_order_ref
from edge.service.mes import MesAlarm
from edge.service.runs import RunManager


def alarm_question(alarm: MesAlarm) -> str:
    """What the MES asks, phrased like a technician would, so both planners follow their normal rules."""
    message = f" ({alarm.message.strip()})" if alarm.message.strip() else ""
    return (f"{alarm.device_id} raised alarm {alarm.fault_code}{message}, severity {alarm.severity}. "
            "Look it up in the manual, check the relevant sensors and open a work order.")


def alarm_handler(runs: RunManager) -> Callable[[MesAlarm], dict[str, Any]]:
    def handle(alarm: MesAlarm) -> dict[str, Any]:
        record = runs.run_sync(RunRequest(question=alarm_question(alarm), device_id=alarm.device_id, actor="mes",
                                          alarm=alarm.context_alarm()))
        ref = work_order_ref(record)
        termination = record.termination
        return {
            "run_id": record.run_id,
            "request_id": record.request_id,
            "work_order": ref[1] if ref else None,
            "termination": termination.reason if termination else None,
            "answer": termination.final_answer if termination else None,
        }

    return handle
