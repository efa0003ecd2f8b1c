"""Prometheus series of the PLC tool, shown by the service's /metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

READS = Counter(
    "fixloop_plc_reads_total",
    "Sensor readings answered, by OPC UA-style quality.",
    ["device", "sensor", "quality"],
)
BREAKER_OPENED = Counter(
    "fixloop_plc_breaker_open_total",
    "Times a breaker opened after consecutive communication failures (sensor '*' is the whole PLC unit).",
    ["device", "sensor"],
)
BREAKER_STATE = Gauge(
    "fixloop_plc_breaker_state",
    "Breaker state: 0 closed, 1 open, 2 half-open (probing).",
    ["device", "sensor"],
)
