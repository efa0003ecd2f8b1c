"""Between the batch processor and the OTLP exporter: what reached the collector and what did not, counted."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from edge.telemetry.metrics import EXPORT_FAILURES, SPANS_DROPPED, SPANS_EXPORTED


class Delivery(SpanExporter):
    """Counts each batch's outcome, and how many spans wait (queued or being sent): `admit` refuses a run whose
    spans would overflow the processor's queue, where the processor itself would drop its oldest spans silently
    and leave traces with holes. The queue never holds more than the spans admitted and not yet sent, so it
    never drops one itself."""

    def __init__(self, otlp: SpanExporter, max_waiting: int):
        self._otlp = otlp
        self._max_waiting = max_waiting
        self._lock = threading.Lock()
        self._waiting = 0  # admitted and not yet through `export`
        self._sending = 0  # inside `export` now
        self._abandoned = False

    def admit(self, spans: int) -> bool:
        with self._lock:
            if self._waiting + spans > self._max_waiting:
                return False
            self._waiting += spans
            return True

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            if self._abandoned:  # counted as dropped when they were abandoned
                return SpanExportResult.FAILURE
            self._sending += len(spans)
        try:
            result = self._otlp.export(spans)
        finally:
            with self._lock:
                self._sending -= len(spans)
                self._waiting -= len(spans)
        if result is SpanExportResult.SUCCESS:
            SPANS_EXPORTED.inc(len(spans))
        else:
            EXPORT_FAILURES.inc()
            SPANS_DROPPED.labels("export_failed").inc(len(spans))
        return result

    def abandon(self) -> None:
        """Give up on the spans still queued: counted as dropped, and refused should the processor still send
        them. A batch being sent now is counted by its own outcome."""
        with self._lock:
            self._abandoned = True
            SPANS_DROPPED.labels("shutdown").inc(self._waiting - self._sending)
            self._waiting = self._sending

    def shutdown(self) -> None:
        self._otlp.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._otlp.force_flush(timeout_millis)
