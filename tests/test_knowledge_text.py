"""Lexical terms: Chinese words match inside longer text through the index's own FTS5 tokenizer;
English terms are as before; index and query processes cut text the same way."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from knowledge.text import counted_words, holds, terms

ROOT = Path(__file__).resolve().parents[1]
# The tokenizer knowledge/ingest/build.py gives the records' FTS5 table.
TOKENIZER = "porter unicode61 remove_diacritics 2"


def fts_search(docs: list[str], query: str) -> list[int]:
    """Indices of `docs` matching `query`, best first, the way the manual index stores and queries terms."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{TOKENIZER}')")
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", [(i, " ".join(terms(d))) for i, d in enumerate(docs)])
    expression = " OR ".join('"' + w + '"' for w in dict.fromkeys(terms(query)))
    return [i for (i,) in db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expression,))]


def test_chinese_word_matches_inside_longer_text():
    docs = ["直流母线过压保护动作", "电机温度过高", "编码器通讯异常"]
    assert fts_search(docs, "过压") == [0]
    assert fts_search(docs, "驱动器报过压") == [0]


def test_jieba_words_and_bigrams_are_both_terms():
    found = terms("伺服驱动器散热器温度过高")
    assert {"驱动器", "散热器"} <= set(found)  # whole words a question may use as typed
    assert {"驱动", "散热", "温度"} <= set(found)  # their parts, from search mode and bigrams


def test_a_question_is_counted_in_its_words_not_in_the_pieces_matching_adds():
    # `terms` also gives 主电, 机温, 度过, 机停...: pairs across two words, which no answer prints.
    assert counted_words("主电机温度过高，压机停了怎么办") == ["电机", "温度", "过高", "压机"]
    assert counted_words("The drive trips E102 on over-temperature") == ["drive", "trips", "e102", "temperature"]


def test_a_row_holds_a_chinese_word_as_a_word_or_as_each_of_its_pairs():
    assert holds(set(terms("驱动器温度过高保护")), "温度过高")  # jieba cut the row into 温度 / 过高
    assert not holds(set(terms("驱动器的温度很高")), "温度过高")
    assert holds(set(terms("Motor over temperature")), "motor")


def test_word_jieba_cuts_differently_still_matches():
    # jieba reads "电机报欠压" as 电机/报欠/压; the bigram 欠压 still meets the manual's 欠压故障.
    assert fts_search(["欠压故障：电机电压低于保护电压", "过载故障"], "电机报欠压")[0] == 0


def test_ranking_prefers_the_specific_term():
    docs = ["输入电源缺相报警", "输入电源电压过低", "电源指示灯"]
    assert fts_search(docs, "GT伺服报输入电源缺相")[0] == 0


def test_english_terms_unchanged():
    assert terms("Spindle drive trips on Over-Voltage every time the spindle brakes") == [
        "spindle",
        "drive",
        "trips",
        "voltage",
        "time",
        "spindle",
        "brakes",
    ]
    assert terms("Alarm E102: DC-bus 310V, see P-04") == ["alarm", "e102", "dc", "bus", "310v", "p", "04"]


def test_a_latin_word_with_marks_is_one_term():
    # Cut at the umlaut, `Füllstand` gave an `f` that matched every F a page prints.
    assert terms("Füllstand zu niedrig, Lüfter prüfen, réglage") == [
        "füllstand",
        "zu",
        "niedrig",
        "lüfter",
        "prüfen",
        "réglage",
    ]


def test_mixed_text_keeps_codes_and_chinese():
    found = terms("Invertek变频器显示OL-br")
    assert {"invertek", "ol", "br", "变频器", "显示"} <= set(found)


def test_same_terms_in_another_process_and_no_cache_file(tmp_path):
    """The index is built in one process and queried in another: both must cut alike. The
    segmenter writes nothing to the temp directory, which a service user may not own."""
    text = "关节电机报欠压，供电低于多少伏会报？主轴伺服定向老是失败 Er25"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "HF_HUB_OFFLINE": "1"}
    code = "import json, sys; from knowledge.text import terms; print(json.dumps(terms(sys.argv[1])))"
    out = subprocess.run(
        [sys.executable, "-c", code, text], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == terms(text) == terms(text)
    assert list(scratch.iterdir()) == []
    assert out.stderr == ""


def test_english_text_does_not_load_the_segmenter():
    code = (
        "import sys; from knowledge.text import terms; terms('spindle overheat alarm 9'); print('jieba' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
