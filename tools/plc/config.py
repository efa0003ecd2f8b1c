"""Config section `[plc]`: read budget, cache, poller and breaker policy."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class PlcConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Hard limit per live read, connect and waiting for the shared connection included.
    read_budget_ms: int = Field(default=800, gt=0)
    poll_interval_s: float = Field(default=30.0, gt=0)
    # A cached value older than this is withheld (BadNoCommunication), not served.
    cache_max_age_s: float = Field(default=3600.0, gt=0)
    # Consecutive communication failures (timeouts, refused connections) that open a breaker.
    breaker_threshold: int = Field(default=3, ge=1)
    # An open breaker first skips the network for `breaker_first_open_s`, doubling after each failed
    # probe up to `breaker_open_s` (the first is capped by it too). The poller probes every cycle
    # regardless, so a PLC that is back answers live within one poll interval.
    breaker_first_open_s: float = Field(default=10.0, gt=0)
    breaker_open_s: float = Field(default=1800.0, gt=0)
    # Readings and breaker state, shared by the service and the poller (relative to state_dir).
    cache_file: str = "plc_cache.sqlite"
    # Every reading (poll or tool read) is kept this long as the sensor's history; the trend in an
    # answer reads its last hour, so a shorter history would only ever show part of it.
    history_retention_s: float = Field(default=86400.0, ge=3600)
    # A hard limit per sensor whatever the read rate (an agent reading in a loop, a short poll interval):
    # the oldest rows go first.
    history_max_rows: int = Field(default=10000, ge=1)

    @model_validator(mode="after")
    def _history_fits_its_cap(self) -> PlcConfig:
        needed = int(self.history_retention_s / self.poll_interval_s) + 1
        if self.history_max_rows < needed:
            raise ValueError(
                f"history_max_rows ({self.history_max_rows}) cannot hold history_retention_s "
                f"({self.history_retention_s:g} s) of readings every poll_interval_s ({self.poll_interval_s:g} s), "
                f"which needs {needed} rows per sensor: raise history_max_rows or shorten history_retention_s"
            )
        return self

    def breaker_window_s(self, failures: int) -> float:
        """How long a breaker with this many consecutive failures stays open before the next probe."""
        doublings = min(max(0, failures - self.breaker_threshold), 32)
        return min(self.breaker_open_s, self.breaker_first_open_s * 2.0**doublings)
