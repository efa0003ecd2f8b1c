"""Index builds: incremental reuse, atomic swap, crash safety, bad files."""

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from knowledge.embed import Embedder
from knowledge.ingest.build import BuildError, BuildEvent, build_index, embed_text, read_status
from knowledge.models import FaultRecord
from knowledge.search import ManualIndex

HYDRA = ["hydra_hp200_v1.2_en.pdf", "hydra_hp200_v2.1_en.pdf"]
MERIDIAN = ["meridian_vmc850_v2.1_en.pdf"]


@pytest.fixture
def library(demo_index: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "manuals"
    folder.mkdir()
    for name in HYDRA + MERIDIAN:
        shutil.copy(demo_index.parent / "manuals" / name, folder / name)
    return folder


def codes(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {code for (code,) in conn.execute("SELECT DISTINCT code FROM records")}


def test_unchanged_pdfs_are_neither_extracted_nor_embedded_again(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    first = build_index([library], db)
    assert [m.status for m in first.manuals] == ["indexed"] * 3 and first.embedded > 0
    second = build_index([library], db)
    assert [m.status for m in second.manuals] == ["reused"] * 3
    assert second.embedded == 0 and second.records == first.records
    assert ManualIndex(db).lookup("E102").hits  # the copied records still answer

    (library / MERIDIAN[0]).unlink()
    changed = library / HYDRA[0]
    changed.write_bytes(changed.read_bytes() + b"\n%% a new revision\n")
    third = build_index([library], db)
    assert {m.file: m.status for m in third.manuals} == {HYDRA[0]: "indexed", HYDRA[1]: "reused"}
    assert "6065" not in codes(db)  # the index reflects the folder as it is now


def test_manuals_extracted_by_an_older_fixloop_are_read_again(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    build_index([library], db)
    with sqlite3.connect(db) as conn:  # as an index built before the extraction changed was
        conn.execute("DELETE FROM meta WHERE key = 'extraction'")
    again = build_index([library], db)
    assert [m.status for m in again.manuals] == ["indexed"] * 3
    assert [m.status for m in build_index([library], db).manuals] == ["reused"] * 3


def test_identical_files_are_reported_as_duplicates(library, tmp_path):
    shutil.copy(library / HYDRA[0], library / "copy_of_manual.pdf")
    report = build_index([library], tmp_path / "i.sqlite")
    [duplicate] = [m for m in report.manuals if m.status == "duplicate"]
    assert duplicate.file == HYDRA[0] and "copy_of_manual.pdf" in duplicate.error  # first in folder order wins
    assert report.duplicates >= 1


def test_bad_files_are_reported_and_the_others_indexed(library, tmp_path):
    (library / "readme.pdf").write_text("not a manual")
    report = build_index([library, tmp_path / "manuals" / HYDRA[0]], tmp_path / "i.sqlite")
    failed = {m.file: m.error for m in report.manuals if m.status == "failed"}
    assert list(failed) == ["readme.pdf"] and "not a PDF" in failed["readme.pdf"]
    assert "E102" in codes(tmp_path / "i.sqlite")


def test_a_build_that_fails_leaves_the_live_index_serving(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    build_index([library / HYDRA[1]], db)
    before = db.read_bytes()
    extra = tmp_path / "extra"
    extra.mkdir()
    shutil.copy(library / MERIDIAN[0], extra / MERIDIAN[0])

    def crash(event: BuildEvent) -> None:
        if event.stage == "embeddings" and event.advance:
            raise RuntimeError("power cut")

    with pytest.raises(RuntimeError, match="power cut"):
        build_index([library / HYDRA[1], extra], db, progress=crash)
    assert db.read_bytes() == before
    assert list(tmp_path.glob(".manuals.sqlite.building-*")) == []
    with pytest.raises(BuildError, match="no manual could be indexed"):
        (tmp_path / "bad.pdf").write_text("nope")
        build_index([tmp_path / "bad.pdf"], db)
    assert db.read_bytes() == before


def test_a_killed_build_leaves_the_old_index_and_a_leftover_the_next_build_removes(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    build_index([library / HYDRA[1]], db)
    before = db.read_bytes()
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from knowledge.ingest.build import build_index
        def die(event):
            if event.stage == "embeddings" and event.advance:
                os._exit(9)  # no cleanup, no finally: as if the power went
        build_index([Path({str(library)!r})], Path({str(db)!r}), progress=die)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parents[1], capture_output=True, text=True
    )
    assert result.returncode == 9, result.stderr
    assert db.read_bytes() == before
    assert len(list(tmp_path.glob(".manuals.sqlite.building-*"))) == 1
    assert ManualIndex(db).lookup("E102").status == "ok"
    build_index([library], db)
    assert list(tmp_path.glob(".manuals.sqlite.building-*")) == []
    assert "6065" in codes(db)


def test_a_reader_sees_the_swapped_index(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    build_index([library / HYDRA[1]], db)
    reader = ManualIndex(db)
    assert reader.lookup("6065").status == "not_found"
    build_index([library], db)
    assert reader.lookup("6065").hits[0].title == "Spindle over-temperature"


def test_status_lists_manuals_and_notices_changed_files(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    build_index([library], db)
    status = read_status(db)
    assert {m.file for m in status.manuals} == set(HYDRA + MERIDIAN)
    assert all(m.on_disk == "unchanged" for m in status.manuals)
    (library / HYDRA[0]).write_bytes((library / HYDRA[0]).read_bytes() + b"\n%% appended\n")
    (library / HYDRA[1]).unlink()
    on_disk = {m.file: m.on_disk for m in read_status(db).manuals}
    assert on_disk[HYDRA[0]] == "changed" and on_disk[HYDRA[1]] == "missing"
    scanned = next(m for m in status.manuals if m.file == HYDRA[0])
    assert scanned.ocr_pages == [4] and scanned.scanned_pages == [] and scanned.passages > scanned.pages


def open_files(fragment: str) -> list[str]:
    """Files this process holds open whose path contains `fragment` (unlinked ones end in ' (deleted)')."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the fd listing itself, already closed
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [t for t in targets if fragment in t]


def test_a_failed_build_closes_its_temporary_file(library, tmp_path):
    def crash(event: BuildEvent) -> None:
        if event.stage == "embeddings" and event.advance:
            raise RuntimeError("power cut")

    with pytest.raises(RuntimeError, match="power cut") as failure:
        build_index([library / HYDRA[1]], tmp_path / "manuals.sqlite", progress=crash)
    # `failure` keeps the build's frames alive: only an explicit close releases the file.
    assert failure.value is not None and open_files(".manuals.sqlite.building-") == []


def test_searches_running_while_the_index_is_swapped_do_not_fail(library, tmp_path):
    small, full, db = tmp_path / "small.sqlite", tmp_path / "full.sqlite", tmp_path / "manuals.sqlite"
    build_index([library / HYDRA[1]], small)
    build_index([library], full)
    reader = ManualIndex(db)
    shutil.copy(full, db)
    errors: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            try:
                reader.search("motor overheating", k=3, mode="lexical")
                reader.lookup("E102")
            except BaseException as exc:  # any failure is the finding
                errors.append(exc)
                return

    threads = [threading.Thread(target=search) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for swap in range(150):
            # What a rebuild does: a new file renamed over the live one.
            staged = tmp_path / f".staged-{swap}"
            shutil.copy(small if swap % 2 else full, staged)
            os.replace(staged, db)
            reader.lookup("E102")
            if errors:
                break
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []


def test_close_releases_the_index_file_and_a_later_query_reopens_it(library, tmp_path):
    db = tmp_path / "manuals.sqlite"
    build_index([library], db)
    reader = ManualIndex(db)
    assert reader.lookup("E102").status == "ok" and open_files(str(db))
    reader.close()
    assert open_files(str(db)) == []
    assert reader.lookup("E102").status == "ok"
    reader.close()


def test_each_stored_vector_is_the_one_its_text_gets_embedded_alone(library, tmp_path):
    # The build embeds while manuals are still being read, in batches of texts of one token count:
    # what else shares a batch, and which manual finished first, must not change a vector.
    db = tmp_path / "manuals.sqlite"
    build_index([library], db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT code, title, symptom, cause, page, vector FROM records WHERE kind = 'entry'"
        ).fetchall()
    embedder = Embedder()
    assert len(rows) > 10
    texts = [
        embed_text(
            FaultRecord(code=code, title=title, symptom=symptom, cause=cause, page=page, pages=[page], source="table")
        )
        for code, title, symptom, cause, page, _ in rows
    ]
    for text, (*_, vector) in zip(texts, rows, strict=True):
        assert np.allclose(np.frombuffer(vector, dtype=np.float32), embedder.encode([text])[0], atol=1e-5), text
