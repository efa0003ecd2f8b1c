"""Assembling the agent from config: the three tools, the planner and the loop."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edge.config import Config
from edge.llm.breaker import LlmBreaker
from edge.rules import RulesPlanner
from edge.run import AgentLoop, AnswerVerifier, EventSink, LlmUnavailable, Planner, RunRecord, RunRequest, RunState
from tools import plant
from tools.manual_search.tool import ManualSearchTool
from tools.plc.gateway import PlcGateway
from tools.plc.tool import PlcReadTool
from tools.registry import ToolRegistry
from tools.work_orders.store import WorkOrderStore
from tools.work_orders.tool import WorkOrderTool

if TYPE_CHECKING:
    from edge.llm.client import ChatClient
    from edge.llm.planner import LlmPlanner
    from edge.planning import RoutingResult, RulesFirstPlanner
    from edge.telemetry import RunExporter


_MANUAL = ManualSearchTool.name


def build_registry(config: Config) -> ToolRegistry:
    store = work_order_store(config)
    return ToolRegistry(
        [
            ManualSearchTool(
                config.state_path(config.knowledge.index_file),
                config.devices,
                config.knowledge.model_path,
                tuple(config.knowledge.semantic_languages),
                second_opinion=config.knowledge.second_opinion,
            ),
            PlcReadTool(
                config.devices,
                config.plc,
                config.state_path(config.plc.cache_file),
                on_breaker_open=_breaker_notifier(store),
            ),
            WorkOrderTool(store, config.devices, config.work_orders),
        ]
    )


def work_order_store(config: Config) -> WorkOrderStore:
    """The plant's work-order store. A config requiring isolation records the rule in it, so every process
    sharing the file enforces it; a config without it leaves the rule as the file has it."""
    store = WorkOrderStore(config.state_path(config.work_orders.store_file), config.work_orders.busy_timeout_ms)
    if config.work_orders.require_isolation:
        store.require_isolation(f"[work_orders] require_isolation in {config.source}")
    return store


def plc_gateway(config: Config) -> PlcGateway:
    """A gateway for pollers, with the same breaker notification as the tool's."""
    return PlcGateway(
        config.devices,
        config.plc,
        config.state_path(config.plc.cache_file),
        _breaker_notifier(work_order_store(config)),
    )


def _breaker_notifier(store: WorkOrderStore) -> Callable[[dict[str, Any]], None]:
    """Operations hears of an opened PLC breaker through the MES outbox too (besides the log event and
    the counter); the webhook id names the opening, so the tool and a poller reporting it send one.
    The write happens off the read path (a busy work-order database must not eat the read budget), in a
    non-daemon thread so that a one-shot CLI run still queues it before exiting."""

    def notify(event: dict[str, Any]) -> None:
        scope = event["sensor"] if event["sensor"] != "*" else "unit"
        webhook_id = f"msg_breaker_{event['device_id']}_{scope}_{event['opened_at_ms']}"
        threading.Thread(
            target=store.notify, args=(webhook_id, "plc.breaker_opened", event, "plc"), name="breaker-notify"
        ).start()

    return notify


class Agent:
    def __init__(self, config: Config, registry: ToolRegistry | None = None):
        self.config = config
        self.registry = registry or build_registry(config)
        manual = self.registry.get(_MANUAL)
        rules = RulesPlanner(config.devices, known_codes=manual.known_codes if manual is not None else tuple)
        self.client: ChatClient | None = None
        self.llm_planner: LlmPlanner | None = None
        self.planning: RulesFirstPlanner | None = None
        self.llm_breaker = LlmBreaker(config.llm.breaker_failures, config.llm.breaker_open_s)
        planner: Planner = rules
        if config.llm.url:
            from edge.llm.client import ChatClient  # httpx: only with a language model to call
            from edge.llm.planner import LlmPlanner

            self.client = ChatClient(
                config.llm.url,
                config.llm.model,
                config.llm.timeout_s,
                config.llm.max_tokens_per_step,
                config.llm.structured_outputs,
                config.llm.api_key,
                breaker=self.llm_breaker,
                server=config.llm.server,
            )
            from edge.planning import RulesFirstPlanner

            self.llm_planner = LlmPlanner(
                self.client,
                self.registry,
                config.devices,
                config.loop.observation_max_chars,
                config.loop.raw_reply_max_chars,
                config.loop.max_tokens,
            )
            planner = self.planning = RulesFirstPlanner(self.llm_planner, rules, config.devices, config.llm.planning)
        self.rules = rules
        self.loop = AgentLoop(
            self.registry, planner, rules, config.loop, AnswerVerifier(config.devices, self.needs_evidence)
        )
        self.telemetry: RunExporter | None = None
        if config.telemetry.otlp_endpoint:
            from edge.telemetry import RunExporter  # the OpenTelemetry SDK: only with a collector to send runs to

            self.telemetry = RunExporter(config.telemetry, config.llm)

    @property
    def degraded(self) -> bool:
        return self.client is None

    def warm(self) -> None:
        """Load what is loaded lazily and prime the model, blocking; the service does both in the background."""
        self.warm_tools()
        self.prime()

    def warm_tools(self) -> None:
        """Load what is loaded lazily (the SBERT model, the spaCy code linker), blocking."""
        self.rules.warm()
        for tool in self.registry:
            tool.warm()

    @property
    def primes(self) -> bool:
        """Whether the model's profile asks for its system prompt to be sent once at start."""
        return self.llm_planner is not None and self.config.model_profile.prime_prompt

    def prime(self) -> None:
        """Put the system prompt in the server's prefix cache (`ModelProfile.prime_prompt`), blocking."""
        if self.llm_planner is not None and self.primes:
            # A server that is down now: the runs find out, fall back and count it in the breaker.
            with contextlib.suppress(LlmUnavailable):
                self.llm_planner.prime()
        if self.planning is not None and self.config.llm.routing_probe and self.planning.mode == "rules_first":
            with contextlib.suppress(LlmUnavailable):
                self.route_by_probe()

    def routing_probe(self) -> RoutingResult:
        """The model's first tools on questions whose first tool is known, beside the rules'
        (`edge.planning.probe`); raises `LlmUnavailable`, and `RuntimeError` without a model."""
        from edge.planning import probe_cases, routing_probe

        if self.llm_planner is None:
            raise RuntimeError("no language model is configured")
        manual = self.registry.get(_MANUAL)
        cases = probe_cases(self.config.devices, manual.known_codes() if manual is not None else ())
        return routing_probe(self.llm_planner, self.rules, cases, self.config.loop.max_wall_s)

    def route_by_probe(self) -> None:
        """A model that routes worse than the rules on the probe writes only the answer's prose."""
        assert self.planning is not None
        result = self.routing_probe()
        if result.worse:
            self.planning.mode = "prose"
            self.planning.mode_reason = f"the model routes worse than the rules: {result.summary()}"
        else:
            self.planning.mode_reason = f"routing probe: {result.summary()}"

    def planning_status(self) -> dict[str, str]:
        """Who decides the steps, for /healthz: "rules" alone, or the model's part and why."""
        if self.planning is None:
            return {"planning": "rules", "planning_detail": "no language model: the rules planner decides and answers"}
        return {"planning": self.planning.mode, "planning_detail": self.planning.mode_reason or "as configured"}

    def warm_for(self, question: str, device_id: str | None = None, actor: str = "technician") -> None:
        """Load, blocking, what one run of this question needs (a one-shot command has no background to
        warm in). A symptom to search the manuals for needs everything `warm` loads: the SBERT model, and
        spaCy, which a free-text search loads inside the tool's time budget otherwise. A fault-code or
        live-reading question needs neither. The prompt's tool trigger rules are the rules planner's, so
        its reading of the question stands for the language model's too; a symptom search the model makes
        anyway is answered by keywords while the model loads, marked degraded."""
        if self.rules.searches_by_symptom(question, device_id, actor):
            self.warm()

    def needs_evidence(self, state: RunState) -> bool:
        """A question the rules planner would call a tool for can be answered only from a tool result."""
        intent = self.rules.analyse(state)
        return bool(intent.codes or intent.sensors or intent.wants_live or intent.wants_work_order or intent.symptom)

    def run(
        self, request: RunRequest, on_event: EventSink | None = None, cancel: threading.Event | None = None
    ) -> RunRecord:
        """Raises `tools.plant.UnknownDevice` for a device id the plant does not have."""
        if request.device_id is not None:
            plant.require(self.config.devices, request.device_id)
        record = self.loop.run(request, on_event, cancel)
        # Here, because every run passes here: the service's, an MES alarm's, `fixloop ask`'s, an evaluation's.
        if self.telemetry is not None:
            self.telemetry.export(record)
        return record

    def ask(self, question: str, device_id: str | None = None, **options: Any) -> RunRecord:
        return self.run(RunRequest(question=question, device_id=device_id, **options))

    def close(self) -> None:
        self.registry.close()
        if self.client is not None:
            self.client.close()
        if self.telemetry is not None:
            self.telemetry.close()
