"""One TOML file plus environment overrides.

Order: the embedded demo config (or `FIXLOOP_CONFIG` / `--config`), then
`FIXLOOP_LLM_URL`, `FIXLOOP_LLM_MODEL`, `FIXLOOP_STATE_DIR`, then any
`FIXLOOP__SECTION__KEY=value` (value parsed as TOML when it can be, e.g.
`FIXLOOP__LOOP__MAX_STEPS=8`).
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from edge.llm.profiles import BUILT_IN_PROFILES, ModelProfile
from edge.llm.servers import ServerName
from knowledge.config import KnowledgeConfig
from tools.plant import DeviceConfig, bind_device_ids
from tools.plc.config import PlcConfig
from tools.work_orders.config import MesConfig, WorkOrderConfig

_DEMO_CONFIG = "demo.toml"
# The source of a config loaded without a file: the demo plant shipped inside the package.
DEMO_SOURCE = "embedded demo config"


class ConfigError(ValueError):
    """A config problem, phrased for the operator who has to fix the file."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


PlanningMode = Literal["rules_first", "prose", "model"]


class LlmConfig(Strict):
    # No URL: the rules planner answers (degraded mode).
    url: str | None = None
    model: str = "Qwen/Qwen2-7B-Instruct-AWQ"
    revision: str | None = None
    api_key: str | None = None
    # Which server answers at `url` (its request shape: edge/llm/servers/); "auto" asks its /models list.
    server: ServerName = "auto"
    # The budgets that suit the model (edge/llm/profiles.py); keys set here or in [loop] win over it.
    profile: str = "gpu-7b"
    profiles: dict[str, ModelProfile] = Field(default_factory=dict)
    # The most one request may take (default: the profile's); it never outlives the run's wall budget.
    timeout_s: float = Field(default=2.5, gt=0)
    # The longest reply of one step (default: the profile's); a reply cut there is a format error.
    max_tokens_per_step: int = Field(default=640, gt=0)
    # How constrained decoding is requested: "auto" is the server's own form; vLLM also takes the portable
    # OpenAI form (response_format) or its pre-0.12 guided_json; "none" turns it off.
    structured_outputs: Literal["auto", "structured_outputs", "response_format", "guided_json", "none"] = "auto"
    # Who decides a run's steps (edge/planning/): "rules_first" (the rules' certain steps without a round
    # trip, the model for the rest and the answer's prose), "prose" (the rules take every step, the model
    # writes the prose) or "model" (the model plans every step: for measuring a model's own planning).
    planning: PlanningMode = "rules_first"
    # Before the service says ready, ask the model a few questions with known first tools; one that routes
    # worse than the rules gets only the prose to write (`fixloop doctor` runs the same probe).
    routing_probe: bool = True
    # Circuit breaker: after this many failed or timed-out requests in a row, runs go straight to the
    # rules planner for breaker_open_s seconds; then one run probes the server.
    breaker_failures: int = Field(default=3, ge=1)
    breaker_open_s: float = Field(default=30.0, gt=0)


class LoopConfig(Strict):
    # The run's budgets; with a language model configured its profile sets those not set here.
    max_steps: int = Field(default=6, ge=1)
    max_tokens: int = Field(default=4096, ge=1)
    max_wall_s: float = Field(default=3.0, gt=0)
    # What the rules planner gets on top when it takes a run over from the model: its tool calls take
    # milliseconds, and a run the model got nowhere with still deserves the answer it can give.
    handover_steps: int = Field(default=4, ge=1)
    handover_wall_s: float = Field(default=3.0, gt=0)
    # Unreadable LLM replies in a row tolerated; one more hands the run to the rules planner.
    max_format_errors: int = Field(default=2, ge=0)
    observation_max_chars: int = Field(default=1800, ge=200)
    # The longest final answer shown (cut at a line or word, then verified as cut) and the longest raw
    # LLM reply kept in the run record and replayed in the prompt. An answer to a fault quotes the manual's
    # hazard statements and lists the plant's lock-out steps before the manual's steps and the causes:
    # about 2,500 characters for the demo's E102, and a cut must never take the work order off its end.
    answer_max_chars: int = Field(default=4000, ge=200)
    raw_reply_max_chars: int = Field(default=4000, ge=200)


class ServiceConfig(Strict):
    host: str = "127.0.0.1"
    port: int = 8080
    technician_tokens: list[str] = Field(default_factory=list)
    # Shift leads and planners: everything a technician token may do, and confirming a fix a technician
    # reported in feedback (until then an unverified report, never evidence). Empty: only the CLI confirms.
    supervisor_tokens: list[str] = Field(default_factory=list)
    admin_token: str | None = None
    run_store_file: str = "runs.sqlite"
    # Runs executing at once (each holds a worker thread); more wait for a free worker.
    max_concurrent_runs: int = Field(default=32, ge=1)
    # MES alarm runs at once; one more is refused with 503 + Retry-After (the MES retries) rather than
    # queued, so an alarm storm cannot take every run worker from the technicians.
    max_concurrent_alarms: int = Field(default=8, ge=1)
    # Request bodies, refused with 413 while they stream in: a question is at most 2,000 characters,
    # an MES alarm may carry its vendor's extra fields.
    max_body_bytes: int = Field(default=64 * 1024, ge=4096)
    max_alarm_body_bytes: int = Field(default=256 * 1024, ge=4096)
    # Slow clients: a request head (request line and headers) must arrive whole within this time of the
    # connection opening or of the previous response; idle keep-alive connections close sooner.
    header_timeout_s: float = Field(default=10.0, gt=0, le=300)
    keep_alive_s: int = Field(default=5, ge=1, le=300)
    # Open client connections; past it the longest-waiting connection without a request in progress is
    # dropped, so slow sockets cannot use up the file descriptors nor lock out a real request.
    max_connections: int = Field(default=1000, ge=16)

    @model_validator(mode="after")
    def _alarms_within_runs(self) -> ServiceConfig:
        if self.max_concurrent_alarms > self.max_concurrent_runs:
            raise ValueError(
                f"max_concurrent_alarms ({self.max_concurrent_alarms}) exceeds max_concurrent_runs "
                f"({self.max_concurrent_runs}): alarm runs take their workers from that pool"
            )
        return self


class McpConfig(Strict):
    # Streamable HTTP sessions at /mcp that one technician token holds open at once; one more is refused
    # with 429 until the client deletes one (DELETE /mcp) or one idles out, so one token cannot fill memory.
    max_sessions_per_token: int = Field(default=8, ge=1)
    # A session with no request in flight for this long is ended and forgotten (its id then answers 404).
    session_idle_timeout_s: float = Field(default=900.0, gt=0)


class TelemetryConfig(Strict):
    # The plant's OpenTelemetry collector, OTLP/HTTP (e.g. http://otel.plant.lan:4318; /v1/traces is added unless
    # the URL ends with it): each finished run goes there as a trace (docs/fleet.md). Unset: no trace leaves the box.
    otlp_endpoint: str | None = None
    # The box as the traces name it (resource attribute service.instance.id); default: its host name.
    box: str | None = None
    # Questions, answers, thoughts and tool arguments in the spans; off: ids, codes, counts and timings only.
    include_text: bool = False
    # The most one export may take, retries included, and the most closing the agent waits for the last spans.
    export_timeout_s: float = Field(default=3.0, gt=0, le=60)
    # Spans waiting for the collector; a run whose spans would not fit is dropped whole and counted, never waited for.
    max_queue: int = Field(default=2048, ge=64)

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL of an OTLP/HTTP receiver, got {value!r}")
        return value


class Config(Strict):
    state_dir: str = "var"
    llm: LlmConfig = Field(default_factory=LlmConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)
    plc: PlcConfig = Field(default_factory=PlcConfig)
    work_orders: WorkOrderConfig = Field(default_factory=WorkOrderConfig)
    mes: MesConfig = Field(default_factory=MesConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    devices: dict[str, DeviceConfig] = Field(default_factory=dict)
    # Set by `load_config`: the file the config came from, or DEMO_SOURCE.
    _source: str | None = PrivateAttr(default=None)

    @property
    def source(self) -> str:
        """Where this config came from, for messages: its file, or the embedded demo config."""
        return self._source or "config built in code"

    @property
    def is_embedded_demo(self) -> bool:
        """The demo plant shipped with fixloop (environment overrides included): its manuals are
        fixloop's own, so whatever needs them may build them; a plant's own config never does."""
        return self._source == DEMO_SOURCE

    @model_validator(mode="after")
    def _apply_model_profile(self) -> Config:
        if not self.llm.url:
            return self
        profile = self.model_profile
        for section, key, value in (
            (self.loop, "max_steps", profile.max_steps),
            (self.loop, "max_tokens", profile.context_tokens),
            (self.loop, "max_wall_s", profile.max_wall_s),
            (self.llm, "timeout_s", profile.request_timeout_s),
            (self.llm, "max_tokens_per_step", profile.max_tokens_per_step),
        ):
            if key not in section.model_fields_set:
                # Not through setattr: that would mark the key as set by the operator.
                section.__dict__[key] = value
        return self

    @property
    def model_profile(self) -> ModelProfile:
        profiles = {**BUILT_IN_PROFILES, **self.llm.profiles}
        try:
            return profiles[self.llm.profile]
        except KeyError:
            raise ValueError(
                f"llm.profile {self.llm.profile!r} is neither built in nor in [llm.profiles] "
                f"(known: {', '.join(sorted(profiles))})"
            ) from None

    @field_validator("devices")
    @classmethod
    def _bind_ids(cls, devices: dict[str, DeviceConfig]) -> dict[str, DeviceConfig]:
        return bind_device_ids(devices)

    def state_path(self, name: str) -> Path:
        """A file in the state directory (absolute names are kept as they are). Only the path: whatever
        writes the file creates its directory, so a check or a read never leaves directories behind."""
        path = Path(name)
        return path if path.is_absolute() else Path(self.state_dir) / path


def load_config(path: str | Path | None = None, env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ if env is None else env)
    path = path or env.get("FIXLOOP_CONFIG")
    if path:
        try:
            raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        source = str(path)
    else:
        raw = tomllib.loads(resources.files("edge").joinpath(_DEMO_CONFIG).read_text(encoding="utf-8"))
        source = DEMO_SOURCE
    _apply_env(raw, env)
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    config._source = source
    return config


def with_model(config: Config, url: str, model: str, profile: str) -> Config:
    """`config` planned by the model at `url` under `profile`, its budgets derived as at load time (the
    keys the operator set still win)."""
    raw = config.model_dump(exclude_unset=True)
    raw.setdefault("llm", {}).update(url=url, model=model, profile=profile)
    try:
        fresh = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, config.source)) from None
    fresh._source = config._source
    return fresh


def _apply_env(raw: dict[str, Any], env: dict[str, str]) -> None:
    named = {
        "FIXLOOP_LLM_URL": ("llm", "url"),
        "FIXLOOP_LLM_MODEL": ("llm", "model"),
        "FIXLOOP_STATE_DIR": ("state_dir",),
    }
    for var, keys in named.items():
        if env.get(var) is not None:
            _set(raw, keys, env[var] or None)
    for var, value in sorted(env.items()):
        if var.startswith("FIXLOOP__"):
            keys = tuple(part.lower() for part in var[len("FIXLOOP__") :].split("__"))
            _set(raw, keys, _parse_value(value))


def _set(raw: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    node = raw
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def _parse_value(value: str) -> Any:
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def _describe(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config ({source}):"]
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        lines.append(f"  {where}: {error['msg']}")
    return "\n".join(lines)
