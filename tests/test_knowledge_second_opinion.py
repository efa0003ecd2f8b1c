"""The second opinion: multilingual-e5-small's vectors stored by the build (one manual, real model, real SQLite),
read for the first stage's best candidates alone, and fused with its scores; an index built without them is
refused with a message saying how to rebuild it."""

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from knowledge.embed import Embedder
from knowledge.ingest.build import SCHEMA_VERSION, build_index
from knowledge.ingest.opinion_vectors import OPINION_MODEL, OPINION_TOKENS, clip, pack, unpack
from knowledge.search import IndexMissing, ManualIndex
from knowledge.tuning import Tuning

QUESTION = "the main motor is overheating"
# Large enough that the second opinion decides the order of the first stage's best rows: of a question the first
# encoder reads (English), and of one it does not (Chinese, with the English-only MiniLM).
DECISIVE = Tuning(opinion_weight=1000.0, opinion_weight_unread=0.0)
DECISIVE_UNREAD = Tuning(opinion_weight=0.0, opinion_weight_unread=1000.0)


@pytest.fixture(scope="module")
def indexes(demo_index: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """One demo manual indexed without the vectors, then again, into a copy of that index, with them."""
    folder = tmp_path_factory.mktemp("second-opinion")
    shutil.copy(demo_index.parent / "manuals" / "hydra_hp200_v2.1_en.pdf", folder)
    plain = folder / "plain.sqlite"
    build_index([folder], plain)
    with_vectors = folder / "opinion.sqlite"
    shutil.copy(plain, with_vectors)
    report = build_index([folder], with_vectors, second_opinion=True)
    return plain, with_vectors, [m.status for m in report.manuals]


def _hits(index: ManualIndex, question: str = QUESTION) -> list[tuple[int, str]]:
    return [(hit.page, hit.fault_code) for hit in index.search(question, k=10).hits]


def _doctored(with_vectors: Path, folder: Path, question: str, row: tuple[int, str]) -> Path:
    """A copy of the index whose row (page, code; a page's passages for a page) has the question's own vector."""
    doctored = folder / "doctored.sqlite"
    shutil.copy(with_vectors, doctored)
    page, code = row
    with closing(sqlite3.connect(doctored)) as conn:
        changed = conn.execute(
            "UPDATE records SET opinion = ? WHERE opinion IS NOT NULL AND kind = ? AND page = ? AND code = ?",
            (pack(Embedder(OPINION_MODEL).encode([question], query=True)[0]), "entry" if code else "page", page, code),
        ).rowcount
        conn.commit()
    assert changed
    return doctored


def test_the_build_stores_a_vector_of_the_second_encoder_for_each_embedded_row(indexes):
    _, with_vectors, statuses = indexes
    assert statuses == ["indexed"]  # not copied from the index without vectors
    with closing(sqlite3.connect(with_vectors)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        rows = conn.execute("SELECT vector IS NOT NULL, length(opinion) FROM records").fetchall()
    assert meta["schema"] == SCHEMA_VERSION and meta["opinion"] == OPINION_MODEL
    assert rows and all(length == (384 if embedded else None) for embedded, length in rows)


def test_a_rebuild_reuses_a_manual_only_from_an_index_with_the_same_second_opinion(indexes, tmp_path):
    _, with_vectors, _ = indexes
    folder = with_vectors.parent

    def rebuilt(second_opinion: bool) -> tuple[list[str], int]:
        db = tmp_path / f"rebuilt-{second_opinion}.sqlite"
        shutil.copy(with_vectors, db)
        statuses = [m.status for m in build_index([folder], db, second_opinion=second_opinion).manuals]
        with closing(sqlite3.connect(db)) as conn:
            return statuses, conn.execute("SELECT count(opinion) FROM records").fetchone()[0]

    with closing(sqlite3.connect(with_vectors)) as conn:
        stored = conn.execute("SELECT count(opinion) FROM records").fetchone()[0]
    assert rebuilt(True) == (["reused"], stored)  # copied with its vectors
    assert rebuilt(False) == (["indexed"], 0)


@pytest.mark.parametrize(("question", "tuning"), [(QUESTION, DECISIVE), ("主电机过热", DECISIVE_UNREAD)])
def test_the_second_opinion_reorders_the_best_candidates_by_their_stored_vectors(indexes, tmp_path, question, tuning):
    _, with_vectors, _ = indexes
    first = _hits(ManualIndex(with_vectors, tuning=tuning), question)
    assert len(first) >= 3
    # The first stage's last hit gets the question's own e5 vector: with the second opinion it comes first.
    doctored = _doctored(with_vectors, tmp_path, question, first[-1])
    assert _hits(ManualIndex(doctored, tuning=tuning), question) == first  # off: the vectors are not read
    reordered = _hits(ManualIndex(doctored, tuning=tuning, second_opinion=True), question)
    assert reordered[0] == first[-1] != first[0]
    # With the other language's weight alone, the same search keeps the first stage's order.
    other = DECISIVE_UNREAD if tuning is DECISIVE else DECISIVE
    assert _hits(ManualIndex(doctored, tuning=other, second_opinion=True), question) == first


def test_the_order_follows_the_encoders_cosines(indexes):
    _, with_vectors, _ = indexes
    index = ManualIndex(with_vectors, tuning=DECISIVE, second_opinion=True)
    found = index.candidates(QUESTION)
    hits = index.answer(found, k=10).hits
    assert index.second_opinion is not None
    rows = {(row["page"], row["code"]): row for row in found.snapshot.rows.values()}
    cosines = index.second_opinion.cosines(found.snapshot, QUESTION, [rows[hit.page, hit.fault_code] for hit in hits])
    known = [cosine for cosine in cosines if cosine is not None]
    assert known == sorted(known, reverse=True) and len(set(known)) > 1


def test_without_the_second_opinion_the_index_answers_as_one_built_without_it(indexes):
    plain, with_vectors, _ = indexes
    assert _hits(ManualIndex(with_vectors)) == _hits(ManualIndex(plain))


def test_an_index_without_the_vectors_is_refused_with_how_to_rebuild_it(indexes, tmp_path):
    plain, _, _ = indexes
    index = ManualIndex(plain, second_opinion=True)
    with pytest.raises(IndexMissing, match=r"no second-opinion vectors .*built without them.*fixloop index build"):
        index.search(QUESTION)
    assert index.query("E102").hits[0].fault_code == "E102"  # a code's entries need no second opinion
    old = tmp_path / "schema7.sqlite"  # as an index of the version before: no `opinion` in its meta
    shutil.copy(plain, old)
    with closing(sqlite3.connect(old)) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'opinion'")
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema'")
        conn.commit()
    with pytest.raises(IndexMissing, match=r"index schema 7.*rebuild it"):
        ManualIndex(old, second_opinion=True).search(QUESTION)


def test_a_text_is_clipped_to_what_the_encoder_reads_and_a_stored_vector_keeps_its_direction():
    model = Embedder(OPINION_MODEL).load()
    long = "The hydraulic oil temperature rises above the alarm limit while the press runs. " * 12
    clipped = clip(long, model)
    assert long.startswith(clipped) and model.token_count(clipped) <= OPINION_TOKENS < model.token_count(long)
    chinese = clip("液压油温度过高时压机停止运行" * 20, model)
    assert model.token_count(chinese) <= OPINION_TOKENS
    vectors = Embedder(OPINION_MODEL).encode([clipped, chinese, "motor overheating"])
    stored = unpack([pack(vector) for vector in vectors])
    assert np.allclose(stored @ stored[2], vectors @ vectors[2], atol=0.01)


def test_the_configs_switch_builds_the_vectors_and_searches_with_them(indexes, tmp_path, fixloop):
    plain, with_vectors, _ = indexes
    fixloop.env({"FIXLOOP_STATE_DIR": str(tmp_path / "state"), "FIXLOOP__KNOWLEDGE__SECOND_OPINION": "true"})
    built = tmp_path / "built.sqlite"
    code, _, _ = fixloop("index", "build", str(with_vectors.parent / "hydra_hp200_v2.1_en.pdf"), "--db", str(built))
    with closing(sqlite3.connect(built)) as conn:
        assert code == 0 and conn.execute("SELECT count(opinion) FROM records").fetchone()[0] > 0
    code, out, _ = fixloop("search", "主电机过热", "--db", str(built), "--json")
    assert code == 0 and json.loads(out)["hits"]
    code, _, err = fixloop("search", "主电机过热", "--db", str(plain))
    assert code != 0 and "no second-opinion vectors" in err and "fixloop index build" in err
