"""A run's events as server-sent events: the encoding, the streaming response and its OpenAPI description.

Each event is `event: <type>`, `data: <the event as JSON>`, `id: <its number in the run>`; a client
that lost the stream sends the last id it got as `Last-Event-ID` to pick it up again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse
from fastapi.sse import format_sse_event

from edge.events import RUN_EVENT, RunEvent

MEDIA_TYPE = "text/event-stream"


def encode(n: int, event: RunEvent) -> bytes:
    return format_sse_event(data_str=event.model_dump_json(), event=event.type, id=str(n))


async def _encoded(events: AsyncIterator[tuple[int, RunEvent]]) -> AsyncIterator[bytes]:
    async for n, event in events:
        yield encode(n, event)


def event_stream(events: AsyncIterator[tuple[int, RunEvent]], headers: dict[str, str]) -> StreamingResponse:
    # X-Accel-Buffering: a reverse proxy (nginx) would otherwise hold events back until its buffer fills.
    return StreamingResponse(
        _encoded(events),
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
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
