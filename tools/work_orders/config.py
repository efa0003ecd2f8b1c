"""Config sections `[work_orders]` and `[mes]`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WorkOrderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Tablet flow: park new orders until a technician confirms them.
    require_confirmation: bool = False
    store_file: str = "work_orders.sqlite"


class MesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Outbound deliveries; no URL means orders stay in the outbox until one is set.
    url: str | None = None
    # Standard Webhooks secrets ("whsec_..."); several are accepted while rotating.
    secrets: list[str] = Field(default_factory=list)
