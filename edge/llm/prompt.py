"""The prompt, built prefix-stable for the servers' prefix caches, and small enough for small contexts.

It keeps the seed's elements (role, tool trigger rules, the numbered tool list, a fill-in template, an
example of a failed call) in under 1,500 tokens at step 1 on the demo plant (as SmolLM2 counts), so a
model with a 2,048-token context still has room for the run (`fixloop tokens` and `scripts/bench_llm.py` report it).

Everything constant (role, rules, tool list, format, examples) comes first
and is byte-identical across steps, sessions and users; the question and
then each step are appended, never inserted, so every request's prompt
starts with the previous request's prompt.
"""

from __future__ import annotations

import json

from tools.plant import DeviceConfig
from tools.registry import ToolRegistry

ROLE = (
    "You are fixloop, the maintenance assistant of a production line. Answer the technician at a faulty "
    "machine only from what your tools return. Never invent a meaning, cause, value, safety rule or order."
)

RULES = """Rules:
1. A fault code (like E102, F03, 6065, ALARM:1) -> search_maintenance_manual_by_fault_code with fault_code.
2. A symptom ("the motor is hot", "电机过热") -> the same tool with query.
3. A value, "now", "current", "现在" -> read_plc_sensor_value with a sensor id from the plant list.
4. "work order", "工单" -> generate_work_order, once, after the manual.
5. not_found or error: follow the "suggestion"; never repeat a call.
6. is_outlier: distrust the value. cache_fallback: give its age.
7. Final answer: the manual's steps (manual, page), readings with unit, the order id; in their words
   and the question's language, nothing of your own."""

FORMAT = """Reply with one JSON object, filled in like this:
{"thought": "<why, one sentence>", "action": "<tool name from the list>", "args": {<arguments>}}
{"thought": "<why>", "final_answer": "<answer>", "evidence": ["<observation id>", ...]}
Each tool call is answered by "Observation: {...}"."""

EXAMPLES = """The examples use a made-up machine, mixer-9: its codes, manuals and values are not this plant's.

Example 1
Question: Mixer-9 shows M214, what should I do?
Device: mixer-9
{"thought": "A code: search the manual.", "action": "search_maintenance_manual_by_fault_code", "args": {"fault_code": "M214", "device_id": "mixer-9"}}
Observation: {"id": "obs-1", "status": "ok", "content": [{"kind": "ref", "fault_code": "M214", "title": "Agitator motor over-temperature", "manual": "mx900_en.pdf", "page": 27}, {"kind": "step", "text": "Check the cooling water flow (sensor cooling_flow)."}]}
{"thought": "Read the flow it names.", "action": "read_plc_sensor_value", "args": {"device_id": "mixer-9", "sensor": "cooling_flow"}}
Observation: {"id": "obs-2", "status": "ok", "content": [{"sensor": "cooling_flow", "value": 4.2, "unit": "l/min", "source": "live"}]}
{"thought": "Done.", "final_answer": "M214: Agitator motor over-temperature (mx900_en.pdf, p. 27). 1. Check the cooling water flow: 4.2 l/min (live).", "evidence": ["obs-1", "obs-2"]}

Example 2 (a failed call)
Question: What is the bowl temperature now?
Device: mixer-9
{"thought": "A value.", "action": "read_plc_sensor_value", "args": {"device_id": "mixer-9", "sensor": "bowl temp"}}
Observation: {"id": "obs-1", "status": "error", "error_code": "unknown_sensor", "content": [{"text": "mixer-9 has no sensor 'bowl temp'."}], "suggestion": "Use bowl_temp."}
{"thought": "Use the suggested id.", "action": "read_plc_sensor_value", "args": {"device_id": "mixer-9", "sensor": "bowl_temp"}}"""


def system_prompt(registry: ToolRegistry, devices: dict[str, DeviceConfig]) -> str:
    return "\n\n".join(
        [ROLE, RULES, "Tools:\n" + registry.prompt_tool_list(), plant_section(devices), FORMAT, EXAMPLES]
    )


def plant_section(devices: dict[str, DeviceConfig]) -> str:
    """The plant's devices and their exact sensor ids, in config order: the same bytes in every request."""
    lines = ["Plant devices and their sensor ids (use these ids exactly):"]
    for device_id, device in devices.items():
        sensors = ", ".join(
            f"{sensor_id} ({sensor.unit})" if sensor.unit else sensor_id for sensor_id, sensor in device.sensors.items()
        )
        lines.append(f"- {device_id} ({device.name}, {device.vendor} {device.model}): {sensors}")
    return "\n".join(lines)


def question_message(
    question: str, device_id: str | None, session_summary: list[str], devices: list[str], from_session: bool = False
) -> str:
    lines = [f"Question: {question}"]
    if device_id:
        lines.append(f"Device: {device_id}" + (" (from earlier in this session)" if from_session else ""))
    else:
        lines.append(f"Device: not given (known devices: {', '.join(devices)})")
    if session_summary:
        lines.append("Earlier in this session:")
        lines.extend(f"- {line}" for line in session_summary)
    return "\n".join(lines)


def observation_message(rendered_observation: str) -> str:
    return f"Observation: {rendered_observation}"


def format_error_message(error: str) -> str:
    return f'Observation: {{"status": "error", "error_code": "format_error", "content": [{{"kind": "text", "text": {json.dumps(error)}}}], "suggestion": "Reply with exactly one JSON object as in the format."}}'


def shared_prefix_chars(previous: str, current: str) -> int:
    if current.startswith(previous):  # the normal case: the prompt only grew
        return len(previous)
    limit = min(len(previous), len(current))
    i = 0
    while i < limit and previous[i] == current[i]:
        i += 1
    return i
