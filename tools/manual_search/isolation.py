"""The plant's lock-out steps for a device, as items of the manual tool's observation.

The answer is built only from observations, so the isolation steps a hands-on remedy needs first
come from here: after the entry's safety statements, before its steps. They are the plant's own
(the device's `isolation` section in the plant config), not the manual's.
"""

from __future__ import annotations

from collections.abc import Sequence

from knowledge.ingest.safety import hands_on
from tools.contract import Item
from tools.plant import DeviceConfig

SOURCE = "plant config"


def isolation_items(device: DeviceConfig | None, steps: Sequence[str], language: str | None) -> list[Item]:
    """The device's isolation steps when the remedy `steps` put hands on the machine; none for a remedy that
    only reads or resets, or a device without an `isolation` section. Each step in `language` (zh or en)
    where the plant wrote it so, else in English."""
    if device is None or device.isolation is None or not hands_on(steps):
        return []
    isolation = device.isolation
    return [
        Item(
            kind="text",
            text=step.in_language(language),
            fields={
                "isolation_step": n,
                "device_id": device.id,
                "energy_sources": list(isolation.energy_sources),
                "source": SOURCE,
            },
        )
        for n, step in enumerate(isolation.steps, 1)
    ]
