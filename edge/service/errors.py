"""What the service refuses, as typed errors, and the one place they become HTTP statuses.

The run manager, the confirmation, the plant, the page renderer and the work-order store raise them with
the message the client reads; `error_response`, installed by `create_app`, answers each with its status in
FastAPI's `{"detail": ...}` shape. The MES's status webhook answers the store's refusals the same way.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from knowledge.page_images import (
    EntryNotFound,
    IndexUnavailable,
    ManualNotFound,
    PageImageError,
    PageNotFound,
    SourceUnavailable,
)
from tools.plant import UnknownDevice
from tools.work_orders.model import IllegalTransition, WorkOrderError, WorkOrderNotFound


class RunError(Exception):
    """A refused request about a run; the message is what the client reads."""


class RunNotFound(RunError):
    def __init__(self, run_id: str):
        super().__init__(f"no run {run_id!r}")


class RunStillRunning(RunError):
    def __init__(self, run_id: str):
        super().__init__(f"run {run_id} is still running; confirm after it has answered")


class RunFinished(RunError):
    def __init__(self, run_id: str, reason: str):
        super().__init__(f"run {run_id} already finished ({reason}); nothing to take over")


class RequestKeyConflict(RunError):
    def __init__(self, client_request_id: str, run_id: str, question: str, device_id: str | None):
        super().__init__(
            f"client_request_id {client_request_id!r} already started run {run_id} for another question"
            f" ({question!r} on {device_id or 'no device'}); a new question needs a new key"
        )


class NothingToConfirm(RunError):
    """The run proposed no work order, or one that needs no confirmation."""


class OrderGone(RunError):
    def __init__(self, run_id: str, order_id: str):
        super().__init__(f"run {run_id}'s work order {order_id} no longer exists")


class OrderRefused(RunError):
    """The work-order tool refused the confirmed proposal; `error_code` is the observation's."""

    def __init__(self, error_code: str | None, text: str):
        super().__init__(
            f"the work-order tool refused the order ({error_code or 'no order returned'})"
            + (f": {text}" if text else "")
        )
        self.error_code = error_code


STATUS: dict[type[Exception], int] = {
    RunNotFound: 404,
    RunStillRunning: 409,
    RunFinished: 409,
    RequestKeyConflict: 409,
    NothingToConfirm: 409,
    OrderGone: 409,
    UnknownDevice: 422,
    ManualNotFound: 404,
    PageNotFound: 404,
    EntryNotFound: 404,
    SourceUnavailable: 409,
    IndexUnavailable: 503,
    # A move the order's lifecycle does not allow now is a conflict with its state (409); a request that
    # could never be right (a fix on a move that does not close the order, an unknown status) is 422.
    WorkOrderNotFound: 404,
    IllegalTransition: 409,
    WorkOrderError: 422,
}
# The work-order tool runs in this process, so its refusals are ours to classify, not a bad gateway's.
# The stored proposal no longer fits the tool (arguments) or the plant (device removed since the run).
REFUSAL_STATUS = {"invalid_arguments": 422, "unknown_device": 409, "timeout": 504, "tool_failed": 500}
HANDLED = (RunError, UnknownDevice, PageImageError, WorkOrderError)


def status_of(exc: Exception) -> int | None:
    """The status of a refusal: its own class's, else its nearest base's (None: not a refusal we know)."""
    if isinstance(exc, OrderRefused):
        return REFUSAL_STATUS.get(exc.error_code or "", 500)
    return next((STATUS[kind] for kind in type(exc).__mro__ if kind in STATUS), None)


async def error_response(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=status_of(exc) or 500)
