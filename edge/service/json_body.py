"""A JSON request body read only after the route's token check.

FastAPI reads a body declared as a parameter before it runs any dependency,
the token check included. Read in a dependency instead, and listed after the
route's `dependencies=[...]`, the body of an unauthenticated request is never
read: the client gets its 401 and the connection closes (see `body_limit`).

    @app.post("/v1/runs", dependencies=[technician], openapi_extra=json_body_openapi(AskBody))
    async def start_run(body: AskBody = Depends(json_body(AskBody))): ...
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


def json_body(model: type[Model]) -> Callable[[Request], Awaitable[Model]]:
    async def read(request: Request) -> Model:
        try:
            return model.model_validate_json(await request.body())
        except ValidationError as exc:
            # FastAPI's 422 shape, each error naming its field under `loc`; without the input, which may be
            # bytes that are not UTF-8 (unencodable as JSON) or a whole oversized field echoed back.
            raise RequestValidationError(
                [
                    {**error, "loc": ("body", *error["loc"])}
                    for error in exc.errors(include_url=False, include_context=False, include_input=False)
                ]
            ) from None

    return read


def json_body_openapi(model: type[BaseModel]) -> dict[str, Any]:
    """The `openapi_extra` that documents the body FastAPI no longer sees as a parameter."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}
