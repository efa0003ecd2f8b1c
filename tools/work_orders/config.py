"""Config sections `[work_orders]` and `[mes]`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.work_orders.signing import decode_secret


class WorkOrderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Tablet flow: park new orders until a technician confirms them.
    require_confirmation: bool = False
    # Lock-out: an order enters in_progress only with the device's isolation confirmed (who, and the
    # zero-energy reading where the device maps one). On, it is recorded in the store as the plant's rule,
    # binding every process sharing it; off leaves the store's rule as it is (`fixloop work-orders
    # isolation-rule off` turns it off). Without the rule a confirmation is recorded when one is given.
    require_isolation: bool = False
    store_file: str = "work_orders.sqlite"
    # Several workers, the service and the CLI share the file; wait this long for its write lock.
    busy_timeout_ms: int = Field(default=5000, ge=0)


class MesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Outbound deliveries; no URL means orders stay in the outbox until one is set.
    url: str | None = None
    # Standard Webhooks secrets ("whsec_..."); several are accepted while rotating.
    # Outbound messages carry one signature per secret; inbound ones may match any.
    secrets: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=5.0, gt=0)
    # Retry delay doubles from `backoff_base_s` up to `backoff_max_s`, each with jitter.
    backoff_base_s: float = Field(default=2.0, gt=0)
    backoff_max_s: float = Field(default=600.0, gt=0)
    # A row still failing this long after it was queued (or requeued by `fixloop outbox retry`) is marked failed.
    give_up_after_s: float = Field(default=86400.0, gt=0)
    batch_size: int = Field(default=50, ge=1)
    poll_interval_s: float = Field(default=2.0, gt=0)
    # A worker owns a claimed row this long (renewed before each post); if it dies the row becomes due again.
    lease_s: float = Field(default=60.0, gt=0)
    # Inbound alarms: accepted webhook-timestamp skew, and how long replay records are kept.
    tolerance_s: float = Field(default=300.0, gt=0)
    replay_ttl_s: float = Field(default=86400.0, gt=0)

    @field_validator("secrets")
    @classmethod
    def _secrets_decode(cls, secrets: list[str]) -> list[str]:
        for index, secret in enumerate(secrets):
            try:
                decode_secret(secret)
            except ValueError as exc:
                raise ValueError(f"secrets[{index}]: {exc}") from None
        return secrets

    @model_validator(mode="after")
    def _url_needs_secret(self) -> MesConfig:
        if self.url and not self.secrets:
            raise ValueError("mes.url is set but mes.secrets is empty: deliveries must be signed")
        if self.lease_s <= self.timeout_s:
            raise ValueError(
                f"lease_s ({self.lease_s}) must exceed timeout_s ({self.timeout_s}): a row's lease "
                "must outlast its request, or another worker posts it again"
            )
        if self.backoff_base_s > self.backoff_max_s:
            raise ValueError(
                f"backoff_base_s ({self.backoff_base_s}) must not exceed backoff_max_s ({self.backoff_max_s})"
            )
        return self
