"""A technician's feedback on an answer: stored with the run, counted, and what fixed it made a past fix.

A fix is a past fix only where it is unambiguous what it fixed: a stored run about one device and one
fault code. The past fix is written before the feedback row, and both are replaced by a repeat, so an
offline tablet sending its queue again, or a write that failed half-way and is retried, ends in one of each.
"""

from __future__ import annotations

from edge.run import device_of, fault_codes_of
from edge.service import metrics
from edge.service.errors import RunNotFound, RunStillRunning
from edge.service.runs import RunManager
from edge.service.schemas import FeedbackBody, FeedbackResult
from tools.work_orders.store import WorkOrderStore


def give_feedback(runs: RunManager, work_orders: WorkOrderStore, run_id: str, body: FeedbackBody) -> FeedbackResult:
    if runs.get(run_id) is not None:
        raise RunStillRunning(run_id)
    record = runs.store.get(run_id)
    if record is None:
        raise RunNotFound(run_id)
    reported = None
    device, codes = device_of(record), fault_codes_of(record)
    if body.fix and device is not None and len(codes) == 1:
        reported = work_orders.report_fix(
            run_id=run_id, device_id=device, fault_code=codes[0], remedy=body.fix, actor=body.by
        ).id
    feedback = runs.store.give_feedback(run_id, body.by, body.helpful, body.fix)
    metrics.FEEDBACK.labels(str(body.helpful).lower(), str(body.fix is not None).lower()).inc()
    return FeedbackResult(feedback=feedback, reported_fix_id=reported)
