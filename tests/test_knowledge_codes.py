"""Fault-code shapes, normal forms and the spaCy linker."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowledge.code_linker import CodeLinker
from knowledge.codes import (
    DISPLAY_TOKEN,
    MENTION,
    TYPED_TOKEN,
    canonical_id,
    code_key,
    fault_key,
    glob_pattern,
    lookalike_keys,
    lookup_keys,
    loose_key,
    named_alarm,
    parse_code_cell,
    parse_heading,
    reported_code,
)


@pytest.mark.parametrize(
    ("typed", "printed"),
    [
        ("e-102", "E102"),
        ("E 102", "E102"),
        ("ALARM 1", "ALARM:1"),
        ("alarm:1", "ALARM:1"),
        ("err 07", "Err-07"),
        ("ERR-07", "Err-07"),
        ("drv fault", "DRV_FAULT"),
        ("Ｅ１０２", "E102"),
        ("error 22", "error:22"),
    ],
)
def test_printed_and_typed_forms_share_one_key(typed, printed):
    assert code_key(typed) == code_key(printed)
    assert canonical_id(printed) == f"fault:{code_key(printed)}"


@given(st.from_regex(r"[A-Za-z]{1,4}[0-9]{1,4}", fullmatch=True), st.sampled_from(["", " ", "-", ":", "_"]))
def test_key_ignores_case_and_separators(code, sep):
    letters = code.rstrip("0123456789")
    digits = code[len(letters) :]
    assert code_key(f"{letters.lower()}{sep}{digits}") == code_key(code) == code.upper()


def test_cue_words_are_dropped_only_as_a_second_try():
    assert lookup_keys("Alarm 6065")[-1] == "6065"
    # A word that merely starts like a cue keeps its letters: no `OR` from `ERROR`.
    assert lookup_keys("ERROR") == ["ERROR"] and lookup_keys("ALMOST") == ["ALMOST"]


@pytest.mark.parametrize(
    ("reported", "shown", "identity"),
    [
        ("fault 123", "123", "123"),
        ("alarm 123", "123", "123"),
        ("ALARM123", "123", "123"),
        ("123", "123", "123"),
        ("Alarm: 6065", "6065", "6065"),
        ("报警号 6065", "6065", "6065"),
        ("ALARM:1", "ALARM:1", "1"),
        ("Err-07", "ERR-07", "07"),
        ("e 102", "E102", "E102"),
        ("K179A-0", "K179A-0", "K179A0"),
        ("x.1", "X.1", "X1"),
        ("OVERTEMP", "OVERTEMP", "OVERTEMP"),
        ("ERROR", "ERROR", "ERROR"),
    ],
)
def test_a_reported_code_has_one_spelling_and_one_identity(reported, shown, identity):
    assert reported_code(reported) == shown
    assert fault_key(reported) == fault_key(shown) == identity
    assert lookup_keys("报警号 6065")[-1] == "6065"
    assert lookup_keys("ALARM:1")[0] == "ALARM1"


def test_placeholder_codes_match_the_number_on_the_hmi():
    assert glob_pattern("XX204") == "[0-9][0-9]204"
    assert glob_pattern("E204") is None


@pytest.mark.parametrize(
    ("text", "emphasized", "code", "title"),
    [
        ("Fault code: E102 — Motor over-temperature protection", False, "E102", "Motor over-temperature protection"),
        ("故障代码：E102 电机过温保护", False, "E102", "电机过温保护"),
        ("Alarm 6065 – Spindle over-temperature", False, "6065", "Spindle over-temperature"),
        ("报警号 6065 主轴过热", False, "6065", "主轴过热"),
        ("Störung 18 Außentemperatursensor", False, "18", "Außentemperatursensor"),
        ("ALARM:1 Hard limit", False, "ALARM:1", "Hard limit"),
        ("DRV_FAULT: Servo pump drive fault", True, "DRV_FAULT", "Servo pump drive fault"),
        ("04101 Coolant level low", True, "04101", "Coolant level low"),
    ],
)
def test_headings_in_the_styles_of_real_manuals(text, emphasized, code, title):
    heading = parse_heading(text, emphasized)
    assert heading is not None and (heading.code, heading.title) == (code, title)


@pytest.mark.parametrize(
    "text",
    [
        "E102 can recur if the cause is not removed",  # running text, not a heading
        "Error messages are shown on the HMI",
        "Version V2.1",
        "3 Fault procedures",
    ],
)
def test_prose_is_not_a_heading(text):
    assert parse_heading(text, emphasized=False) is None


def test_code_cells():
    assert [parse_code_cell(c) for c in ["E102", "ALARM:1", "04101", "error:22", "XX204", "Alarm 6065", "Code"]] == [
        "E102",
        "ALARM:1",
        "04101",
        "error:22",
        "XX204",
        "6065",
        None,
    ]


def test_linker_marks_codes_in_english_and_chinese_with_canonical_ids():
    linker = CodeLinker(known_codes=["6065"])
    english = linker.doc("the spindle shows alarm 6065 and then E102", "en")
    assert [(e.text, e.kb_id_) for e in english.ents] == [("alarm 6065", "fault:6065"), ("E102", "fault:E102")]
    # spacy.blank("zh") splits every character; the entity still covers cue and code.
    chinese = linker.doc("报警6065，主轴很烫", "zh")
    assert [(e.text, e.kb_id_, e.label_) for e in chinese.ents] == [("报警6065", "fault:6065", "FAULT_CODE")]
    assert [(m.start, m.code) for m in linker.mentions("16065 is not 6065", "en")] == [(13, "6065")]
    assert linker.mentions("the motor is hot", "en") == []


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("when should the membranes be replaced", []),
        ("Vertikalachse sackt kurz ab, wenn STO ausgelöst wird", []),
        ("the burner control shows BE", ["BE"]),  # as printed
        ("error be on the burner control", ["be"]),  # after a cue word
        ("报警 be", ["be"]),
        ("the drive does not stop", []),
        ("display reads Stop", ["Stop"]),
        ("oc1 then oC1 again", ["oc1", "oC1"]),  # no word: any case
    ],
)
def test_a_code_that_is_also_a_word_is_a_code_as_printed_or_after_a_cue(text: str, codes: list[str]) -> None:
    linker = CodeLinker(known_codes=["BE", "AB", "Stop", "OC1"])
    assert [m.code for m in linker.mentions(text, "zh" if "报警" in text else "en")] == codes


@pytest.mark.parametrize(
    ("typed", "printed"),
    [
        ("23", "0023"),
        ("0x400", "0x0400"),
        ("0004h", "0x0004"),  # a bus value as PLC programmers write it
        ("1Ah", "0x001A"),
        ("O.Volt", "O.Uo1t"),
        ("U.Volt", "U.Uo1t"),
        ("sc trp", "SC-trP"),
        ("etrip", "E-trip"),
    ],
)
def test_display_and_padded_forms_share_a_loose_key(typed, printed):
    assert loose_key(typed) == loose_key(printed)


@pytest.mark.parametrize("other", ["E102", "0x0401", "230", "P-LOSS", "23h"])
def test_loose_keys_still_tell_codes_apart(other):
    assert loose_key("0023") != loose_key(other) and loose_key("O-I") != loose_key(other)


def test_a_display_code_ending_in_h_is_no_hex_value():
    assert loose_key("E1H") != loose_key("0xE1") and loose_key("0E1h") == loose_key("0xE1")


@pytest.mark.parametrize(
    ("cell", "code"),
    [("O-I", "O-I"), ("P-LOSS", "P-LOSS"), ("I. t-trP", "I.t-trP"), ("0x0400", "0x0400"), ("bit 11", "bit11")],
)
def test_display_hex_and_bit_codes_in_a_code_column(cell, code):
    assert parse_code_cell(cell) == code


def test_a_question_names_display_codes_but_not_words():
    found = [m.group(0) for m in DISPLAY_TOKEN.finditer("inverter shows U.Volt, then OL-br, on press 3")]
    assert found == ["U.Volt", "OL-br"]


@pytest.mark.parametrize(
    ("typed", "printed"), [("OH1", "oH1"), ("oh1", "oH1"), ("UV1", "Uv1"), ("oca", "ocA"), ("BB", "b.b.")]
)
def test_display_case_as_printed_and_typed_is_one_key(typed, printed):
    assert code_key(typed) == code_key(printed)


@pytest.mark.parametrize(
    ("typed", "printed"),
    [
        ("E1O2", "E102"),  # a letter O for the zero
        ("0H1", "oH1"),
        ("SC1", "5C1"),
        ("El04", "E104"),
        ("6.6.", "b.b."),  # a display's b is a 6 without its top bar
        ("Er9", "Erg"),
        ("E2", "E02"),  # padding
        ("E002", "E02"),
        ("Err 1", "Err01"),
        ("CPFO2", "CPF02"),
        ("O4101", "04101"),
    ],
)
def test_lookalikes_and_padding_meet_in_the_second_tier(typed, printed):
    assert loose_key(printed) in lookalike_keys(typed)
    assert code_key(printed) not in lookup_keys(typed)  # only the second tier: an exact code wins


@pytest.mark.parametrize(("one", "other"), [("OL1", "11"), ("E106", "E108"), ("E12", "E102"), ("BB", "b.b.")])
def test_lookalike_keys_still_tell_codes_apart(one, other):
    assert loose_key(one) not in lookalike_keys(other)


@pytest.mark.parametrize(
    ("question", "code"),
    [
        ("drv OC1 after start", "OC1"),
        ("inverter trip oH1", "oH1"),
        ("drive shows F0003", "F0003"),
        ("err 102", "102"),
        ("fault E102", "E102"),
        ("alarm: 12", "12"),
        ("error E7 on start", "E7"),
        ("报警E102", "E102"),
        ("故障码 12", "12"),
        ("故障12怎么处理", "12"),
        ("what is E-102?", "E-102"),
        ("AZL52 shows code 99 and burner won't start", "99"),
        ("code 4 flashes on the driver", "4"),
        ("Vitotronic zeigt Störung 18", "18"),
        ("Störungscode b3 am Kessel", "b3"),
        ("Fehlercode: 12", "12"),
        ("Stoerung E5", "E5"),
        ("Presto shows Warnung 44", "44"),
        ("warning 12 on the conveyor drive", "12"),
        ("ebike display says 03 and no assist", "03"),
    ],
)
def test_cue_words_before_a_code(question, code):
    [match] = [m for m in MENTION.finditer(question) if code in m.group(0)]
    assert (match.group("bare") or match.group("cued")) == code
    assert code_key(code) in lookup_keys(match.group(0))


@pytest.mark.parametrize(
    "question", ["drive 2 stops at night", "the inverter 3 is noisy", "trip 5 times", "the gauge shows 10 bar"]
)
def test_a_device_word_is_no_cue_for_a_bare_number(question):
    assert [m.group(0) for m in MENTION.finditer(question)] == []


def test_codes_read_aloud_or_typed_apart_are_looked_up():
    found = [m.group(0) for m in TYPED_TOKEN.finditer("it shows E r r 0 4, before that E 102")]
    assert found == ["E r r 0 4", "E 102"] and [code_key(f) for f in found] == ["ERR04", "E102"]
    assert [m.group(0) for m in TYPED_TOKEN.finditer("press 1 2 3, then a b c")] == []


@pytest.mark.parametrize("cell", ["oH1", "Uv1", "CPF02", "ocA", "E.OC3", "Er6", "b.b."])
def test_mnemonic_codes_in_a_code_column(cell):
    assert parse_code_cell(cell) == cell


@pytest.mark.parametrize(("text", "code"), [("oH1 Heatsink overheat", "oH1"), ("ocA — Overcurrent", "ocA")])
def test_mnemonic_codes_in_a_heading(text, code):
    heading = parse_heading(text, emphasized=True)
    assert heading is not None and heading.code == code


@pytest.mark.parametrize("word", ["OC", "ON", "NO", "Yes", "Max"])
def test_an_ordinary_word_is_no_code_from_prose(word):
    assert parse_code_cell(word) is None  # a column of ON/OFF is settings, not codes
    assert parse_heading(f"{word} the drive stops", emphasized=True) is None
    assert [m.group(0) for m in MENTION.finditer(f"the {word} lamp is lit")] == []
    assert named_alarm(word) == word  # in a column headed as alarms it is one


@pytest.mark.parametrize("text", ["CN1 Encoder connector", "A.C. supply", "Part8. FAQ", "Step2 Wiring", "Fig3 Layout"])
def test_connector_and_abbreviation_headings_are_no_codes(text):
    assert parse_heading(text, emphasized=True) is None


@pytest.mark.parametrize(
    ("cell", "code"),
    [("[E07]", "E07"), ("E07:", "E07"), ("*E07*", "E07"), ("AL-07/", "AL-07"), ("E07(1)", "E07"), ("“oH1”", "oH1")],
)
def test_a_code_cell_is_read_without_the_marks_printed_around_the_code(cell: str, code: str) -> None:
    assert parse_code_cell(cell) == code


@pytest.mark.parametrize(
    ("cell", "code"), [("E 9001", "E9001"), ("W 8005", "W8005"), ("ALM 12", "12"), ("Err 07", "07")]
)
def test_a_code_printed_with_its_letter_apart_is_read_in_a_code_column(cell: str, code: str) -> None:
    """Heat pump controllers list `E 9001`; a cue word and its number stay the number (`ALM 12` is 12)."""
    assert parse_code_cell(cell) == code


@pytest.mark.parametrize("cell", ["[3]", "1:", "(2)", "E07 (see note)", "e 9001", "M 8", "E 9001 / 80"])
def test_a_number_with_marks_or_a_code_with_words_is_no_code_cell(cell: str) -> None:
    assert parse_code_cell(cell) is None
