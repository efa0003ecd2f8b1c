"""Prometheus series of the trace export, shown by the service's /metrics: what a dead or slow collector costs."""

from __future__ import annotations

from prometheus_client import Counter

EXPORT_FAILURES = Counter(
    "fixloop_telemetry_export_failures_total",
    "Span batches the collector did not take: refused, unreachable, or slower than [telemetry] export_timeout_s.",
)
SPANS_EXPORTED = Counter("fixloop_telemetry_spans_exported_total", "Run spans the collector took.")
SPANS_DROPPED = Counter(
    "fixloop_telemetry_spans_dropped_total",
    "Run spans never delivered, by reason: queue_full (the run's spans did not fit [telemetry] max_queue), "
    "export_failed (their batch failed), shutdown (still queued when the agent closed).",
    ["reason"],
)
