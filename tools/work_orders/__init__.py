"""Work orders: the idempotent generator tool, its SQLite store and the signed outbox to the MES.

The names below are the package's API. Each is imported from its module on first use, so importing
`tools.work_orders.config` for the configuration loads neither the store nor the outbox's HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tools.work_orders.config import MesConfig, WorkOrderConfig
    from tools.work_orders.model import (
        ACTIVE_STATUSES,
        CLOSED_STATUSES,
        TRANSITIONS,
        FaultCode,
        Fix,
        FixHistory,
        IllegalTransition,
        OutboxRow,
        Part,
        ReportedFix,
        WorkOrder,
        WorkOrderError,
        WorkOrderNotFound,
    )
    from tools.work_orders.outbox import DeliveryStats, deliver_due, run_worker
    from tools.work_orders.signing import SignatureError, check_headers, decode_secret, signed_headers, verify
    from tools.work_orders.store import WebhookInProgress, WorkOrderStore
    from tools.work_orders.tool import WorkOrderArgs, WorkOrderTool

_EXPORTS = {
    "WorkOrderConfig": "tools.work_orders.config",
    "MesConfig": "tools.work_orders.config",
    "WorkOrderTool": "tools.work_orders.tool",
    "WorkOrderArgs": "tools.work_orders.tool",
    "WorkOrder": "tools.work_orders.model",
    "FaultCode": "tools.work_orders.model",
    "Fix": "tools.work_orders.model",
    "FixHistory": "tools.work_orders.model",
    "Part": "tools.work_orders.model",
    "ReportedFix": "tools.work_orders.model",
    "CLOSED_STATUSES": "tools.work_orders.model",
    "OutboxRow": "tools.work_orders.model",
    "ACTIVE_STATUSES": "tools.work_orders.model",
    "TRANSITIONS": "tools.work_orders.model",
    "WorkOrderError": "tools.work_orders.model",
    "WorkOrderNotFound": "tools.work_orders.model",
    "IllegalTransition": "tools.work_orders.model",
    "WorkOrderStore": "tools.work_orders.store",
    "WebhookInProgress": "tools.work_orders.store",
    "SignatureError": "tools.work_orders.signing",
    "check_headers": "tools.work_orders.signing",
    "decode_secret": "tools.work_orders.signing",
    "signed_headers": "tools.work_orders.signing",
    "verify": "tools.work_orders.signing",
    "DeliveryStats": "tools.work_orders.outbox",
    "deliver_due": "tools.work_orders.outbox",
    "run_worker": "tools.work_orders.outbox",
}

__all__ = [
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
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
