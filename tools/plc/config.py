"""Config section `[plc]`: read budget, cache, poller and breaker policy."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PlcConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    read_budget_ms: int = Field(default=800, gt=0)
    poll_interval_s: float = Field(default=30.0, gt=0)
    cache_max_age_s: float = Field(default=3600.0, gt=0)
    breaker_threshold: int = Field(default=3, ge=1)
    breaker_open_s: float = Field(default=1800.0, gt=0)
    cache_file: str = "plc_cache.sqlite"
