"""One PDF in, its manual description and fault records out."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from knowledge.codes import code_key
from knowledge.metadata import manual_info
from knowledge.models import FaultRecord, ManualInfo
from knowledge.pdf import ManualError, read_manual
from knowledge.records import assemble

__all__ = ["Extraction", "ManualError", "extract_manual", "file_sha256"]


@dataclass
class Extraction:
    info: ManualInfo
    records: list[FaultRecord]
    duplicates: int


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ManualError(f"{path.name}: cannot read the file ({exc.strerror or exc})") from None
    return digest.hexdigest()


def extract_manual(path: Path, sha256: str | None = None) -> Extraction:
    raw = read_manual(path)
    info = manual_info(path, sha256 or file_sha256(path), raw)
    assembly = assemble(raw.pages, raw.body_size, frozenset(code_key(name) for name in (info.model,) if name))
    return Extraction(info=info, records=assembly.records, duplicates=assembly.duplicates)
