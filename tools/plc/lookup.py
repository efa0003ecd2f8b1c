"""Resolve what the model wrote to a configured device and sensor id.

Ids, labels and synonyms match case-insensitively, in English or Chinese;
`press 3`, `Press-3` and `press_3` are the same name. Misses come back with
the closest candidates so the model can correct itself in one step.
"""

from __future__ import annotations

import difflib

from tools.plant import DeviceConfig
from tools.plant import normalize_name as normalize


def _names(entry_id: str, *others: str, synonyms: list[str]) -> set[str]:
    return {normalize(n) for n in (entry_id, *others, *synonyms) if n}


def find_sensor(device: DeviceConfig, name: str) -> str | None:
    wanted = normalize(name)
    for sensor_id, sensor in device.sensors.items():
        if wanted in _names(sensor_id, sensor.label, sensor.label_zh, synonyms=sensor.synonyms):
            return sensor_id
    return None


def closest_sensor(device: DeviceConfig, name: str) -> str | None:
    by_name = {
        candidate: sensor_id
        for sensor_id, sensor in device.sensors.items()
        for candidate in _names(sensor_id, sensor.label, sensor.label_zh, synonyms=sensor.synonyms)
    }
    match = difflib.get_close_matches(normalize(name), list(by_name), n=1, cutoff=0.0)
    return by_name[match[0]] if match else None
