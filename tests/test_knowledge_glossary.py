"""Bilingual glossary: a Chinese question meets an English manual through the lexical index, and the reverse."""

from __future__ import annotations

import re
import sqlite3
import tomllib
from importlib import resources

import pytest

from knowledge.glossary import expand, translate_to_english, translations
from knowledge.text import terms

CJK = re.compile(r"[\u3400-\u9fff]")


def words(text: str) -> set[str]:
    return set(expand(text).split())


@pytest.mark.parametrize("english", ["overvoltage", "Over-Voltage", "over voltage", "OVERVOLTAGE trip"])
def test_english_spellings_expand_to_chinese(english):
    assert {"过压", "过电压", "电压过高"} <= words(english)


@pytest.mark.parametrize(
    "chinese, english",
    [
        ("直流母线过压保护动作", "overvoltage"),
        ("电机报欠压", "undervoltage"),
        ("输入电源缺相", "phase loss"),
        ("伺服报过流", "overcurrent"),
        ("编码器通讯异常", "encoder"),
        ("霍尔信号错误", "hall sensor"),
        ("对地短路", "ground fault"),
        ("电机堵转", "locked rotor"),
        ("按下急停", "emergency stop"),
    ],
)
def test_chinese_expands_to_english(chinese, english):
    assert english in expand(chinese)


def test_plural_and_ing_endings():
    assert "编码器" in words("check both encoders")
    assert "过热" in words("motor overheating")
    assert "限位开关" in words("limit switches")


def test_english_matches_whole_words_only():
    assert "电流" not in words("currently the drive is idle")
    assert "负载" not in words("download the parameters")


def test_longest_variant_wins():
    assert {"heatsink", "overheat", "over-temperature"} <= words("散热器温度过高")
    # 温度过高 is one concept, not temperature + too high; DC bus voltage is not voltage.
    assert translate_to_english("散热器温度过高") == "heatsink overheat"
    assert "直流母线" in words("DC bus voltage") and "电压" not in words("DC bus voltage")


def test_mixed_text_expands_both_ways():
    found = words("spindle 过压")
    assert "主轴" in found and "overvoltage" in found
    assert "spindle" not in found and "过压" not in found  # only the other language


@pytest.mark.parametrize("text", ["the weather is nice today", "今天天气很好", "", "E102 0x3022"])
def test_no_concept_in_unrelated_text(text):
    assert expand(text) == ""


@pytest.mark.parametrize(
    "german, english, chinese",
    [
        ("Überspannung im Zwischenkreis", "overvoltage", "过压"),
        ("Zwischenkreisüberspannung", "DC bus", "直流母线"),  # a compound holds its parts
        ("Vorlauffühler defekt", "sensor", "传感器"),
        ("Die Pumpe ist blockiert", "locked rotor", "堵转"),
        ("Lüfter läuft nicht", "cooling fan", "冷却风扇"),
    ],
)
def test_german_expands_to_english_and_chinese(german, english, chinese):
    assert english in expand(german) and chinese in expand(german)


def test_english_and_chinese_expand_to_german_too():
    assert "Überspannung" in expand("overvoltage") and "Überspannung" in expand("过压")
    # A word English and German share (`Motor`) is translated into the language that writes it otherwise.
    assert expand("Motor") == "电机 电动机 马达"


def test_a_short_german_variant_is_no_part_of_a_compound():
    """`Puls` stands alone (`Pulsweite` is no pulse); a German variant of five letters or more is found inside a
    longer word too (`Impulsgeber` holds `Impuls`), but no German variant is found inside an English word."""
    assert "脉冲" not in words("Pulsweite") and "脉冲" in words("der Puls fehlt") and "脉冲" in words("Impulsgeber")
    assert expand("the motor stops for a moment") == expand("the motor stops")


def test_the_words_every_fault_table_says_translate_but_tell_nothing():
    assert translations("电池更换") == (
        ("battery", "Batterie", "Akku"),
        ("replace", "replacement", "austauschen", "ersetzen", "Austausch"),
    )
    assert translations("电池更换", generic=False) == (("battery", "Batterie", "Akku"),)


def test_translate_to_english():
    assert translate_to_english("主轴电机过热怎么办") == "spindle motor overheat"
    assert translate_to_english("Invertek变频器显示OL-br是什么意思") == "Invertek inverter display OL-br"
    assert translate_to_english("RS02 故障码０x３０２２ bit3") == "RS02 fault 0x3022 bit3"  # full-width digits
    assert translate_to_english("今天天气很好") == ""
    # A German question's own words are carried over only as codes and acronyms.
    assert translate_to_english("Was bedeutet Überstrom E07 am IGBT?", words=False) == "overcurrent E07 IGBT"


def test_chinese_question_finds_english_entry_and_reverse():
    """Query terms plus the expansion's terms, against records indexed with plain terms()."""
    docs = [
        "Alarm 2: over voltage of the main power supply",
        "Alarm 3: encoder disconnected",
        "bit3 过压故障：电机电压超过保护电压",
        "bit0 电机过温故障：热敏电阻温度超过135度",
    ]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", [(i, " ".join(terms(d))) for i, d in enumerate(docs)])

    def search(query: str, language: str) -> list[int]:
        expression = " OR ".join('"' + w + '"' for w in dict.fromkeys(terms(expand(query))))
        hits = [i for (i,) in db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expression,))]
        return [i for i in hits if bool(CJK.search(docs[i])) == (language == "zh")]

    assert search("主电源过压", "en")[0] == 0
    assert search("编码器断线", "en")[0] == 1
    assert search("motor over temperature fault", "zh")[0] == 3


def test_every_concept_has_both_languages_and_no_variant_is_shared():
    data = tomllib.loads(resources.files("knowledge").joinpath("glossary.toml").read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for name, concept in data["concepts"].items():
        assert concept["en"] and all(not CJK.search(v) for v in concept["en"]), name
        assert concept["zh"] and all(CJK.search(v) for v in concept["zh"]), name
        assert all(not CJK.search(v) for v in concept.get("de", ())), name
        for variant in dict.fromkeys(v.lower() for v in (*concept["en"], *concept["zh"], *concept.get("de", ()))):
            owner = seen.setdefault(variant.lower(), name)
            assert owner == name, f"{variant!r} is in both {owner} and {name}"
