"""Past fixes: how a fault was fixed the last times, riding on the work-order tool's observation.

A technician facing a fault that came back wants to know what was found and done before, on this
machine and on machines of the same model; a fault that keeps coming back needs its root cause
found rather than another repair.
"""

from __future__ import annotations

from tools.contract import Item
from tools.plant import DeviceConfig
from tools.work_orders.model import PastFix, ReportedFix
from tools.work_orders.store import WorkOrderStore

# Done orders shown per group (this machine, same-model machines), newest first.
PAST_FIXES = 3
# This many orders for one device and fault within the window make it a root-cause candidate.
RECURRENCE_ORDERS = 3
RECURRENCE_WINDOW_DAYS = 30

# `past_work_order_id` is the record a fix comes from: a closed order, or `FB-<run id>` for a fix a technician
# reported on an answer (`reported_in_run` then names that run). `provenance` says how far it is to be trusted:
# "recorded" (an order closed through the MES or the service, or a report someone confirmed: `confirmed_by`)
# or "unverified_report" (one technician's word, `reported_by` at `reported_at`, that nobody vouched for).
FIX_FIELDS = frozenset(
    {
        "past_work_order_id",
        "reported_in_run",
        "same_device",
        "closed_at",
        "cause",
        "remedy",
        "parts",
        "note",
        "provenance",
        "reported_by",
        "reported_at",
        "confirmed_by",
    }
)
RECURRENCE_FIELDS = frozenset({"recent_orders", "window_days", "root_cause_candidate"})


def same_model(devices: dict[str, DeviceConfig], device_id: str) -> list[str]:
    """The other configured machines of the device's vendor and model (none when its model is not set)."""
    device = devices[device_id]
    if not device.model:
        return []
    return [
        other.id
        for other in devices.values()
        if other.id != device_id and (other.vendor, other.model) == (device.vendor, device.model)
    ]


def history_items(
    store: WorkOrderStore, devices: dict[str, DeviceConfig], device_id: str, fault_code: str, proposed: bool
) -> list[Item]:
    """The recurrence flag, then past fixes on this machine, then on same-model machines. `proposed`: the
    order in hand awaits confirmation, so it is not in the store yet but counts as an occurrence."""
    history = store.fix_history(
        device_id,
        fault_code,
        same_model=same_model(devices, device_id),
        limit=PAST_FIXES,
        window_s=RECURRENCE_WINDOW_DAYS * 86400,
    )
    items: list[Item] = []
    recent = history.recent_orders + int(proposed)
    if recent >= RECURRENCE_ORDERS:
        items.append(
            Item(
                kind="text",
                text=(
                    f"{fault_code} on {device_id}: {recent} work orders in the last {RECURRENCE_WINDOW_DAYS} days; "
                    "a candidate for root-cause analysis rather than another repair."
                ),
                fields={
                    "device_id": device_id,
                    "fault_code": fault_code,
                    "recent_orders": recent,
                    "window_days": RECURRENCE_WINDOW_DAYS,
                    "root_cause_candidate": True,
                },
            )
        )
    items.extend(_fix_item(order, same_device=True) for order in history.same_device)
    items.extend(_fix_item(order, same_device=False) for order in history.same_model)
    return items


def _fix_item(fix: PastFix, same_device: bool) -> Item:
    heading = "Fixed before"
    if isinstance(fix, ReportedFix):
        cause, parts, note = None, [], None
        origin: dict[str, object] = {
            "reported_in_run": fix.run_id,
            "reported_by": fix.closed_by,
            "reported_at": fix.closed_at,
            "provenance": "recorded" if fix.confirmed else "unverified_report",
        }
        how = f"reported by {fix.closed_by} on run {fix.run_id} {fix.closed_at}"
        if fix.confirmed:
            origin["confirmed_by"] = fix.confirmed_by
            how += f", confirmed by {fix.confirmed_by}"
        else:
            heading = "Unverified report, not a recorded fix"
    else:
        how, cause, parts, note = f"closed {fix.closed_at}", fix.cause, [part.label() for part in fix.parts], fix.note
        origin = {"provenance": "recorded"}
    found = (
        "; ".join(f"{label} {value}" for label, value in (("cause", cause), ("remedy", fix.remedy)) if value)
        or "no cause or remedy recorded"
    )
    return Item(
        kind="ref",
        text=f"{heading}: {fix.id} on {fix.device_id}, {how}: {found}.",
        fields={
            "past_work_order_id": fix.id,
            **origin,
            "device_id": fix.device_id,
            "fault_code": fix.fault_code,
            "same_device": same_device,
            "closed_at": fix.closed_at,
            "cause": cause,
            "remedy": fix.remedy,
            "parts": parts,
            "note": note,
        },
    )
