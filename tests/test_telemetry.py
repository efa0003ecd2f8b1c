"""Runs as traces to the plant's collector: real runs on the demo plant (rules planner or the scripted LLM server, the
PLC simulator), exported over real OTLP/HTTP to a receiver on loopback that decodes each body with opentelemetry-proto's
ExportTraceServiceRequest. A dead collector (a closed port) and a slow one (a receiver that answers after the export
timeout) leave the run's answer and wall time as without telemetry, and show in the service's /metrics."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from edge.config import ConfigError, TelemetryConfig, load_config
from edge.llm.scripted_server import ScriptedLlmServer
from edge.telemetry import RunExporter, trace_id_of
from tests.fixtures.service import E102, AskResult, free_port, metric, run_service, scrape

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
MODEL = "Qwen/Qwen2-7B-Instruct-AWQ"  # what the scripted server and the config both name
# The rules planner answers it from the manual and a live reading: two tool calls, then the answer.
LIVE_E102 = "Press-3 shows E102, what is the motor temperature right now?"


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind)


def attributes_of(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: int
    resource: dict[str, Any]


class OtlpReceiver:
    """POST /v1/traces on loopback, as a collector takes it: each body decoded and kept before answering, then
    (when `delay_s`) an answer later than the exporter waits, or none until the test releases it."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.released = threading.Event()
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.paths.append(self.path)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                if receiver.delay_s:
                    receiver.released.wait(receiver.delay_s)
                reply = ExportTraceServiceResponse().SerializeToString()
                with contextlib.suppress(OSError):  # a client that gave up has closed the connection
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll: `shutdown` waits for it (0.5 s by default).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="otlp-receiver", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def spans(self) -> list[ReceivedSpan]:
        return [
            ReceivedSpan(
                name=span.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_id=span.parent_span_id.hex(),
                kind=span.kind,
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                attributes=attributes_of(span.attributes),
                status=span.status.code,
                resource=attributes_of(resource_spans.resource.attributes),
            )
            for request in self.requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def traced_run(agent, question: str = LIVE_E102, device_id: str = "press-3"):
    """One run, then the agent closed: closing sends what is queued."""
    record = agent.ask(question, device_id=device_id)
    agent.close()
    return record


def tree(spans: list[ReceivedSpan]) -> tuple[ReceivedSpan, list[ReceivedSpan], dict[str, list[ReceivedSpan]]]:
    """The run span, its steps in order, and each step's children by the step's span id."""
    (run,) = [s for s in spans if s.name == "fixloop.run"]
    steps = sorted((s for s in spans if s.parent_id == run.span_id), key=lambda s: s.attributes["fixloop.step.n"])
    children = {step.span_id: [s for s in spans if s.parent_id == step.span_id] for step in steps}
    assert len(spans) == 1 + len(steps) + sum(map(len, children.values())), "a span outside the run's tree"
    return run, steps, children


def without_readings(answer: str) -> str:
    """An answer with its live readings' values and times masked, and the values a cause quotes as its evidence
    ("Coolant level reads 71.4 %"): two simulators a second apart differ there."""
    masked = re.sub(r"[^\n]*\(live at [^\n]*", lambda line: line.group(0).split(":")[0] + ": (live reading)", answer)
    return re.sub(r"\breads -?\d+(?:\.\d+)?", "reads (value)", masked)


def every_text(spans: list[ReceivedSpan]) -> str:
    return json.dumps([[s.name, s.attributes, s.resource] for s in spans], ensure_ascii=False)


def test_a_run_is_one_trace_with_a_span_per_step_and_per_tool_call(make_agent, receiver):
    agent = make_agent(telemetry={"otlp_endpoint": receiver.url})
    record = traced_run(agent)
    spans = receiver.spans()

    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    run, steps, children = tree(spans)
    assert {s.trace_id for s in spans} == {f"{trace_id_of(record.run_id):032x}"}
    documented = subprocess.run(
        f"printf %s {record.run_id} | sha256sum | cut -c1-32", shell=True, capture_output=True, text=True, check=True
    )
    assert run.trace_id == documented.stdout.strip() == hashlib.sha256(record.run_id.encode()).hexdigest()[:32]
    assert run.parent_id == ""
    assert run.resource["service.name"] == "fixloop"
    assert run.resource["service.instance.id"] == run.resource["host.name"] == socket.gethostname()
    assert (
        run.attributes
        | {
            "fixloop.run.id": record.run_id,
            "fixloop.request.id": record.request_id,
            "fixloop.device.id": "press-3",
            "fixloop.question.language": "en",
            "fixloop.planner": "rules",
            "fixloop.planners": ["rules"],
            "fixloop.termination.reason": record.termination.reason,
            "fixloop.confidence": record.termination.confidence,
            "fixloop.steps": len(record.steps),
        }
        == run.attributes
    )
    assert "fixloop.fallback.reason" not in run.attributes and "gen_ai.usage.input_tokens" not in run.attributes
    assert run.start_ns == record.started_ms * 1_000_000
    assert run.end_ns - run.start_ns == pytest.approx(record.elapsed_ms * 1_000_000, abs=1)

    assert [s.attributes["fixloop.step.n"] for s in steps] == [step.n for step in record.steps]
    tool_steps = [step for step in record.steps if step.observation is not None]
    assert len(tool_steps) >= 2  # the manual and the PLC
    for span, step in zip(steps, record.steps, strict=True):
        assert span.name == "fixloop.step" and span.attributes["fixloop.step.planner"] == "rules"
        assert run.start_ns <= span.start_ns <= span.end_ns <= run.end_ns
        assert span.end_ns - span.start_ns == pytest.approx(step.step_ms * 1_000_000, abs=1)
        if step.observation is None:
            assert children[span.span_id] == []
            assert span.attributes["fixloop.step.kind"] == "final_answer"
            continue
        (tool,) = children[span.span_id]
        observation = step.observation
        assert tool.name == f"execute_tool {observation.tool}"
        assert tool.attributes["gen_ai.tool.name"] == span.attributes["fixloop.step.tool"] == observation.tool
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["fixloop.tool.status"] == observation.status
        assert tool.attributes["fixloop.tool.source"] == observation.source
        assert tool.attributes["fixloop.tool.latency_ms"] == pytest.approx(observation.elapsed_ms, abs=0.001)
        assert span.start_ns <= tool.start_ns <= tool.end_ns <= span.end_ns
    assert [children[s.span_id][0].attributes["gen_ai.tool.name"] for s in steps if children[s.span_id]] == [
        step.action for step in tool_steps
    ]
    assert {MANUAL, PLC} <= {step.action for step in tool_steps}

    text = every_text(spans)
    assert record.question not in text and "motor temperature right now" not in text
    assert record.termination.final_answer not in text
    assert "gen_ai.tool.call.arguments" not in text and "fixloop.step.thought" not in text


def test_include_text_sends_the_question_the_answer_and_the_tool_arguments(make_agent, receiver):
    agent = make_agent(telemetry={"otlp_endpoint": receiver.url, "include_text": True, "box": "line-7"})
    record = traced_run(agent)
    run, steps, children = tree(receiver.spans())

    assert run.resource["service.instance.id"] == "line-7"
    assert run.resource["host.name"] == socket.gethostname()
    assert run.attributes["fixloop.question"] == record.question
    assert run.attributes["fixloop.answer"] == record.termination.final_answer
    arguments = [json.loads(c.attributes["gen_ai.tool.call.arguments"]) for s in steps for c in children[s.span_id]]
    assert arguments == [step.args for step in record.steps if step.observation is not None]


def test_llm_requests_are_spans_with_their_token_counts(make_agent, receiver):
    script = [
        {
            "content": json.dumps(
                {"thought": "manual first", "action": MANUAL, "args": {"fault_code": "E102", "device_id": "press-3"}}
            ),
            "usage": {"prompt_tokens": 812, "completion_tokens": 31, "prompt_tokens_details": {"cached_tokens": 512}},
        },
        {
            "content": json.dumps(
                {"thought": "live", "action": PLC, "args": {"device_id": "press-3", "sensor": "coolant_level"}}
            ),
            "usage": {"prompt_tokens": 1090, "completion_tokens": 40},
        },
        {
            "content": json.dumps(
                {
                    "thought": "done",
                    "final_answer": "E102: stop the press and check the coolant level.",
                    "evidence": ["obs-1", "obs-2"],
                }
            ),
            "finish_reason": "stop",
        },
    ]
    with ScriptedLlmServer(script, model=MODEL) as llm:
        agent = make_agent(llm={"url": llm.url, "model": MODEL}, telemetry={"otlp_endpoint": receiver.url})
        record = traced_run(agent)
    run, steps, children = tree(receiver.spans())

    assert record.planner == "llm" and len(record.steps) == 3
    assert run.attributes["gen_ai.usage.input_tokens"] == record.prompt_tokens
    assert run.attributes["gen_ai.usage.output_tokens"] == record.completion_tokens
    requests = [c for s in steps for c in children[s.span_id] if c.name.startswith("chat ")]
    assert len(requests) == 3
    for request, step in zip(requests, record.steps, strict=True):
        assert request.name == f"chat {MODEL}"
        assert request.kind == SpanProto.SPAN_KIND_CLIENT
        assert request.attributes["gen_ai.operation.name"] == "chat"
        assert request.attributes["gen_ai.request.model"] == request.attributes["gen_ai.response.model"] == MODEL
        assert request.attributes["gen_ai.usage.input_tokens"] == step.llm.prompt_tokens
        assert request.attributes["gen_ai.usage.output_tokens"] == step.llm.completion_tokens
        assert request.attributes["gen_ai.response.finish_reasons"] == ["stop"]
        assert request.attributes["server.address"] == "127.0.0.1"
    assert [r.attributes["gen_ai.usage.input_tokens"] for r in requests[:2]] == [812, 1090]
    assert [r.attributes.get("gen_ai.usage.cache_read.input_tokens") for r in requests] == [512, None, None]
    assert [r.attributes["fixloop.llm.tokens_estimated"] for r in requests] == [False, False, False]
    # the third reply sent no counts of its own: the scripted server's estimate, still the server's figure
    assert requests[2].attributes["gen_ai.usage.input_tokens"] > 0


@pytest.mark.parametrize("collector", ["dead", "slow"])
def test_a_dead_or_slow_collector_costs_the_run_nothing_but_a_counter(tmp_path, demo_index, service, collector):
    slow = OtlpReceiver(delay_s=30)
    endpoint = slow.url if collector == "slow" else f"http://127.0.0.1:{free_port()}"
    # Long enough that an export on the run's path would show: 3 s of retries to a closed port, 5 s to the slow one.
    telemetry = {"otlp_endpoint": endpoint, "export_timeout_s": 5.0}
    with slow, run_service(tmp_path, demo_index, telemetry=telemetry) as traced:
        before = scrape(traced)
        runs: dict[str, list[AskResult]] = {"plain": [], "traced": []}
        walls: dict[str, list[float]] = {"plain": [], "traced": []}
        for _ in range(3):  # the first of each warms its service
            for name, target in (("plain", service), ("traced", traced)):
                started = time.perf_counter()
                runs[name].append(target.ask(E102, "press-3"))
                walls[name].append(time.perf_counter() - started)
        plain_runs, traced_runs = runs["plain"], runs["traced"]

        # Same answer, same steps: the export happens after the run, on another thread.
        assert {r.termination["reason"] for r in traced_runs} == {r.termination["reason"] for r in plain_runs}
        assert {without_readings(r.termination["final_answer"]) for r in traced_runs} == {
            without_readings(r.termination["final_answer"]) for r in plain_runs
        }
        assert [e["tool"] for e in traced_runs[-1].of("action")] == [e["tool"] for e in plain_runs[-1].of("action")]
        assert min(walls["traced"][1:]) < min(walls["plain"][1:]) * 2 + 1.0, walls

        deadline = time.monotonic() + 30
        while True:
            after = scrape(traced)
            failures = metric(after, "fixloop_telemetry_export_failures_total")
            if failures > metric(before, "fixloop_telemetry_export_failures_total") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert failures > metric(before, "fixloop_telemetry_export_failures_total")
    assert metric(after, "fixloop_telemetry_spans_dropped_total", reason="export_failed") > metric(
        before, "fixloop_telemetry_spans_dropped_total", reason="export_failed"
    )
    if collector == "slow":
        assert slow.requests, "the slow collector was sent the spans it was too slow to acknowledge"


def test_a_full_queue_drops_whole_runs_and_counts_their_spans(make_agent):
    agent = make_agent()
    record = agent.ask(E102, device_id="press-3")
    with OtlpReceiver(delay_s=30) as receiver:
        exporter = RunExporter(
            TelemetryConfig(otlp_endpoint=receiver.url, max_queue=64, export_timeout_s=20), agent.config.llm
        )
        per_run = 1 + len(record.steps) + sum(step.observation is not None for step in record.steps)
        fits = 64 // per_run
        dropped = "fixloop_telemetry_spans_dropped_total"
        before = metric(scrape_registry(), dropped, reason="queue_full")
        for n in range(fits + 5):  # quicker than the queue's first send, a second after the first run
            exporter.export(record.model_copy(update={"run_id": f"run-queue-{n}"}))
        assert metric(scrape_registry(), dropped, reason="queue_full") - before == 5 * per_run
        receiver.released.set()
        exporter.close()
    spans = receiver.spans()
    runs = {s.trace_id for s in spans if s.name == "fixloop.run"}
    assert runs == {f"{trace_id_of(f'run-queue-{n}'):032x}" for n in range(fits)}
    assert len(spans) == fits * per_run  # every admitted run whole


def scrape_registry() -> str:
    """/metrics's text without a service: the series live on the process's default registry."""
    from prometheus_client import generate_latest

    return generate_latest().decode()


def test_an_endpoint_that_is_not_an_http_url_stops_start_up_naming_the_key():
    with pytest.raises(ConfigError, match=r"telemetry\.otlp_endpoint: .*http:// or https://.*'otel\.plant\.lan:4318'"):
        load_config(env={"FIXLOOP__TELEMETRY__OTLP_ENDPOINT": "otel.plant.lan:4318"})
    assert load_config(env={}).telemetry.otlp_endpoint is None
