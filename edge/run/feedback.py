"""A technician's word on an answer and the fix it reports, kept in the run store and the work-order store.

A fix is a past fix only where it is unambiguous what it fixed: a stored run about one device and one fault
code. There it is an *unverified report* (one person's word, shown as such, never evidence) until someone
allowed to vouch for fixes confirms it; then it is a recorded fix, as a closed order's remedy is. Each
person's report is their own: another person's word never replaces it, and only a word from its reporter
(without a fix, or an explicit withdrawal) takes it back.

The work-order store is written first and the feedback row after it, every step idempotent: an offline tablet
sending its queue again, or a request that failed half-way and is retried, ends where one request would.
"""

from __future__ import annotations

from edge.run.record import RunRecord
from edge.run.store import Feedback, RunStore, device_of, fault_codes_of
from tools.work_orders.model import ReportNotFound, check_confirmer
from tools.work_orders.store import WorkOrderStore


def give(
    runs: RunStore, orders: WorkOrderStore, record: RunRecord, actor: str, helpful: bool, fix: str | None
) -> Feedback:
    """`actor`'s word on the stored run of `record`, replacing their earlier one; without a fix it withdraws the
    fix they reported before."""
    device, codes = device_of(record), fault_codes_of(record)
    report_id = None
    if fix is None:
        orders.withdraw_report(run_id=record.run_id, actor=actor)
    elif device is not None and len(codes) == 1:
        report_id = orders.report_fix(
            run_id=record.run_id, device_id=device, fault_code=codes[0], remedy=fix, actor=actor
        ).id
    return runs.give_feedback(record.run_id, actor, helpful, fix, report_id)


def withdraw(runs: RunStore, orders: WorkOrderStore, run_id: str, actor: str) -> Feedback:
    """Take back the fix `actor` reported on the run, keeping their word on whether the answer helped.
    Raises ReportNotFound when they gave no word on it."""
    given = runs.feedback_by(run_id, actor)
    if given is None:
        raise ReportNotFound(f"no feedback by {actor!r} on run {run_id!r}")
    orders.withdraw_report(run_id=run_id, actor=actor)
    return runs.give_feedback(run_id, actor, given.helpful, None)


def confirm(runs: RunStore, orders: WorkOrderStore, run_id: str, reporter: str, by: str) -> Feedback:
    """`by` vouches for the fix `reporter` gave on the run: where it is a past fix, it is a recorded one from now
    on. Raises ReportNotFound when `reporter` has no fix standing on the run, ReportConflict when `by` is the
    reporter."""
    given = runs.feedback_by(run_id, reporter)
    if given is None or given.fix is None:
        raise ReportNotFound(f"no fix reported by {reporter!r} on run {run_id!r}")
    check_confirmer(reporter, by)
    if given.report_id is not None:
        orders.confirm_report(run_id=run_id, reporter=reporter, by=by)
    return runs.confirm_fix(run_id, reporter, by)
