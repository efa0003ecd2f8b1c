"""The action schema as the servers' grammar compilers can hold it, and the check every reply gets.

The registry's schema (`ToolRegistry.action_schema`) is the whole contract, length limits included.
Grammar compilers choke on part of it: llama.cpp expands `maxLength` into one rule per character (a
2,000-character summary killed llama-cpp-python's server), and patterns, formats and bounds are
supported unevenly. So decoding is constrained by a schema without them, plus what the plant fixes:
a `device_id` is one of its devices and a `sensor` one of their sensors, which no grammar-free model
gets right on its own. What the grammar cannot hold is checked after the reply: the envelope here (a
reply that is not one tool call or one final answer is a format error), the arguments by the registry
against the tool's full schema (an invalid argument is an observation that says what to fix).
"""

from __future__ import annotations

from typing import Any

import jsonschema

from tools.plant import DeviceConfig

__all__ = ["ReplyEnvelope", "decoding_schema"]

# Keywords with no grammar in one or more of the compilers, or no constraint at all (annotations).
_UNCOMPILABLE = frozenset(
    {
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "description",
        "examples",
        "default",
        "title",
    }
)


def decoding_schema(action_schema: dict[str, Any], devices: dict[str, DeviceConfig]) -> dict[str, Any]:
    """`action_schema` without the keywords grammars cannot hold, the plant's ids as enums."""
    plant_ids = {
        "device_id": sorted(devices),
        "sensor": sorted({sensor for device in devices.values() for sensor in device.sensors}),
    }
    return _simplify(action_schema, plant_ids)


class ReplyEnvelope:
    """The shape every reply must have, built once from the action schema and checked on every reply."""

    def __init__(self, action_schema: dict[str, Any]):
        self._validator = jsonschema.Draft202012Validator(_envelope(action_schema))

    def errors(self, reply: dict[str, Any]) -> list[str]:
        """What makes `reply` neither one tool call nor one final answer; the arguments are the registry's."""
        return [_describe(error) for error in sorted(self._validator.iter_errors(reply), key=str)]


def _simplify(node: Any, plant_ids: dict[str, list[str]]) -> Any:
    if isinstance(node, list):
        return [_simplify(item, plant_ids) for item in node]
    if not isinstance(node, dict):
        return node
    simple = {key: _simplify(value, plant_ids) for key, value in node.items() if key not in _UNCOMPILABLE}
    properties = simple.get("properties")
    if isinstance(properties, dict):
        for name, ids in plant_ids.items():
            if name in properties and ids:
                properties[name] = _restrict_strings(properties[name], ids)
    return simple


def _restrict_strings(spec: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """A string argument (or string-or-null) limited to `ids`."""
    if "anyOf" in spec:
        return {**spec, "anyOf": [_restrict_strings(option, ids) for option in spec["anyOf"]]}
    if spec.get("type") == "string":
        return {"type": "string", "enum": ids}
    return spec


def _envelope(action_schema: dict[str, Any]) -> dict[str, Any]:
    """One tool-call shape for every tool and the final answer: a tool name that is not in the list and
    the arguments get the registry's observation, which names the closest tool or the field to fix."""
    branches: list[dict[str, Any]] = []
    for branch in action_schema["anyOf"]:
        properties = dict(branch["properties"])
        if "args" in properties:
            properties.update(action={"type": "string"}, args={"type": "object"})
        shaped = {**branch, "properties": properties}
        if shaped not in branches:
            branches.append(shaped)
    return {"anyOf": branches}


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "anyOf":
        return (
            'The reply is neither a tool call {"thought", "action", "args"} with a tool name from the list '
            'nor a final answer {"thought", "final_answer", "evidence"}.'
        )
    where = "/".join(str(part) for part in error.absolute_path) or "the reply"
    return f"{where}: {error.message}"
