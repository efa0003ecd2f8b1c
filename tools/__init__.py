"""The tools the agent calls: the tool contract, the registry, the observation envelope and the plant model.

The tools themselves live in the subpackages `manual_search`, `plc` and `work_orders`, each with its
own API. The plant's questions (`require`, `scope`, `endpoints`, `repoint`) are asked of `tools.plant`.
The names here are light (pydantic and the standard library), so they are imported eagerly.
"""

from tools.contract import Actor, Item, ItemKind, Status, Tool, ToolContext, ToolOutput
from tools.observation import TRUNCATION_MARKER, Observation, cut_middle, now_ms
from tools.plant import (
    DeviceConfig,
    PlcEndpoint,
    SensorConfig,
    UnknownDevice,
    bind_device_ids,
    find_device,
    normalize_name,
    unknown_device,
)
from tools.registry import ToolRegistry

__all__ = [
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
]
