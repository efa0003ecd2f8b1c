"""What the service refuses, as typed errors, and the one place they become HTTP statuses.

The run manager, the confirmation, the plant, the page renderer and the work-order store raise them with
the message the client reads; `error_response`, installed by `create_app` (`install_error_handlers`), answers
each with its status in FastAPI's `{"detail": ...}` shape. The MES's webhook answers its refusals the same way.

Every reply built here (`detail_response`), FastAPI's 422s and HTTP errors included, quotes at most a few
hundred characters of any one value the client sent: a message, an echoed `input`, a field name in `loc`
is cut to its start and end around `[N characters]`, its whole length. A 60 KB field or header does not
come back whole, and a long message still says what it refused and, at its end, what would be accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.utils import is_body_allowed_for_status_code
from starlette.exceptions import HTTPException

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


# The start of a long value names it, its end often says what would do (a message's list of known devices).
ECHO_HEAD_CHARS = 200
ECHO_TAIL_CHARS = 100


def capped(value: Any) -> Any:
    """`value`, a JSON-able detail, with each string longer than a few hundred characters cut short."""
    if isinstance(value, str):
        if len(value) <= ECHO_HEAD_CHARS + ECHO_TAIL_CHARS:
            return value
        return f"{value[:ECHO_HEAD_CHARS]}… [{len(value)} characters] …{value[-ECHO_TAIL_CHARS:]}"
    if isinstance(value, dict):
        return {capped(key): capped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [capped(item) for item in value]
    return value


def detail_response(detail: Any, status_code: int, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": capped(detail)}, status_code=status_code, headers=headers)


async def error_response(request: Request, exc: Exception) -> JSONResponse:
    return detail_response(str(exc), status_of(exc) or 500)


async def validation_error_response(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a bad parameter or body, whose errors carry the `input` they refused."""
    assert isinstance(exc, RequestValidationError)  # installed for it alone; Starlette types handlers loosely
    return detail_response(jsonable_encoder(exc.errors()), 422)


async def http_error_response(request: Request, exc: Exception) -> Response:
    """Starlette's and FastAPI's HTTP errors (401, 404 naming a path's value, 413), as FastAPI answers them."""
    assert isinstance(exc, HTTPException)
    if not is_body_allowed_for_status_code(exc.status_code):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return detail_response(exc.detail, exc.status_code, exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """In place of FastAPI's own handlers for validation and HTTP errors, which echo values whole."""
    for error in HANDLED:
        app.add_exception_handler(error, error_response)
    app.add_exception_handler(RequestValidationError, validation_error_response)
    app.add_exception_handler(HTTPException, http_error_response)
