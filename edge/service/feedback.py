"""A technician's word on an answer over HTTP: given, withdrawn, its fix confirmed (`edge.run.feedback`), and
counted. Each answers 404 for a run the service does not have and 409 while the run is still going."""

from __future__ import annotations

from edge.run import RunRecord
from edge.run.feedback import confirm, give, withdraw
from edge.service import metrics
from edge.service.errors import RunNotFound, RunStillRunning
from edge.service.runs import RunManager
from edge.service.schemas import ConfirmFixBody, FeedbackBody, FeedbackResult, WithdrawFixBody
from tools.work_orders.store import WorkOrderStore


def give_feedback(runs: RunManager, work_orders: WorkOrderStore, run_id: str, body: FeedbackBody) -> FeedbackResult:
    feedback = give(runs.store, work_orders, _stored(runs, run_id), body.by, body.helpful, body.fix)
    metrics.FEEDBACK.labels(str(body.helpful).lower(), str(body.fix is not None).lower()).inc()
    return FeedbackResult(feedback=feedback, reported_fix_id=feedback.report_id)


def withdraw_fix(runs: RunManager, work_orders: WorkOrderStore, run_id: str, body: WithdrawFixBody) -> FeedbackResult:
    _stored(runs, run_id)
    return FeedbackResult(feedback=withdraw(runs.store, work_orders, run_id, body.by))


def confirm_fix(runs: RunManager, work_orders: WorkOrderStore, run_id: str, body: ConfirmFixBody) -> FeedbackResult:
    _stored(runs, run_id)
    feedback = confirm(runs.store, work_orders, run_id, body.reporter, body.by)
    return FeedbackResult(feedback=feedback, reported_fix_id=feedback.report_id)


def _stored(runs: RunManager, run_id: str) -> RunRecord:
    if runs.running(run_id):
        raise RunStillRunning(run_id)
    record = runs.store.get(run_id)
    if record is None:
        raise RunNotFound(run_id)
    return record
