"""The project's own demo manuals (authored in manuals.json) for the demo plant:
Hydra HP-200 press (`press-3`) and Meridian VMC-850 machining centre (`cnc-7`),
versions V1.2 and V2.1, English and Chinese editions."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from knowledge.demo.render import FaultEntry, ManualDoc, render_pdf
from knowledge.ingest.build import build_index
from knowledge.ingest.metadata import version_order

CONTENT = "manuals.json"
SCANNED_APPENDIX_VERSION = "V1.2"


def demo_manuals() -> dict[str, ManualDoc]:
    """File name → manual, for every machine, version and language in the authored content."""
    content = json.loads(resources.files(__package__).joinpath(CONTENT).read_text(encoding="utf-8"))
    manuals: dict[str, ManualDoc] = {}
    for machine in content["machines"]:
        for version in content["versions"]:
            for lang in content["languages"]:
                faults = [
                    f for f in machine["faults"] if version_order(f.get("since", version)) <= version_order(version)
                ]
                entries = {
                    layout: [_entry(f, version, lang) for f in faults if f["layout"] == layout]
                    for layout in ("table", "text")
                }
                name = f"{machine['slug']}_{version.lower()}_{lang}.pdf"
                manuals[name] = ManualDoc(
                    title=machine["title"][lang],
                    vendor=machine["vendor"],
                    model=machine["model"],
                    version=version,
                    language=lang,
                    valid_for=machine["valid_for"][lang].format(major=version.split(".")[0]),
                    header=f"{machine['vendor']} {machine['model']} · {machine['title'][lang]} · {version}",
                    footer_note=machine["footer_note"][lang],
                    heading=machine["heading"][lang],
                    intro=machine["safety"][lang],
                    danger=machine.get("danger", {}).get(lang, ""),
                    panel=machine.get("panel", {}).get(lang, ""),
                    table_faults=entries["table"],
                    text_faults=entries["text"],
                    scanned_appendix=version == SCANNED_APPENDIX_VERSION,
                )
    return manuals


def write_demo_manuals(directory: Path) -> list[Path]:
    """Render the demo PDFs that are not there yet; existing files are kept as they are."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, manual in demo_manuals().items():
        path = directory / name
        if not path.exists():
            render_pdf(manual, path)
        paths.append(path)
    return paths


def build_demo_index(state_dir: Path, model_path: str | None = None, index_path: Path | None = None) -> Path:
    """Demo PDFs into `state_dir/manuals`, indexed into `state_dir/manuals.sqlite` (incrementally)."""
    index_path = index_path or state_dir / "manuals.sqlite"
    build_index(write_demo_manuals(state_dir / "manuals"), index_path, model_path=model_path)
    return index_path


def _entry(fault: dict[str, Any], version: str, lang: str) -> FaultEntry:
    text = {**fault[lang], **fault.get("changes", {}).get(version, {}).get(lang, {})}
    return FaultEntry(
        code=fault["code"],
        title=text["title"],
        symptom=text["symptom"],
        cause=text["cause"],
        steps=list(text["steps"]),
        caution=text.get("caution", ""),
    )
