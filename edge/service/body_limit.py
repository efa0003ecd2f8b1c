"""ASGI middleware: request bodies are limited per route while they stream in.

    app.add_middleware(BodyLimit, default_bytes=64 * 1024, route_bytes={"/v1/mes/alarms": 256 * 1024})

A declared Content-Length over the limit is refused (413) before a byte of
the body is read; a chunked body is counted as the app reads it and refused
as soon as it passes the limit, so no more than the limit is ever held. A
response sent before the whole body was read (413, or a 401: routes
authenticate before they read) closes the connection: otherwise the server
would go on receiving, and discarding, the rest of an unwanted upload.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body too large: this endpoint accepts at most {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, default_bytes: int, route_bytes: Mapping[str, int] | None = None):
        self.app = app
        self.default_bytes = default_bytes
        self.route_bytes = dict(route_bytes or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.route_bytes.get(scope["path"], self.default_bytes)
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            # A malformed length never reaches here (the HTTP parser refuses it); a huge one is refused unread.
            refusal = BodyTooLarge(limit)
            await JSONResponse({"detail": refusal.detail}, 413, {"connection": "close"})(scope, receive, send)
            return
        body_expected = (declared not in (None, b"0")) or b"transfer-encoding" in headers
        received = 0
        complete = not body_expected

        async def limited_receive() -> Message:
            nonlocal received, complete
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
                complete = not message.get("more_body", False)
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not complete:
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        await self.app(scope, limited_receive, closing_send)
