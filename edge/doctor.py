"""`fixloop doctor`: is this box ready? Each check says what is wrong and how to fix it.

Checks, in order: the config; the manual index (present, its version and
record count); each device's PLC (every sensor read once, straight over
Modbus, so the check never trips a breaker) and the breakers the PLC cache
holds; the LLM endpoint (reachable, the served model is the pinned one, the
server really constrains its output to a JSON Schema, and the model picks the
first tool as well as the rules do on a small routing probe). No LLM configured
is a notice, not a failure: the rules planner answers in degraded mode.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from edge.config import DEMO_SOURCE, Config
from edge.llm.client import ChatClient, LlmUnavailable
from knowledge import SCHEMA_VERSION, BuildError, Embedder, IndexSchemaMismatch, IndexStatus, read_status
from tools.plant import DeviceConfig
from tools.plc import NoCommunication, SensorProbe, breaker_states, probe_device

Status = Literal["ok", "notice", "warning", "failure"]

_DEMO_TOKENS = {"demo-technician-token", "demo-supervisor-token", "demo-admin-token"}
# The server must answer {"status": "ok"}; the prompt asks for something else, so only a
# server that enforces the schema produces the valid reply.
_PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["ok"]}},
    "required": ["status"],
    "additionalProperties": False,
}
_PROBE_MESSAGES = [
    {"role": "system", "content": "You are a connectivity probe."},
    {"role": "user", "content": 'Reply with exactly this JSON object and nothing else: {"status": "unconstrained"}'},
]
_PROBE_MAX_TOKENS = 16
_LLM_FIX = (
    "check the server: `systemctl status fixloop-vllm` (CPU-only boxes: fixloop-llama), "
    "`journalctl -u fixloop-vllm -n 50`; "
    "llm.url / FIXLOOP_LLM_URL must be its OpenAI base URL, e.g. http://127.0.0.1:8000/v1"
)


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def run_checks(config: Config, config_source: str = DEMO_SOURCE) -> list[Check]:
    return [
        _check_config(config, config_source),
        _check_index(config),
        *_check_plc(config),
        *_check_breakers(config),
        *_check_llm(config),
    ]


def failed(checks: list[Check]) -> bool:
    return any(check.status == "failure" for check in checks)


def as_json(checks: list[Check]) -> str:
    return json.dumps([asdict(check) for check in checks], ensure_ascii=False, indent=2)


# -- config ----------------------------------------------------------------


def _check_config(config: Config, source: str) -> Check:
    state = Path(config.state_dir)
    detail = f"{source}: {len(config.devices)} device(s) ({', '.join(config.devices) or 'none'}), state dir {state}"
    if not config.devices:
        return Check(
            "config", "failure", detail, "add the plant's machines under [devices.<id>] with their PLC and sensors"
        )
    writable_parent = next((p for p in [state, *state.absolute().parents] if p.exists()), None)
    if writable_parent is None or not writable_parent.is_dir() or not _writable(writable_parent):
        return Check(
            "config",
            "failure",
            f"{detail}; not writable",
            "point state_dir / FIXLOOP_STATE_DIR at a directory the fixloop user owns (systemd: StateDirectory)",
        )
    demo = _DEMO_TOKENS & {
        *config.service.technician_tokens,
        *config.service.supervisor_tokens,
        config.service.admin_token or "",
    }
    if demo:
        status: Status = "notice" if source == DEMO_SOURCE else "warning"
        return Check(
            "config",
            status,
            f"{detail}; demo tokens in use ({', '.join(sorted(demo))})",
            "set your own service.technician_tokens, supervisor_tokens and admin_token before the box goes on the line",
        )
    return Check("config", "ok", detail)


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


# -- manual index ------------------------------------------------------------


def _check_index(config: Config) -> Check:
    path = config.state_path(config.knowledge.index_file)
    fix = (
        "build it: `fixloop index build <manual PDFs or folders>` (`fixloop demo` builds the demo plant's), "
        "or install the line's index release at this path"
    )
    if not path.exists():
        return Check("index", "failure", f"no manual index at {path}", fix)
    try:
        status = read_status(path)
    except IndexSchemaMismatch as exc:
        return Check(
            "index",
            "failure",
            str(exc),
            "rebuild the index with this version: `fixloop index build <manual PDFs or folders>`",
        )
    except BuildError as exc:
        return Check("index", "failure", str(exc), fix)
    # Fault entries and page passages: an index of manuals without fault sections is still searchable.
    records = sum(manual.records + manual.passages for manual in status.manuals)
    if not records:
        return Check("index", "failure", f"{path} holds no fault-code records", fix)
    expected_model = Embedder(config.knowledge.model_path).identity
    if status.model != expected_model:
        return Check(
            "index",
            "failure",
            f"{path}: embedded with {status.model}, but knowledge.model_path says "
            f"{expected_model}: queries and records would not be comparable",
            "rebuild the index with the configured model, or set knowledge.model_path to the index's model",
        )
    return Check(
        "index", "ok", f"{path}: {records} records from {len(status.manuals)} manual(s); {_index_version(status)}"
    )


def _index_version(status: IndexStatus) -> str:
    versions = ", ".join(sorted({manual.version for manual in status.manuals})) or "-"
    languages = ", ".join(sorted({manual.language for manual in status.manuals})) or "-"
    return (
        f"index schema {SCHEMA_VERSION}, built {status.built_at or '?'}, manual versions {versions} ({languages}), "
        f"embeddings {status.model or '?'}"
    )


# -- PLC ---------------------------------------------------------------------


def _check_plc(config: Config) -> list[Check]:
    return [_check_device(device, config) for device in config.devices.values()]


def _check_device(device: DeviceConfig, config: Config) -> Check:
    plc = device.plc
    where = f"unit {plc.unit_id} at {plc.host}:{plc.port}"
    name = f"plc {device.id}"
    try:
        probes = probe_device(device, config.plc)
    except NoCommunication as exc:
        return Check(
            name,
            "failure",
            f"{where}: no answer ({exc.reason}: {exc})",
            f"check that the PLC is powered and on the network, and [devices.{device.id}.plc] host/port/"
            "unit_id; the agent answers from the PLC cache meanwhile (demo: `fixloop plc sim`)",
        )
    values = [_shown(device, probe) for probe in probes if probe.value is not None]
    problems = [_problem(device, probe) for probe in probes if probe.rejected or probe.is_outlier]
    detail = f"{where}: {len(values)}/{len(device.sensors)} sensors read ({', '.join(values)})"
    if problems:
        return Check(
            name,
            "warning",
            f"{detail}; " + "; ".join(problems),
            "a value outside its plausible range is usually a broken sensor or wiring; a Modbus exception or "
            f"malformed reply means the register map in [devices.{device.id}.sensors] does not fit the PLC",
        )
    return Check(name, "ok", detail)


def _shown(device: DeviceConfig, probe: SensorProbe) -> str:
    unit = device.sensors[probe.sensor].unit
    return f"{probe.sensor} {probe.value:.4g}{' ' + unit if unit else ''}"


def _problem(device: DeviceConfig, probe: SensorProbe) -> str:
    if probe.rejected:
        return f"{probe.sensor}: {probe.rejected}"
    sensor = device.sensors[probe.sensor]
    return (
        f"{sensor.id} reads {probe.value:.4g} {sensor.unit}, outside {sensor.plausible_min:g}..{sensor.plausible_max:g}"
    )


def _check_breakers(config: Config) -> list[Check]:
    path = config.state_path(config.plc.cache_file)
    if not path.exists():
        return [
            Check(
                "plc breakers",
                "notice",
                f"no PLC cache at {path} yet",
                "start the poller (`systemctl start fixloop-poller`, or `fixloop poller`) so reads can fall back to the cache",
            )
        ]
    rows = breaker_states(config.plc, path)
    opened = [row for row in rows if row.state != "closed"]
    counting = [row for row in rows if row.state == "closed"]
    if opened:
        described = [
            f"{row.device_id}/{'whole unit' if row.whole_unit else row.sensor} {row.state} after {row.failures} failures"
            + (f", probes again at {_clock(row.reopen_at_ms)}" if row.reopen_at_ms is not None else "")
            for row in opened
        ]
        return [
            Check(
                "plc breakers",
                "warning",
                "; ".join(described),
                "reads of these answer from the cache until the PLC responds again; fix the PLC link, the breaker "
                "closes on the next successful read (the poller tries every cycle)",
            )
        ]
    detail = "all closed" + (f"; {len(counting)} counting recent timeouts" if counting else "")
    return [Check("plc breakers", "ok", f"{path}: {detail}")]


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


# -- LLM ---------------------------------------------------------------------


def _check_llm(config: Config) -> list[Check]:
    llm = config.llm
    if not llm.url:
        return [
            Check(
                "llm",
                "notice",
                "no LLM configured: degraded rules mode (the rules planner answers)",
                "to use the model set llm.url or FIXLOOP_LLM_URL, e.g. http://127.0.0.1:8000/v1",
            )
        ]
    client = ChatClient(
        llm.url, llm.model, llm.timeout_s, _PROBE_MAX_TOKENS, llm.structured_outputs, llm.api_key, server=llm.server
    )
    try:
        try:
            models = client.models()
            server = client.dialect.name
        except LlmUnavailable as exc:
            return [Check("llm", "failure", str(exc), _LLM_FIX)]
        how = "detected" if llm.server == "auto" else "configured"
        checks = [
            Check(
                "llm",
                "ok",
                f"{llm.url} answers ({server}, {how}); "
                f"serves {', '.join(str(m.get('id')) for m in models) or 'no models'}",
            ),
            _check_model(config, models),
        ]
        checks.append(_check_structured_outputs(config, client))
        if checks[-1].status == "ok":
            checks.append(_check_action_schema(config, client))
        if checks[-1].status == "ok":
            checks.append(_check_routing(config))
        return checks
    finally:
        client.close()


def _check_routing(config: Config) -> Check:
    """The routing probe (`edge.planning.probe`): the model's first tool on questions whose first tool is
    known, beside the rules'. A model that routes worse writes only the prose, and the service says so."""
    from edge.agent import Agent

    agent = Agent(config)
    try:
        result = agent.routing_probe()
    except LlmUnavailable as exc:
        return Check("llm routing", "failure", f"the probe's requests failed: {exc}", _LLM_FIX)
    finally:
        agent.close()
    if not result.worse:
        return Check("llm routing", "ok", f"the model routes as well as the rules: {result.summary()}")
    return Check(
        "llm routing",
        "warning",
        f"the model plans worse than the rules: {result.summary()}; "
        + "; ".join(result.misses[:3])
        + ". The service runs the rules' steps and asks the model only for the answer's prose (/healthz: planning prose)",
        "use a larger model (docs/deploy-cpu-only.md), or set llm.planning = prose to say so in the config",
    )


def _check_action_schema(config: Config, client: ChatClient) -> Check:
    """The server compiles the run's own decoding schema (a grammar it cannot build is an HTTP error or
    a dead server, found here rather than in a technician's run)."""
    from edge.agent import build_registry
    from edge.llm.action_schema import decoding_schema

    registry = build_registry(config)
    try:
        schema = decoding_schema(registry.action_schema(), config.devices)
    finally:
        registry.close()
    started = time.perf_counter()
    try:
        client.chat(_PROBE_MESSAGES, schema)
    except LlmUnavailable as exc:
        return Check(
            "llm action schema",
            "failure",
            f"the server did not take the action schema as a constraint: {exc}",
            "run `scripts/bench_llm.py --url URL` against it and report the server's log; "
            "llm.structured_outputs = none runs unconstrained (every reply is still validated)",
        )
    return Check(
        "llm action schema",
        "ok",
        f"the server compiles the action schema ({len(json.dumps(schema))} bytes) "
        f"in {(time.perf_counter() - started) * 1000:.0f} ms",
    )


def _check_model(config: Config, models: list[dict[str, Any]]) -> Check:
    llm = config.llm
    served = {str(m.get("id")): m for m in models}
    entry = served.get(llm.model)
    if entry is None:
        return Check(
            "llm model",
            "failure",
            f"pinned {llm.model!r}, but the server serves {', '.join(served) or 'nothing'}",
            "serve the pinned model (`vllm serve ... --served-model-name` from the systemd environment file) "
            "or pin what is served in llm.model / FIXLOOP_LLM_MODEL, after running `fixloop eval` against it",
        )
    notes = []
    limit = entry.get("max_model_len")
    if isinstance(limit, int) and limit < config.loop.max_tokens:
        return Check(
            "llm model",
            "failure",
            f"{llm.model}: max_model_len {limit} is below the loop's token budget {config.loop.max_tokens}",
            "start vLLM with --max-model-len at least loop.max_tokens",
        )
    if llm.revision:
        reported = " ".join(str(entry.get(key) or "") for key in ("revision", "root", "parent"))
        if llm.revision not in reported:
            where = (
                f"the server reports {reported.strip()!r}"
                if reported.strip()
                else "the server does not report a revision"
            )
            return Check(
                "llm model",
                "warning",
                f"{llm.model}: pinned revision {llm.revision} not confirmed; {where}",
                "serve the model from the pinned snapshot (`vllm serve <path>/snapshots/<revision>` or "
                "`--revision`), so /v1/models names it",
            )
        notes.append(f"revision {llm.revision}")
    if isinstance(limit, int):
        notes.append(f"max_model_len {limit}")
    return Check("llm model", "ok", f"{llm.model} is served" + (f" ({', '.join(notes)})" if notes else ""))


def _check_structured_outputs(config: Config, client: ChatClient) -> Check:
    mode = config.llm.structured_outputs
    if mode == "none":
        return Check(
            "llm structured outputs",
            "warning",
            "disabled (llm.structured_outputs = none): replies are not constrained to the action schema",
            "set llm.structured_outputs to the form the server supports",
        )
    started = time.perf_counter()
    try:
        completion = client.chat(_PROBE_MESSAGES, _PROBE_SCHEMA)
    except LlmUnavailable as exc:
        return Check("llm structured outputs", "failure", f"the probe request failed: {exc}", _LLM_FIX)
    elapsed_ms = (time.perf_counter() - started) * 1000
    try:
        reply = json.loads(completion.text)
    except json.JSONDecodeError:
        reply = None
    if reply == {"status": "ok"}:
        return Check("llm structured outputs", "ok", f"honoured ({mode}); probe answered in {elapsed_ms:.0f} ms")
    return Check(
        "llm structured outputs",
        "failure",
        f"the server ({client.dialect.name}) ignored the JSON Schema sent as {mode!r}: "
        f"it replied {completion.text[:80]!r}",
        "set llm.server to the server that answers (vllm, llama-server, llama-cpp-python, openai); for vLLM "
        "llm.structured_outputs picks the form: structured_outputs (>= 0.12), guided_json (older) or response_format",
    )
