"""Each package names its API in `__all__`, and this pins it: adding or removing a public name is a
deliberate change made here too. Every exported name resolves, and importing a package stays cheap."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

EXPORTED = {
    "edge.llm": {
        "BUILT_IN_PROFILES",
        "KNOWN_MODELS",
        "KnownModel",
        "ChatClient",
        "Completion",
        "Dialect",
        "LlmBreaker",
        "LlmPlanner",
        "LocalServer",
        "ModelProfile",
        "ReplyEnvelope",
        "ScriptedLlmServer",
        "decoding_schema",
        "detect",
        "dialect",
        "estimate_prompt_tokens",
        "estimate_text_tokens",
        "model_file",
        "start_local_server",
    },
    "edge.rules": {"RulesPlanner"},
    "edge.telemetry": {"RunExporter", "trace_id_of"},
    "edge.run": {
        "LAST_EVENTS",
        "PHRASES",
        "RUN_EVENT",
        "TOOL_NAMES",
        "UNSUPPORTED",
        "WORK_ORDER_TOOL",
        "AgentLoop",
        "AnswerVerifier",
        "Confirmation",
        "ContextFull",
        "Decision",
        "ErrorEvent",
        "EventSink",
        "Evidence",
        "Feedback",
        "FeedbackFilter",
        "FeedbackRow",
        "FinalAnswer",
        "FormatError",
        "LlmCircuitOpen",
        "LlmOutOfTime",
        "LlmUnavailable",
        "LlmUsage",
        "Planner",
        "RunEvent",
        "RunFilter",
        "RunRecord",
        "RunRequest",
        "RunState",
        "RunStore",
        "RunSummary",
        "SessionContext",
        "TerminationReason",
        "ToolCall",
        "action_of",
        "cap_text",
        "collect_evidence",
        "device_of",
        "build_document",
        "render_text",
        "refusal_kind",
        "asks_if_safe",
        "listed_codes",
        "AnswerDocument",
        "decode_object",
        "events_from_record",
        "evidence_of",
        "fault_codes_of",
        "language_of",
        "new_id",
        "session_context",
        "stored_event",
        "strip_stop_residue",
        "supporting_ids",
        "ungrounded",
        "work_order_ref",
    },
    "knowledge": {
        "SCHEMA_VERSION",
        "BuildError",
        "BuildEvent",
        "BuildReport",
        "CodeLinker",
        "CodeMention",
        "CodeMentions",
        "Embedder",
        "FaultRecord",
        "Hit",
        "IndexMissing",
        "IndexSchemaMismatch",
        "IndexStatus",
        "KnowledgeConfig",
        "ManualError",
        "ManualIndex",
        "ManualInfo",
        "Match",
        "Scope",
        "SearchResult",
        "build_index",
        "canonical_id",
        "code_key",
        "fault_key",
        "lookup_keys",
        "loose_key",
        "read_status",
        "reported_code",
        "scope_key",
    },
    "knowledge.ingest": {
        "SCHEMA_VERSION",
        "BuildError",
        "BuildEvent",
        "BuildReport",
        "Extraction",
        "IndexSchemaMismatch",
        "IndexStatus",
        "build_index",
        "extract_manual",
        "file_sha256",
        "for_entry",
        "hands_on",
        "normalize_version",
        "outdated",
        "read_statements",
        "read_status",
        "version_order",
    },
    "knowledge.search": {"Candidates", "Evidence", "IndexMissing", "IndexRow", "ManualIndex", "Mode", "Question"},
    "tools": {
        "TRUNCATION_MARKER",
        "Actor",
        "DeviceConfig",
        "Item",
        "ItemKind",
        "Observation",
        "PlcEndpoint",
        "SensorConfig",
        "Status",
        "Tool",
        "ToolContext",
        "ToolOutput",
        "ToolRegistry",
        "UnknownDevice",
        "bind_device_ids",
        "cut_middle",
        "find_device",
        "normalize_name",
        "now_ms",
        "unknown_device",
    },
    "tools.manual_search": {"ManualSearchInput", "ManualSearchTool"},
    "tools.plc": {
        "BreakerState",
        "ControlServer",
        "NoCommunication",
        "PlcConfig",
        "PlcGateway",
        "PlcReadArgs",
        "PlcReadError",
        "PlcReadTool",
        "PlcRejected",
        "PlcStore",
        "PollReport",
        "Poller",
        "Reading",
        "SensorHistory",
        "SensorProbe",
        "SimulatorHandle",
        "UnknownSensor",
        "breaker_states",
        "poll_once",
        "probe_device",
        "sensor_history",
        "start_simulator",
    },
    "tools.work_orders": {
        "ACTIVE_STATUSES",
        "CLOSED_STATUSES",
        "TRANSITIONS",
        "DeliveryStats",
        "FaultCode",
        "Fix",
        "FixHistory",
        "IllegalTransition",
        "MesConfig",
        "OutboxRow",
        "Part",
        "ReportedFix",
        "SignatureError",
        "WebhookInProgress",
        "WorkOrder",
        "WorkOrderArgs",
        "WorkOrderConfig",
        "WorkOrderError",
        "WorkOrderNotFound",
        "WorkOrderStore",
        "WorkOrderTool",
        "check_headers",
        "decode_secret",
        "deliver_due",
        "run_worker",
        "signed_headers",
        "verify",
    },
}


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_each_package_exports_exactly_its_pinned_names(package):
    module = importlib.import_module(package)
    assert len(module.__all__) == len(set(module.__all__)), "a name is listed twice"
    assert set(module.__all__) == EXPORTED[package]


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_every_exported_name_resolves_to_the_object_its_module_defines(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is not None, name
        owner = getattr(value, "__module__", None)
        if owner and owner.startswith(package.split(".")[0] + "."):
            assert getattr(importlib.import_module(owner), name, value) is value, name


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_a_name_outside_the_api_is_not_an_attribute(package):
    module = importlib.import_module(package)
    with pytest.raises(AttributeError):
        module.not_part_of_the_api  # noqa: B018


def test_importing_the_packages_loads_neither_spacy_nor_torch_nor_pymupdf():
    code = (
        "import sys, knowledge, knowledge.ingest, tools, tools.plc, tools.work_orders, edge.llm, edge.run, edge.rules, edge.telemetry; "
        "print(sorted(m for m in ('spacy', 'torch', 'fitz', 'sentence_transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_tool_contract_gives_every_tool_warm_and_known_codes():
    from tools import Tool
    from tools.plc import PlcReadTool
    from tools.work_orders import WorkOrderTool

    for tool_class in (PlcReadTool, WorkOrderTool):
        assert tool_class.warm is Tool.warm
        assert tool_class.known_codes is Tool.known_codes
    assert Tool.known_codes(object.__new__(PlcReadTool)) == set()
