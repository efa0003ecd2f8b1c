"""Writing one run's spans: the trace id its run id gives, and the spans held back until the whole run is written,
so that it is queued for export whole or not at all."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

# The run whose spans this thread is writing, and the spans written so far.
_WRITING: ContextVar[tuple[str, list[ReadableSpan]]] = ContextVar("fixloop_run_being_traced")


def trace_id_of(run_id: str) -> int:
    """The trace id of a run: the first 128 bits of the SHA-256 of its run id, so the run id the tablet and
    `fixloop runs` show finds its trace (in hex: `printf %s RUN_ID | sha256sum | cut -c1-32`)."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big")


@contextmanager
def capturing(run_id: str) -> Iterator[list[ReadableSpan]]:
    """While inside, the run's root span gets the run's trace id and every span ended is kept in the list."""
    spans: list[ReadableSpan] = []
    token = _WRITING.set((run_id, spans))
    try:
        yield spans
    finally:
        _WRITING.reset(token)


class RunTraceIds(IdGenerator):
    """Trace ids from the run being written; span ids random as usual."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        return trace_id_of(_WRITING.get()[0])

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return False


class HoldSpans(SpanProcessor):
    """Keeps each ended span with the run being written, for the exporter to queue once the run is complete."""

    def on_end(self, span: ReadableSpan) -> None:
        _WRITING.get()[1].append(span)
