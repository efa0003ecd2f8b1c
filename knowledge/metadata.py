"""Who a manual is for: title, vendor, model, version, language and validity.

Taken from labelled lines on the first pages ("Model: HP-200", "型号：HP-200"),
then the PDF's document information, then the running header, then the file name.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from knowledge.models import ManualInfo
from knowledge.pdf import RawManual
from knowledge.text import join_lines, language

_LABELS = {
    "vendor": ("vendor", "manufacturer", "maker", "厂商", "制造商", "生产厂家", "厂家"),
    "model": ("machine model", "model", "型号", "机型"),
    "version": ("manual version", "version", "revision", "版本号", "版本"),
    "valid_for": ("valid for", "applies to", "适用范围", "适用于"),
}
_VERSION = re.compile(r"(?<![\w.])(?:v|ver\.?|version|rev\.?|版本)\s*(\d+(?:\.\d+){1,2})(?![\w.])", re.I)
COVER_PAGES = 2


def manual_info(path: Path, sha256: str, raw: RawManual) -> ManualInfo:
    cover = "\n".join(b.text for page in raw.pages[:COVER_PAGES] for b in page.blocks)
    labelled = _labelled(cover)
    sample = cover + "\n".join(b.text for page in raw.pages[:6] for b in page.blocks)
    version = (
        normalize_version(labelled.get("version", ""))
        or _first_version(raw.metadata.get("title", ""))
        or _first_version(" ".join(raw.bands.texts))
        or _first_version(path.stem.replace("_", " "))
    )
    title = raw.metadata.get("title") or _first_block(raw)
    return ManualInfo(
        file=path.name,
        sha256=sha256,
        title=title,
        vendor=labelled.get("vendor") or raw.metadata.get("author", ""),
        model=labelled.get("model", ""),
        version=version,
        language=language(sample),
        valid_for=labelled.get("valid_for", ""),
        pages=len(raw.pages),
        scanned_pages=[page.number for page in raw.pages if page.scanned],
    )


def normalize_version(text: str) -> str:
    """`2.1`, `v2.1`, `Version 2.1` → `V2.1`; empty when there is no version number."""
    text = unicodedata.normalize("NFKC", text).strip()
    match = re.fullmatch(r"(?:v|ver\.?|version|rev\.?|版本)?\s*(\d+(?:\.\d+){0,2})", text, re.I)
    return f"V{match.group(1)}" if match else _first_version(text)


def version_order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def _first_version(text: str) -> str:
    match = _VERSION.search(unicodedata.normalize("NFKC", text))
    return f"V{match.group(1)}" if match else ""


def _labelled(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in unicodedata.normalize("NFKC", text).splitlines():
        for name, words in _LABELS.items():
            for word in words:
                match = re.match(rf"^\s*{re.escape(word)}\s*[:：]\s*(\S.*)$", line, re.I)
                if match and name not in found:
                    found[name] = match.group(1).strip()
    return found


def _first_block(raw: RawManual) -> str:
    for page in raw.pages:
        for block in page.blocks:
            return join_lines(block.text)
    return ""
