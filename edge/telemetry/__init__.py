"""Runs as traces for the plant's own tracing backend: each finished run, read from its record, goes to an
OpenTelemetry collector over OTLP/HTTP (`[telemetry] otlp_endpoint`, docs/fleet.md), off the run's path.

The names below are the package's API, each imported from its module on first use: the OpenTelemetry SDK loads
only on a box that sends traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from edge.telemetry.capture import trace_id_of
    from edge.telemetry.exporter import RunExporter

_EXPORTS = {
    "RunExporter": "edge.telemetry.exporter",
    "trace_id_of": "edge.telemetry.capture",
}

__all__ = ["RunExporter", "trace_id_of"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
