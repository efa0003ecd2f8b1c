"""Each finished run to the plant's collector as one trace, off the run's path and at no risk to it."""

from __future__ import annotations

import logging
import socket
import threading
from importlib.metadata import version

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from edge.config import LlmConfig, TelemetryConfig
from edge.run.record import RunRecord
from edge.telemetry.capture import HoldSpans, RunTraceIds, capturing
from edge.telemetry.delivery import Delivery
from edge.telemetry.metrics import SPANS_DROPPED
from edge.telemetry.spans import write_run

_log = logging.getLogger(__name__)
# The OTLP exporter logs every failed attempt: a box whose collector is down for a week would fill its journal with
# them. The failures are counted in /metrics instead (`edge.telemetry.metrics`).
logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").setLevel(logging.CRITICAL)

TRACES_PATH = "/v1/traces"
# How often the background thread sends what is queued: a plant engineer sees a run about a second after its end.
SEND_EVERY_MS = 1000
# The SDK's default batch; smaller only when the queue is.
MAX_BATCH = 512


def traces_url(endpoint: str) -> str:
    """The collector's OTLP/HTTP traces URL: `/v1/traces` after the base URL a plant names its collector by."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


class RunExporter:
    """Spans are built from the finished record, with the times it kept, and handed to a bounded batch queue that
    a background thread sends to the collector: a run never waits on the network, and a dead or slow collector
    costs only the counters in `edge.telemetry.metrics`."""

    def __init__(self, telemetry: TelemetryConfig, llm: LlmConfig):
        if not telemetry.otlp_endpoint:
            raise ValueError("telemetry.otlp_endpoint is not set: there is no collector to export runs to")
        self._include_text = telemetry.include_text
        self._llm = llm
        self._close_timeout_s = telemetry.export_timeout_s
        otlp = OTLPSpanExporter(endpoint=traces_url(telemetry.otlp_endpoint), timeout=telemetry.export_timeout_s)
        self._delivery = Delivery(otlp, telemetry.max_queue)
        self._queue = BatchSpanProcessor(
            self._delivery,
            max_queue_size=telemetry.max_queue,
            schedule_delay_millis=SEND_EVERY_MS,
            max_export_batch_size=min(MAX_BATCH, telemetry.max_queue),
        )
        box = telemetry.box or socket.gethostname()
        resource = Resource.create(
            {
                "service.name": "fixloop",
                "service.version": version("fixloop"),
                "service.instance.id": box,
                "host.name": socket.gethostname(),
            }
        )
        # Sampling fixed on: every run is exported, whatever OTEL_TRACES_SAMPLER says. No shutdown at exit:
        # the SDK's waits up to 30 s, `close` at most export_timeout_s.
        provider = TracerProvider(
            resource=resource, sampler=ALWAYS_ON, id_generator=RunTraceIds(), shutdown_on_exit=False
        )
        provider.add_span_processor(HoldSpans())
        self._tracer = provider.get_tracer("fixloop", version("fixloop"))
        self._closed = False

    def export(self, record: RunRecord) -> None:
        """Queue the run's spans, whole, or drop them (counted) when the queue has no room; never raises."""
        try:
            with capturing(record.run_id) as spans:
                write_run(self._tracer, record, self._include_text, self._llm)
        except Exception:  # a trace is worth less than the answer it would describe
            _log.exception("run %s: its trace could not be built; the run is not exported", record.run_id)
            return
        if not self._delivery.admit(len(spans)):
            SPANS_DROPPED.labels("queue_full").inc(len(spans))
            return
        for span in spans:
            self._queue.on_end(span)

    def close(self) -> None:
        """Send what is queued, waiting at most export_timeout_s; what is still queued then is dropped, counted."""
        if self._closed:
            return
        self._closed = True
        # The processor's shutdown waits on its thread for up to 30 s; in a thread of its own, we wait less.
        closing = threading.Thread(target=self._queue.shutdown, name="telemetry-close", daemon=True)
        closing.start()
        closing.join(self._close_timeout_s)
        self._delivery.abandon()
