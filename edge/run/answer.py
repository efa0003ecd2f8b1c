"""Writing an answer from observations only.

Used by the rules planner for its final answer and by the loop when a run
stops on a weak or budget condition: whatever the technician reads comes
from tool output, so every code, value and order id in it is grounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from edge.run.causes import order_causes
from edge.run.record import cap_text
from tools.observation import Observation

_CJK = re.compile(r"[\u3400-\u9fff]")
# A past fix's cause, remedy and parts are each cut to this in an answer.
FIX_TEXT_CHARS = 160

PHRASES = {
    "en": {
        "degraded": "Degraded mode (rules planner, no language model): answer assembled from the tool results.",
        "manual": "{code} — {title} ({where})",
        "manual_page": "Manual page ({where}{ocr}): “{snippet}”",
        "ocr": ", scanned page read by OCR: check the page",
        "where": "{manual}, {version}, p. {page}",
        "scope": "applies to {scope}",
        "steps": "Steps:",
        "isolation": "First isolate {device} ({sources}), as the plant's lock-out says:",
        "safety": "{label} ({where}): “{text}”",
        "signal_danger": "DANGER",
        "signal_warning": "WARNING",
        "signal_caution": "CAUTION",
        "causes_by_evidence": "Probable causes, the likeliest first by this run's evidence:",
        "causes_manual_order": "Probable causes, in the manual's order (nothing in this run points to one):",
        "cause_reading_for": "{label} reads {value} {unit}, {why}",
        "cause_reading_against": "{label} reads {value} {unit}, within its limits",
        "cause_past_fix": "the cause found when {id} was closed ({date})",
        "not_found": "Manual: nothing found for {what}. {suggestion}",
        "reading_live": "{label}: {value} {unit} (live at {time}, {quality})",
        "reading_cache": "{label}: {value} {unit} from cache, read at {time}, {age} old — PLC not reachable ({quality})",
        "reading_bad": "{label}: no usable value — {text}",
        "outlier": "suspect reading, outside {lo}…{hi} {unit}: confirm on site whether the sensor has failed",
        "alarm": "past its {side} alarm limit",
        "trend_rising": "rising, {slope} {unit}/min over the last {window}",
        "trend_falling": "falling, {slope} {unit}/min over the last {window}",
        "trend_steady": "steady over the last {window}",
        "trend_unknown": "too little history for a trend",
        "order_new": "Work order {id} created for {device} / {code} (priority {priority}, status {status}).",
        "order_existing": "Existing work order {id} for {device} / {code} returned (status {status}); no duplicate created.",
        "order_pending": "Work order for {device} / {code} proposed (priority {priority}): confirm to create it.",
        "fix": "Last fix on this machine: {id}, {date} — {what}",
        "fix_other": "Last fix on {device} (same model): {id}, {date} — {what}",
        "fix_cause": "cause: {text}",
        "fix_remedy": "remedy: {text}",
        "fix_parts": "parts: {text}",
        "fix_unrecorded": "no cause or remedy recorded",
        "fix_sep": "; ",
        "root_cause": "{code} on {device}: {count} work orders in {days} days — a candidate for root-cause analysis.",
        "error": "{tool} failed: {text} {suggestion}",
        "missing": "Not checked: {items}.",
        "nothing": "I could not find anything to answer this from.",
        "ask": "Please ask a question: name the machine and the fault code on its screen, or describe what you see.",
        "unknown_device": "Unknown machine: {names}. This plant has {known}.",
        "which_machine": "live readings: which machine? known devices: {known}",
        "which_sensor": "live readings: which value? {device} has {sensors}",
        "which_code": "work order: which fault code does the machine show?",
        "other_machine": "not a code of this machine: check the device and the code on the HMI",
        "unverified": "The language model's answer could not be verified against the tool results and is not "
        "shown; this answer is assembled from the tool results.",
        # The run's trace: the planner's thoughts and the loop's own notes, in the question's language too.
        "thought_code": "Fault code {code}: look it up in the manual first.",
        "thought_symptom": "A symptom without a code: search the manual by description.",
        "thought_read": "Read {sensor} on {device} live.",
        "thought_order": "A work order is asked for and the fault is known.",
        "thought_propose": "A known fault on a known machine: propose a work order for the technician to confirm.",
        "thought_done": "All triggered tools have answered.",
        "stopped_early": "stopped early: {why}",
        "stop_repeated_action": "the same call was about to be repeated",
        "stop_repeated_observation": "a tool kept returning the same result",
        "stop_repeated_call_limit": "the same call was made three times",
        "stop_max_steps": "the step budget ran out",
        "stop_time_budget": "the time budget ran out",
        "stop_takeover": "a technician took over",
        "set_aside": "The language model was set aside: {why}",
        "llm_down": "Language model unavailable ({error})",
        "handover": "{why}; answering in degraded mode with the rules planner.",
        "fallback_format_errors": "its replies could not be read",
        "fallback_empty_reply": "it replied with nothing",
        "fallback_unknown_tool": "it kept calling a tool that does not exist",
        "fallback_answer_rejected": "its final answer could not be verified against the tool results",
        "fallback_token_budget": "the run's token budget is used up",
        "fallback_repeated_calls": "it repeated a call or kept getting the same result",
        "fallback_max_steps": "it used up the run's steps without an answer",
        "fallback_time_budget": "it used up the run's time without an answer",
    },
    "zh": {
        "degraded": "降级模式（规则规划器，无语言模型）：答案由工具结果组成。",
        "manual": "{code} — {title}（{where}）",
        "manual_page": "手册页面（{where}{ocr}）：“{snippet}”",
        "ocr": "，扫描页经 OCR 识别，请核对原页",
        "where": "{manual}，{version}，第 {page} 页",
        "scope": "适用于 {scope}",
        "steps": "处理步骤：",
        "isolation": "先按工厂的上锁挂牌程序隔离 {device}：",
        "safety": "{label}（{where}）：“{text}”",
        "signal_danger": "危险",
        "signal_warning": "警告",
        "signal_caution": "注意",
        "causes_by_evidence": "可能原因（按本次读数和记录，可能性大的在前）：",
        "causes_manual_order": "可能原因（按手册顺序；本次没有证据指向其中某一项）：",
        "cause_reading_for": "{label}读数为 {value} {unit}，{why}",
        "cause_reading_against": "{label}读数为 {value} {unit}，在限值以内",
        "cause_past_fix": "{id} 关闭时（{date}）记录的原因",
        # Tools write their messages in English: a Chinese answer says what they mean in its own words.
        "not_found": "手册中未找到相关条目：请核对 HMI 上的故障代码，或换一种说法描述现象。",
        "reading_live": "{label}：{value} {unit}（实时，{time}，{quality}）",
        "reading_cache": "{label}：{value} {unit}，来自缓存，读取于 {time}（{age} 前）— PLC 无法连接（{quality}）",
        "reading_bad": "{label}：无可用数值，请现场查看。",
        "outlier": "读数可疑，超出 {lo}…{hi} {unit}：请现场确认传感器是否故障",
        "alarm": "已超过{side}报警限值",
        "trend_rising": "近 {window} 持续上升（每分钟 {slope} {unit}）",
        "trend_falling": "近 {window} 持续下降（每分钟 {slope} {unit}）",
        "trend_steady": "近 {window} 保持平稳",
        "trend_unknown": "历史数据不足，无法判断趋势",
        "order_new": "已为 {device} / {code} 创建工单 {id}（优先级 {priority}，状态 {status}）。",
        "order_existing": "{device} / {code} 已有工单 {id}（状态 {status}），未重复创建。",
        "order_pending": "建议为 {device} / {code} 创建工单（优先级 {priority}）：请确认后创建。",
        "fix": "本机上次处理：{id}，{date} — {what}",
        "fix_other": "同型号设备 {device} 上次处理：{id}，{date} — {what}",
        "fix_cause": "原因：{text}",
        "fix_remedy": "措施：{text}",
        "fix_parts": "更换部件：{text}",
        "fix_unrecorded": "未记录原因和措施",
        "fix_sep": "；",
        "root_cause": "{device} / {code}：{days} 天内已有 {count} 张工单，建议进行根本原因分析。",
        "error": "{tool} 调用失败（{error_code}）。",
        "missing": "未能检查：{items}。",
        "nothing": "没有找到可用于回答的信息。",
        "ask": "请提出问题：说明是哪台设备、屏幕上显示的故障代码，或描述看到的现象。",
        "unknown_device": "未知设备：{names}。本厂设备：{known}。",
        "which_machine": "实时读数：是哪台设备？已知设备：{known}",
        "which_sensor": "实时读数：要看哪个数值？{device} 有：{sensors}",
        "which_code": "工单：设备上显示的是哪个故障代码？",
        "other_machine": "不是本机的故障代码，请核对设备和 HMI 上的代码",
        "unverified": "语言模型的答案无法用工具结果核实，未予显示；以下答案由工具结果组成。",
        "thought_code": "故障代码 {code}：先查维修手册。",
        "thought_symptom": "有现象、无故障代码：按描述检索维修手册。",
        "thought_read": "实时读取 {device} 的{sensor}。",
        "thought_order": "已要求开工单，且故障已知。",
        "thought_propose": "本机的已知故障：建议创建工单，由技术员确认。",
        "thought_done": "所需工具均已返回结果。",
        "stopped_early": "提前结束：{why}",
        "stop_repeated_action": "即将重复同一调用",
        "stop_repeated_observation": "工具反复返回相同结果",
        "stop_repeated_call_limit": "同一调用已执行三次",
        "stop_max_steps": "步数预算已用完",
        "stop_time_budget": "时间预算已用完",
        "stop_takeover": "技术员已接管",
        "set_aside": "已停用语言模型：{why}",
        "llm_down": "语言模型不可用（{error}）",
        "handover": "{why}；改由规则规划器以降级模式回答。",
        "fallback_format_errors": "其回复无法解析",
        "fallback_empty_reply": "其回复为空",
        "fallback_unknown_tool": "其反复调用不存在的工具",
        "fallback_answer_rejected": "其最终答案无法用工具结果核实",
        "fallback_token_budget": "本次运行的 token 预算已用完",
        "fallback_repeated_calls": "其重复调用或反复得到相同结果",
        "fallback_max_steps": "其用完了本次运行的步数仍未给出答案",
        "fallback_time_budget": "其用完了本次运行的时间仍未给出答案",
    },
}


def language_of(text: str) -> str:
    """Any Chinese makes a question or an answer Chinese: technicians write codes, file names and
    quality names into Chinese sentences. (Manual text is judged by its share of CJK instead,
    `knowledge.text.language`.)"""
    return "zh" if _CJK.search(text) else "en"


# Calls a tool refused as malformed: after a hand-over these are the model's mistakes, not facts about
# the plant, and a technician must not read a list of them (the rules planner builds its calls from the
# plant's own ids and never makes them).
_CALLER_MISTAKES = frozenset({"invalid_arguments", "unknown_tool", "unknown_sensor", "unknown_device"})


def compose_answer(
    question: str,
    observations: list[Observation],
    degraded: bool,
    missing: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> str:
    """`notes` are what the planner tells the technician instead of a tool result (ask a question,
    an unknown machine), in the question's language (`PHRASES`)."""
    words = PHRASES[language_of(question)]
    parts: list[str] = [words["degraded"]] if degraded else []
    observations = [obs for obs in observations if obs.error_code not in _CALLER_MISTAKES]
    latest = _latest_per_call(observations)
    # Hazards before anything a technician might start doing: each statement once, quoted, with its page.
    safety = (item for obs in latest for item in obs.content if item.kind == "safety")
    parts.extend(dict.fromkeys(_safety_line(item.fields, item.text, words) for item in safety))
    for obs in latest:
        parts.extend(_describe(obs, words, language_of(question), observations))
    parts.extend(notes)
    if not observations and not notes:
        parts.append(words["nothing"])
    if missing:
        parts.append(words["missing"].format(items="; ".join(missing)))
    return "\n".join(parts)


def supporting_ids(observations: list[Observation]) -> list[str]:
    return [obs.id for obs in observations if obs.status in ("ok", "degraded")]


def _latest_per_call(observations: list[Observation]) -> list[Observation]:
    """An observation repeated with "no new information" adds nothing to the answer."""
    return [obs for obs in observations if not obs.no_new_information]


def _safety_line(f: dict[str, Any], text: str, words: dict[str, str]) -> str:
    where = words["where"].format(manual=f.get("manual", "?"), version=f.get("version", "?"), page=f.get("page", "?"))
    signal = words.get(f"signal_{f.get('signal_word')}", str(f.get("signal_word", "")).upper())
    return words["safety"].format(label=signal, where=where, text=text)


def _cause_lines(
    entry: dict[str, Any], observations: list[Observation], words: dict[str, str], language: str
) -> list[str]:
    """The entry's causes, ordered by what this run read and what past orders found (`edge.run.causes`)."""
    causes = order_causes(entry, observations)
    if not causes:
        return []
    lines = [words["causes_by_evidence"] if any(c.evidence for c in causes) else words["causes_manual_order"]]
    for n, cause in enumerate(causes, 1):
        why = "; ".join(_evidence_text(kind, f, words, language) for kind, f in cause.evidence)
        lines.append(f"  {n}. {cause.text}" + (f" — {why}" if why else ""))
    return lines


def _evidence_text(kind: str, f: dict[str, Any], words: dict[str, str], language: str) -> str:
    if kind == "past_fix":
        return words["cause_past_fix"].format(id=f.get("past_work_order_id"), date=str(f.get("closed_at") or "?")[:10])
    label = (language == "zh" and f.get("label_zh")) or f.get("label") or f.get("sensor")
    if kind == "reading_against":
        return words["cause_reading_against"].format(label=label, value=f.get("value"), unit=f.get("unit", ""))
    why = words["alarm"].format(side=f["alarm"]) if f.get("alarm") else _trend_note(f, words, f.get("unit", ""))
    return words["cause_reading_for"].format(label=label, value=f.get("value"), unit=f.get("unit", ""), why=why)


def _describe(obs: Observation, words: dict[str, str], language: str, context: list[Observation]) -> list[str]:
    """`context`: the run's observations, for what one observation's lines depend on (a cause's evidence)."""
    if obs.status == "error" and not any(item.kind == "ref" for item in obs.content):
        text = " ".join(item.text for item in obs.content if item.text)
        return [
            words["error"]
            .format(tool=obs.tool, text=text, suggestion=obs.suggestion or "", error_code=obs.error_code or obs.status)
            .strip()
        ]
    if obs.status == "not_found":
        what = " ".join(item.text for item in obs.content if item.text) or obs.tool
        return [words["not_found"].format(what=what, suggestion=obs.suggestion or "").strip()]
    lines: list[str] = []
    steps: list[str] = []
    fix_groups: set[bool | None] = set()
    for item in obs.content:
        f = item.fields
        if item.kind == "step":
            steps.append(f"  {f.get('n', len(steps) + 1)}. {item.text}")
        elif item.kind == "safety":
            continue  # shown first, above every observation
        elif "fault_code" in f and "title" in f and "manual" in f:
            _flush(lines, steps, words)
            lines.append(_manual_line(f, words))
            lines.extend(_cause_lines(f, context, words, language))
        elif "isolation_step" in f:  # the plant's lock-out, in the question's language: before the steps
            if f["isolation_step"] == 1:
                sources = ", ".join(f.get("energy_sources") or [])
                lines.append(words["isolation"].format(device=f.get("device_id"), sources=sources))
            lines.append(f"  {f['isolation_step']}. {item.text}")
        elif "sensor" in f:
            lines.append(_reading_line(item.text, f, words, language))
        elif "work_order_status" in f:
            lines.append(_order_line(f, words))
        elif "past_work_order_id" in f:
            if f.get("same_device") not in fix_groups:  # the newest fix of each group; the rest stay in the trace
                fix_groups.add(f.get("same_device"))
                lines.append(_fix_line(f, words))
        elif f.get("root_cause_candidate"):
            lines.append(
                words["root_cause"].format(
                    code=f.get("fault_code"),
                    device=f.get("device_id"),
                    count=f.get("recent_orders"),
                    days=f.get("window_days"),
                )
            )
        elif item.text and language == "en":  # the tool's own prose is English
            lines.append(item.text)
    _flush(lines, steps, words)
    return lines


def _flush(lines: list[str], steps: list[str], words: dict[str, str]) -> None:
    if steps:
        lines.append(words["steps"])
        lines.extend(steps)
        steps.clear()


def _manual_line(f: dict[str, Any], words: dict[str, str]) -> str:
    where = words["where"].format(manual=f.get("manual", "?"), version=f.get("version", "?"), page=f.get("page", "?"))
    if f.get("kind") == "page":  # no structured entry: the page's own words, quoted
        return words["manual_page"].format(
            where=where, ocr=words["ocr"] if f.get("ocr") else "", snippet=f.get("snippet", "")
        )
    # An entry read from a scanned page is OCR text too: the technician checks it against the page.
    line = words["manual"].format(
        code=f["fault_code"], title=f["title"], where=where + (words["ocr"] if f.get("ocr") else "")
    )
    scope = f.get("scope")
    line = f"{line}; {words['scope'].format(scope=scope)}" if scope else line
    return f"{line}; {words['other_machine']}" if f.get("applies_to_device") is False else line


def _reading_line(text: str, f: dict[str, Any], words: dict[str, str], language: str) -> str:
    label = (language == "zh" and f.get("label_zh")) or f.get("label") or f.get("sensor")
    value, unit, quality = f.get("value"), f.get("unit", ""), f.get("quality", "")
    if value is None:
        return words["reading_bad"].format(label=label, text=text)
    time_read = str(f.get("timestamp") or "?")
    if f.get("source") == "cache_fallback":
        line = words["reading_cache"].format(
            label=label, value=value, unit=unit, quality=quality, age=_age(f.get("age_s")), time=time_read
        )
    else:
        line = words["reading_live"].format(label=label, value=value, unit=unit, quality=quality, time=time_read)
    notes = []
    if f.get("is_outlier"):
        low, high = f.get("plausible_range") or ("?", "?")
        notes.append(words["outlier"].format(lo=low, hi=high, unit=unit))
    elif f.get("alarm"):
        notes.append(words["alarm"].format(side=f["alarm"]))
    if f.get("trend"):
        notes.append(_trend_note(f, words, unit))
    return f"{line}; {'; '.join(notes)}" if notes else line


def _trend_note(f: dict[str, Any], words: dict[str, str], unit: str) -> str:
    """The slope is printed with the digits the observation holds, so the grounding check finds it."""
    slope = f.get("trend_slope_per_min")
    signed = "?" if slope is None else ("+" if slope > 0 else "") + f"{slope:.12f}".rstrip("0").rstrip(".")
    return words[f"trend_{f['trend']}"].format(slope=signed, unit=unit, window=_age(f.get("trend_window_s")))


def _order_line(f: dict[str, Any], words: dict[str, str]) -> str:
    status = f.get("work_order_status")
    key = "order_pending" if status == "pending_confirmation" else "order_new" if f.get("created") else "order_existing"
    return words[key].format(
        id=f.get("work_order_id"),
        device=f.get("device_id"),
        code=f.get("fault_code"),
        priority=f.get("priority"),
        status=status,
    )


def _fix_line(f: dict[str, Any], words: dict[str, str]) -> str:
    parts = ", ".join(f.get("parts") or ())
    # The gist of each: the whole text is in the order, and a long one would crowd the answer out.
    found = [
        words[key].format(text=cap_text(text, FIX_TEXT_CHARS))
        for key, text in (("fix_cause", f.get("cause")), ("fix_remedy", f.get("remedy")), ("fix_parts", parts))
        if text
    ]
    what = words["fix_sep"].join(found) or words["fix_unrecorded"]
    key = "fix" if f.get("same_device") else "fix_other"
    return words[key].format(
        id=f.get("past_work_order_id"), device=f.get("device_id"), date=str(f.get("closed_at") or "?")[:10], what=what
    )


def _age(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
