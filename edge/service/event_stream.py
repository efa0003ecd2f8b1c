"""A run's events as server-sent events: the encoding, the streaming response and its OpenAPI description.

Each event is `event: <type>`, `data: <the event as JSON>`, `id: <its number in the run>`; a client
that lost the stream sends the last id it got as `Last-Event-ID` to pick it up again.

A stream with nothing to say for `keep_alive_s` sends a comment (`: keep-alive`), which SSE readers
skip: a client that hears nothing for a few of those intervals (`X-Keep-Alive-S` says how long one is)
knows its connection died without a word, as one over a dropped Wi-Fi link can, and resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse
from fastapi.sse import format_sse_event

from edge.run import RUN_EVENT, RunEvent

MEDIA_TYPE = "text/event-stream"
KEEP_ALIVE_S = 15.0
KEEP_ALIVE = b": keep-alive\n\n"


def encode(n: int, event: RunEvent) -> bytes:
    return format_sse_event(data_str=event.model_dump_json(), event=event.type, id=str(n))


async def _encoded(events: AsyncIterator[tuple[int, RunEvent]], keep_alive_s: float) -> AsyncIterator[bytes]:
    # The next event is awaited in a task of its own: a timeout on the wait then leaves it pending, where
    # cancelling the wait itself would close the events' generator.
    pending: asyncio.Future[tuple[int, RunEvent]] | None = None
    try:
        while True:
            pending = pending or asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=keep_alive_s)
            if not done:
                yield KEEP_ALIVE
                continue
            try:
                n, event = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield encode(n, event)
    finally:
        if pending is not None:
            pending.cancel()  # the client left mid-wait


def event_stream(
    events: AsyncIterator[tuple[int, RunEvent]], headers: dict[str, str], keep_alive_s: float = KEEP_ALIVE_S
) -> StreamingResponse:
    # X-Accel-Buffering: a reverse proxy (nginx) would otherwise hold events back until its buffer fills.
    return StreamingResponse(
        _encoded(events, keep_alive_s),
        media_type=MEDIA_TYPE,
        headers={
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "X-Keep-Alive-S": f"{keep_alive_s:g}",
            **headers,
        },
    )


def event_stream_responses(description: str) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route that streams run events: each event's `data` is a RunEvent, whose
    members are in the spec's components because `GET /v1/runs/{run_id}/events` returns them."""
    data = RUN_EVENT.json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
    data.pop("$defs")
    item = {
        "type": "object",
        "required": ["event", "data", "id"],
        "properties": {
            "event": {"type": "string", "description": "the event's `type`"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
            "id": {
                "type": "string",
                "description": "the event's number in the run, from 0; send the last one "
                "received as Last-Event-ID to resume",
            },
        },
    }
    return {200: {"description": description, "content": {MEDIA_TYPE: {"itemSchema": item}}}}
