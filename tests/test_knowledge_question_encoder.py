"""The ONNX question encoder the build leaves beside the index: the same vectors as the
sentence-transformers model, used by searches when present, PyTorch when it is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from knowledge.embed import Embedder
from knowledge.question_encoder import QuestionEncoder, encoder_path
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
    assert path.exists(), f"the build left no question encoder beside {demo_index}"
    return path


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_exported_encoder_embeds_a_question_as_the_model_does(encoder_file: Path, question: str) -> None:
    exported = QuestionEncoder(encoder_file).encode(question)
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
