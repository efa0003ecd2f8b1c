"""Config section `[plc]`: read budget, cache, poller and breaker policy."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PlcConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Hard limit per live read, connect and waiting for the shared connection included.
    read_budget_ms: int = Field(default=800, gt=0)
    poll_interval_s: float = Field(default=30.0, gt=0)
    # A cached value older than this is withheld (BadNoCommunication), not served.
    cache_max_age_s: float = Field(default=3600.0, gt=0)
    # Consecutive communication failures (timeouts, refused connections) that open a breaker.
    breaker_threshold: int = Field(default=3, ge=1)
    breaker_open_s: float = Field(default=1800.0, gt=0)
    # Readings and breaker state, shared by the service and the poller (relative to state_dir).
    cache_file: str = "plc_cache.sqlite"
