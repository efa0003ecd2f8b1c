"""The index file a build swaps in: made without a journal on disk or a sync per commit, with its lookup indexes
made after the rows, and a report of where the build's time went."""

import shutil
import sqlite3
from pathlib import Path

from knowledge.ingest.build import build_index

LOOKUPS = {
    ("records", ("code_key",)),
    ("records", ("loose_key",)),
    ("records", ("code_pattern",)),
    ("records", ("vendor_key", "model_key", "code_key")),
    ("records", ("manual_sha256",)),
    ("safety", ("manual_sha256",)),
}


def lookups(db: Path) -> set[tuple[str, tuple[str, ...]]]:
    with sqlite3.connect(db) as conn:
        found = set()
        for table in ("records", "safety"):
            for _, name, *_ in conn.execute(f"PRAGMA index_list({table})"):
                columns = tuple(row[2] for row in conn.execute(f"PRAGMA index_info({name})"))
                found.add((table, columns))
        return found


def test_a_built_index_has_its_lookup_indexes_and_opens_in_rollback_mode(demo_index, tmp_path):
    folder = tmp_path / "manuals"
    folder.mkdir()
    for name in ("hydra_hp200_v1.2_en.pdf", "meridian_vmc850_v2.1_en.pdf"):
        shutil.copy(demo_index.parent / "manuals" / name, folder / name)
    db = tmp_path / "manuals.sqlite"
    first = build_index([folder], db)
    assert lookups(db) >= LOOKUPS
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # no WAL file beside it
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        entries = conn.execute("SELECT count(*) FROM records WHERE kind = 'entry'").fetchone()[0]
    assert entries == first.records > 0
    assert not list(tmp_path.glob("*-journal"))

    shutil.copy(demo_index.parent / "manuals" / "hydra_hp200_v2.1_en.pdf", folder)
    second = build_index([folder], db)  # two manuals copied from the live index, one read
    assert sorted(m.status for m in second.manuals) == ["indexed", "reused", "reused"]
    assert lookups(db) >= LOOKUPS


def test_the_report_says_where_the_build_s_time_went(demo_index, tmp_path):
    shutil.copy(demo_index.parent / "manuals" / "hydra_hp200_v1.2_en.pdf", tmp_path)
    report = build_index([tmp_path / "hydra_hp200_v1.2_en.pdf"], tmp_path / "one.sqlite")
    stages = report.stages
    assert report.embedded > 0 and stages.embedding_s > 0  # the encoder's time, beside the reading and after it
    assert stages.read_s > 0 and stages.write_s > 0
    assert stages.read_s + stages.embed_s + stages.write_s <= report.elapsed_s
    assert stages.cpu_s > 0
