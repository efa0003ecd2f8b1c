"""A page's language is its own, fault sections and tables are found in each language a manual comes in, and a
troubleshooting table keyed by symptom gives an entry per symptom, without a code.

The manuals are written here, in our own words: a German fault table, a German and an English symptom table, a
manual whose pages are English and German.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pymupdf
import pytest

from edge.run import build_document, render_text
from knowledge.codes import code_key
from knowledge.embed import Embedder
from knowledge.ingest.build import SCHEMA_VERSION, IndexSchemaMismatch, build_index, read_status
from knowledge.ingest.extract import extract_manual
from knowledge.ingest.languages import detect, languages_of, question_language
from knowledge.ingest.tables import column_roles
from knowledge.models import Scope
from knowledge.search import ManualIndex
from knowledge.text import terms
from tests.fixtures.hard_manuals import Pen, Sheet, cover, english_cover, save
from tools.contract import ToolContext
from tools.manual_search import ManualSearchTool
from tools.registry import ToolRegistry

GERMAN_FAULTS = [
    ("E01", "Vorlauffühler defekt", "Der Fühler ist nicht angeschlossen oder das Kabel ist gebrochen.", "Kabel und Stecker prüfen, Fühler ersetzen."),
    ("E02", "Überdruck im Heizkreis", "Das Ausdehnungsgefäß ist zu klein oder nicht gefüllt.", "Vordruck des Gefäßes prüfen und Anlage entlüften."),
    ("E07", "Pumpe blockiert", "Die Umwälzpumpe dreht nicht, weil Schmutz im Laufrad sitzt.", "Pumpe ausbauen und das Laufrad reinigen."),
]  # fmt: skip
GERMAN_PROSE = (
    "Wenn die Anlage eine Störung erkennt, wird der Fehlercode auf der Anzeige blinkend dargestellt. "
    "Die Anlage schaltet dabei den Verdichter ab und wartet, bis die Ursache behoben ist."
)
# One problem a table: the symptom printed once over its checks, each with its remedy.
SYMPTOMS = [
    (
        "Motor hums but the shaft does not turn",
        [
            ("Is one of the three supply phases missing?", "Measure the phases at the input terminals and replace the blown fuse."),
            ("Is the brake still engaged?", "Check the brake supply and release the brake by hand to test."),
        ],
    ),
    (
        "Display stays dark after switching on",
        [
            ("Is the mains voltage present at the terminals?", "Switch on the supply isolator and check the fuse."),
            ("Is the keypad cable seated?", "Push the keypad cable back into its socket."),
        ],
    ),
]  # fmt: skip
ENGLISH_CODES = [
    ("F12", "Output overcurrent", "Short circuit at the motor terminals or a ramp too short.", "Check the motor cable insulation and lengthen the ramp."),
    ("F31", "Heatsink overtemperature", "The cabinet is too warm or the heatsink fan stopped.", "Clean the heatsink and replace the fan."),
]  # fmt: skip


def _german_manual(folder: Path) -> Path:
    doc = pymupdf.open()
    sheet = Sheet(doc)
    cover(sheet, "Wärmepumpe WP-40 Bedienungsanleitung", {"Hersteller": "Beispielwerk", "Modell": "WP-40"})
    sheet.heading("1 Sicherheit")
    sheet.paragraph(
        "Lesen Sie diese Anleitung vor der Installation vollständig durch und bewahren Sie sie bei dem Gerät auf. "
        "Arbeiten an der Anlage dürfen nur von einer Fachkraft ausgeführt werden."
    )
    sheet.heading("7 Störungen und Fehlercodes")
    sheet.paragraph(GERMAN_PROSE)
    sheet.table((55, 120, 170, 150), ("Fehlercode", "Störungsmeldung", "Ursache", "Abhilfe"), GERMAN_FAULTS)
    sheet.heading("8 Fehlerbehebung ohne Anzeige")
    sheet.paragraph("Nicht jede Störung wird mit einem Code angezeigt. Prüfen Sie dann die folgenden Punkte.")
    sheet.table(
        (150, 170, 175),
        ("Störung", "Ursache", "Abhilfe"),
        [
            (
                "Die Wohnung wird nicht warm",
                "Die Heizkurve ist zu flach eingestellt.",
                "Heizkurve um eine Stufe anheben.",
            ),
            ("Das Gerät ist sehr laut", "Das Gerät steht nicht waagerecht auf dem Boden.", "Stellfüße nachstellen."),
        ],
    )
    return save(doc, folder / "waermepumpe_de.pdf", "Wärmepumpe WP-40", "written for the fixloop tests")


def _drive_manual(folder: Path, german_appendix: bool = False) -> Path:
    """A drive manual with a fault-trip table of codes and a troubleshooting chapter of one problem per table
    (symptom | check | remedy), and with `german_appendix` a German page at its end."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    english_cover(sheet, "Compact Drive CD-7 User Guide", "Example Drives", "CD-7")
    sheet.heading("1 Installation")
    sheet.paragraph(
        "Mount the drive upright in a cabinet with free air above and below it. The drive must be earthed before "
        "the supply is switched on, and the motor cable should be screened."
    )
    sheet.heading("8 Fault trips")
    sheet.paragraph("When the drive trips, the display shows the fault code and the motor coasts to a stop.")
    sheet.table((45, 130, 170, 150), ("Code", "Fault", "Cause", "Remedy"), ENGLISH_CODES)
    sheet.heading("9 Troubleshooting")
    sheet.paragraph("The problems below show no fault code. Work through the checks in the order given.")
    for symptom, checks in SYMPTOMS:
        rows = [(symptom if n == 0 else "", check, remedy) for n, (check, remedy) in enumerate(checks)]
        sheet.table((150, 170, 175), ("Symptom", "Check", "Remedy"), rows, merge_empty=True)
    if german_appendix:
        sheet.new_page()
        sheet.heading("Anhang: Hinweise für den Betreiber")
        sheet.paragraph(
            "Dieses Gerät darf nur von einer Elektrofachkraft angeschlossen werden. Wenn der Antrieb eine Störung "
            "meldet, ist die Ursache zu beheben, bevor der Antrieb wieder eingeschaltet wird. Die Hinweise auf den "
            "vorherigen Seiten gelten auch für den Betrieb mit einem externen Bremswiderstand."
        )
    return save(doc, folder / "drive_cd7.pdf", "Compact Drive CD-7 User Guide", "written for the fixloop tests")


def test_a_text_s_language_is_told_by_its_words_and_letters() -> None:
    assert detect("Check the fan and clean the filter if it is dirty.") == "en"
    assert detect("Prüfen Sie den Lüfter und reinigen Sie den Filter, wenn er verschmutzt ist.") == "de"
    assert detect("检查风扇，如果过滤网脏了请清洁。") == "zh"
    # A program listing's `if` and `for` make no English page of a Chinese manual.
    listing = (
        "int clamp(float x, float x_min, float x_max) { if (x > x_max) x = x_max; else if (x < x_min) x = x_min; }"
    )
    assert detect(listing, "zh") == "zh"
    # Too little to tell: a code and a name take what they are printed among.
    assert detect("E07 Pumpe", "de") == "de" and detect("F12 Overcurrent", "en") == "en"
    # A page of two languages is both, the larger first; one that says nothing is its fallback's.
    english = "The drive must be earthed before the supply is switched on and the cover is closed."
    german = "Das Gerät darf nur von einer Fachkraft geöffnet werden, wenn die Spannung abgeschaltet ist."
    assert languages_of([english, german, german]) == ["de", "en"]
    assert languages_of(["E01 E02 E03"], "zh") == ["zh"]


@pytest.mark.parametrize(
    "question, language",
    [
        ("Was tun bei E07?", "de"),
        ("Fehler am Motor", "de"),
        ("Wärmepumpe zeigt E02", "de"),
        ("Warum läuft die Pumpe nicht", "de"),
        ("What does E07 mean on the WP-40", "en"),
        # A German name in an English question is outweighed by its English words.
        ("is the Vorlauffühler fault serious", "en"),
        ("motor overheating", "en"),
        ("E07", "en"),  # nothing to tell by
        ("伺服报警2 主电源电压", "zh"),
    ],
)
def test_a_question_s_language_is_told_by_a_word_or_two(question: str, language: str) -> None:
    assert question_language(question) == language


def test_german_header_words_name_the_columns() -> None:
    assert column_roles(("Fehlercode", "Störungsmeldung", "Ursache", "Abhilfe")) == {
        0: "code",
        1: "title",
        2: "cause",
        3: "remedy",
    }
    assert column_roles(("Störung", "Mögliche Ursache", "Maßnahmen")) == {0: "title", 1: "cause", 2: "remedy"}
    # A header's words in the plural, as German forms it (`Lösung`, `Lösungen`; `Ursache`, `Ursachen`).
    assert column_roles(("Anzeige", "Mögliche Ursachen", "Mögliche Lösungen")) == {0: "title", 1: "cause", 2: "remedy"}
    assert column_roles(("Meldungen", "Maßnahme")) == {0: "title", 1: "remedy"}
    # A display column and the fault it shows: the fault is no cause when a cause column follows.
    assert column_roles(("Anzeige", "Störung", "Störungsursache", "Abhilfemaßnahme")) == {
        0: "title",
        2: "cause",
        3: "remedy",
    }


def test_a_german_manual_is_german_and_its_fault_table_gives_entries(tmp_path: Path) -> None:
    extraction = extract_manual(_german_manual(tmp_path), ocr=False)
    assert (extraction.info.language, extraction.info.languages) == ("de", ["de"])
    coded = {r.code: r for r in extraction.records if r.code}
    assert sorted(coded) == ["E01", "E02", "E07"]
    for code, title, cause, remedy in GERMAN_FAULTS:
        record = coded[code]
        assert (record.title, record.cause, " ".join(record.steps), record.language) == (title, cause, remedy, "de")
    assert {p.language for p in extraction.passages} == {"de"}


def test_a_german_symptom_table_gives_entries_without_codes(tmp_path: Path) -> None:
    extraction = extract_manual(_german_manual(tmp_path), ocr=False)
    symptoms = [(r.title, r.cause, r.steps) for r in extraction.records if not r.code]
    assert symptoms == [
        (
            "Die Wohnung wird nicht warm",
            "Die Heizkurve ist zu flach eingestellt.",
            ["Heizkurve um eine Stufe anheben."],
        ),
        ("Das Gerät ist sehr laut", "Das Gerät steht nicht waagerecht auf dem Boden.", ["Stellfüße nachstellen."]),
    ]


def test_a_troubleshooting_table_keyed_by_symptom_gives_an_entry_per_symptom(tmp_path: Path) -> None:
    """One problem a table, its symptom printed once over its checks: one entry each, with every check as a
    cause and every remedy as a step, and no code made up for it."""
    records = extract_manual(_drive_manual(tmp_path), ocr=False).records
    assert sorted(r.code for r in records if r.code) == ["F12", "F31"]
    symptoms = {r.title: r for r in records if not r.code}
    assert list(symptoms) == [symptom for symptom, _ in SYMPTOMS]
    for symptom, checks in SYMPTOMS:
        record = symptoms[symptom]
        assert record.symptom == symptom and record.source == "table"
        assert all(check in record.cause for check, _ in checks)
        assert record.steps == [remedy for _, remedy in checks]


def test_a_code_table_is_not_taken_for_a_symptom_table(tmp_path: Path) -> None:
    """A `Fault | Cause | Remedy` header over rows whose first column holds codes stays a table of codes."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    english_cover(sheet, "Pump Controller PC-2 Manual", "Example Pumps", "PC-2")
    sheet.heading("5 Faults")
    sheet.table(
        (80, 200, 215), ("Fault", "Cause", "Remedy"), [(c, f"{t}: {cause}", r) for c, t, cause, r in ENGLISH_CODES]
    )
    path = save(doc, tmp_path / "pump.pdf", "Pump Controller PC-2 Manual", "written for the fixloop tests")
    assert sorted(r.code for r in extract_manual(path, ocr=False).records) == ["F12", "F31"]


def test_each_page_and_passage_of_a_mixed_manual_is_in_its_own_language(tmp_path: Path) -> None:
    extraction = extract_manual(_drive_manual(tmp_path, german_appendix=True), ocr=False)
    assert extraction.info.language == "en" and "de" in extraction.info.languages
    last = max(p.page for p in extraction.passages)
    assert {p.language for p in extraction.passages if p.page == last} == {"de"}
    assert {p.language for p in extraction.passages if p.page < last} == {"en"}
    assert {r.language for r in extraction.records} == {"en"}


def test_the_operator_s_language_is_every_page_s(tmp_path: Path) -> None:
    extraction = extract_manual(_drive_manual(tmp_path, german_appendix=True), overrides={"language": "en"}, ocr=False)
    assert extraction.info.languages == ["en"] and {p.language for p in extraction.passages} == {"en"}


@pytest.fixture(scope="module")
def drive_index(tmp_path_factory: pytest.TempPathFactory) -> ManualIndex:
    folder = tmp_path_factory.mktemp("symptom-tables")
    db = folder / "index.sqlite"
    embedder = Embedder()
    build_index([_drive_manual(folder, german_appendix=True)], db, embedder=embedder)
    return ManualIndex(db, embedder=embedder)


def test_a_symptom_question_finds_the_symptom_s_entry_not_the_fault_trips(drive_index: ManualIndex) -> None:
    hits = drive_index.query("the motor hums but the shaft does not turn").hits
    assert hits, "a symptom the manual lists has an answer"
    first = hits[0]
    assert (first.kind, first.fault_code, first.title) == ("entry", "", SYMPTOMS[0][0])
    assert first.steps == [remedy for _, remedy in SYMPTOMS[0][1]]
    # Two symptoms are two answers, not one entry of an empty code.
    dark = drive_index.query("the display stays dark after switching on").hits
    assert dark and dark[0].title == SYMPTOMS[1][0]


def test_a_symptom_s_entry_is_headed_by_its_symptom_in_the_tool_and_the_answer(drive_index: ManualIndex) -> None:
    tool = ManualSearchTool(drive_index.path, {}, None)
    tool.warm()
    registry = ToolRegistry([tool])
    try:
        ctx = ToolContext(request_id="r", run_id="r", loop_step=1)
        obs = registry.call(ManualSearchTool.name, {"query": "the motor hums but the shaft does not turn"}, ctx, "o1")
    finally:
        registry.close()
    ref = next(item for item in obs.content if item.kind == "ref")
    assert ref.text.startswith(f"{SYMPTOMS[0][0]} (")
    answer = render_text(build_document("the motor hums but the shaft does not turn", [obs]))
    lines = answer.splitlines()
    assert any(line.startswith(f"{SYMPTOMS[0][0]} (") for line in lines) and f" — {SYMPTOMS[0][0]}" not in answer, (
        answer
    )


def test_a_symptom_s_entry_is_no_code(drive_index: ManualIndex) -> None:
    assert drive_index.lookup("F12").hits[0].title == "Output overcurrent"
    assert all(hit.fault_code for hit in drive_index.query("F31").hits if hit.kind == "entry")


@pytest.fixture(scope="module")
def two_language_index(tmp_path_factory: pytest.TempPathFactory) -> ManualIndex:
    """A German heat pump manual and an English drive manual in one index."""
    folder = tmp_path_factory.mktemp("two-languages")
    db = folder / "index.sqlite"
    embedder = Embedder()
    build_index([_german_manual(folder), _drive_manual(folder)], db, embedder=embedder)
    return ManualIndex(db, embedder=embedder)


@pytest.mark.parametrize(
    "question, scope, code",
    [
        # A German question about the English manual: its words meet the English rows through the glossary.
        ("Überstrom am Motorausgang, was tun?", None, "F12"),
        ("Kühlkörper zu heiß", None, "F31"),
        # An English question about the German manual, asked at its machine.
        ("what to do when the circulation pump is blocked", Scope(vendor="Beispielwerk", model="WP-40"), "E07"),
        ("overpressure in the heating circuit", Scope(vendor="Beispielwerk", model="WP-40"), "E02"),
    ],
)
def test_a_question_finds_its_answer_in_a_manual_of_another_language(
    two_language_index: ManualIndex, question: str, scope: Scope | None, code: str
) -> None:
    hits = two_language_index.query(question, scope).hits
    assert hits and hits[0].fault_code == code, [(hit.fault_code, hit.title) for hit in hits]


def test_a_german_question_is_answered_in_german_where_the_manual_is(two_language_index: ManualIndex) -> None:
    """A German question is German: the German rows are its own (the language prior, the edition shown)."""
    hits = two_language_index.query("Was bedeutet die Störungsmeldung Pumpe blockiert?").hits
    assert hits and (hits[0].fault_code, hits[0].language) == ("E07", "de")


def test_the_index_stores_each_row_s_language_and_the_manual_s_languages(drive_index: ManualIndex) -> None:
    with sqlite3.connect(drive_index.path) as conn:
        languages = json.loads(conn.execute("SELECT languages FROM manuals").fetchone()[0])
        rows = dict(conn.execute("SELECT language, count(*) FROM records GROUP BY language").fetchall())
    assert languages[0] == "en" and "de" in languages
    assert rows.keys() == {"en", "de"}


def test_an_index_of_the_schema_before_row_languages_asks_for_a_rebuild(drive_index: ManualIndex, tmp_path: Path):
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(drive_index.path) as conn, sqlite3.connect(old) as copy:
        conn.backup(copy)
        copy.execute("UPDATE meta SET value = '7' WHERE key = 'schema'")
    with pytest.raises(IndexSchemaMismatch, match=f"index schema 7, this fixloop reads {SCHEMA_VERSION}; rebuild it"):
        read_status(old)


# What the machine does, beside what to do about it: no header, no codes (as the Z550iQ prints its 4.1).
BEHAVIOUR = [
    ("Das Gerät heizt nicht sofort", "Nach dem Einschalten wartet das Gerät 30 Sekunden, bevor der Verdichter startet. Prüfen Sie, ob die Solltemperatur schon erreicht ist."),
    ("Das Gerät löst den Schutzschalter aus", "Prüfen Sie, ob der Schutzschalter und der Kabelquerschnitt für die Leistung des Geräts bemessen sind."),
    ("Am Verdampfer hat sich Eis gebildet", "Das Gerät startet gleich einen Abtauzyklus. Bleibt das Eis, den Verdampfer mit Wasser abspülen."),
]  # fmt: skip


def test_a_table_of_symptoms_without_a_header_gives_an_entry_per_symptom(tmp_path: Path) -> None:
    """A two-column table under a troubleshooting heading, without a header and without codes, whose first column
    says what the machine does and whose second says what to do: an entry per symptom (it gave none). A table of
    LED states beside it (short cells both) is no such table."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    cover(sheet, "Poolwärmepumpe PW-9 Anleitung", {"Hersteller": "Beispielwerk", "Modell": "PW-9"})
    sheet.heading("4 Problembehebung")
    sheet.paragraph("Prüfen Sie im Fall einer Betriebsstörung zuerst die folgenden Punkte.")
    sheet.heading("4.1 Verhaltensweisen des Gerätes")
    (first, *rest) = BEHAVIOUR
    sheet.table((170, 325), first, rest)  # the first row drawn where a header would be, as data
    sheet.heading("4.2 Anzeigen")
    sheet.table((170, 325), ("Grün an", "Bereit"), [("Grün blinkt", "Heizen"), ("Rot an", "Störung")])
    path = save(doc, tmp_path / "pool_de.pdf", "Poolwärmepumpe PW-9", "written for the fixloop tests")
    records = extract_manual(path, ocr=False).records
    assert [(r.code, r.title, " ".join(r.steps)) for r in records] == [("", s, remedy) for s, remedy in BEHAVIOUR]


def test_a_malfunction_chapter_is_a_fault_section(tmp_path: Path) -> None:
    """`Malfunction and solution` heads a troubleshooting table as `Troubleshooting` does: its rows are entries (the
    L11 washer's went on over a page that no fault heading covered, and gave none there)."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    english_cover(sheet, "Front Loader FL-3 Service Manual", "Example Appliances", "FL-3")
    sheet.heading("6 Malfunction and solution")
    rows = [
        ("Vibration of the machine", "Level the machine and fasten the feet; remove the transport bolts."),
        ("Foam spills from the drawer", "Use less detergent, and only detergent for front loaders."),
    ]
    sheet.table((170, 325), ("Description", "Solution"), rows)
    path = save(doc, tmp_path / "washer.pdf", "Front Loader FL-3 Service Manual", "written for the fixloop tests")
    records = extract_manual(path, ocr=False).records
    assert [(r.code, r.title, r.steps) for r in records] == [("", symptom, [remedy]) for symptom, remedy in rows]


# A Russian charge controller's fault table, its display codes printed with a Cyrillic `Е` as Russian editions do.
RUSSIAN_FAULTS = [
    ("1", "Е1", "Глубокий разряд аккумулятора", "Медленно мигает индикатор аккумулятора"),
    ("2", "Е4", "Короткое замыкание цепи нагрузки", "Быстро мигает индикатор нагрузки"),
    ("3", "Е10", "Перенапряжение на солнечном модуле", "Горит индикатор ошибки"),
]  # fmt: skip
# A robot controller's interface guide: what a command returns, negative numbers under 错误码, after a 报错 heading.
RETURNED_ERRORS = [
    ("0", "无错误", "命令下发成功"),
    ("-1", "命令执行失败", "已收到命令，但执行失败了"),
    ("-2", "机器人处于报警状态", "清除报警后重新下发指令"),
    ("-10000", "命令错误", "下发的命令不存在"),
]  # fmt: skip


def _russian_manual(folder: Path) -> Path:
    doc = pymupdf.open()
    sheet = Sheet(doc, Pen(regular="cjk", bold="cjk", size=9))
    cover(sheet, "Контроллер заряда СК-20 Руководство пользователя", {"Модель": "СК-20"})
    sheet.heading("1 Установка")
    sheet.paragraph(
        "Контроллер устанавливается вертикально на негорючую поверхность. Перед подключением аккумулятора "
        "убедитесь, что напряжение системы выбрано правильно, и не подключайте солнечный модуль первым."
    )
    sheet.heading("4 Отображение неисправностей")
    sheet.paragraph("При неисправности на дисплее отображается код ошибки и горит индикатор.")
    sheet.table((30, 70, 200, 195), ("№", "Код ошибки", "Описание", "Светодиодная индикация"), RUSSIAN_FAULTS)
    return save(doc, folder / "kontroller_ru.pdf", "Контроллер заряда СК-20", "written for the fixloop tests")


def test_a_russian_manual_is_russian_and_its_fault_table_gives_entries_by_latin_codes(tmp_path: Path) -> None:
    extraction = extract_manual(_russian_manual(tmp_path), ocr=False)
    assert extraction.info.language == "ru"
    coded = {r.code: r for r in extraction.records if r.code}
    # The display shows one E, whichever alphabet the manual printed it in.
    assert sorted(coded) == ["E1", "E10", "E4"]
    assert coded["E4"].title == "Короткое замыкание цепи нагрузки" and coded["E4"].language == "ru"
    assert question_language("контроллер показывает ошибку E4") == "ru"
    # Its words are words: a Russian question finds them by words, and a code typed either way is one term.
    assert terms("Короткое замыкание Е4") == terms("короткое замыкание E4") == ["короткое", "замыкание", "e4"]
    assert code_key("Е10") == code_key("E10") == "E10"


def test_a_command_s_negative_return_codes_under_an_error_heading_give_entries(tmp_path: Path) -> None:
    doc = pymupdf.open()
    sheet = Sheet(doc, Pen(regular="cjk", bold="cjk", size=9))
    cover(sheet, "机械臂TCP/IP远程控制接口文档", {"厂商": "示例机器人", "型号": "CR-5"})
    sheet.heading("2 报错说明")
    sheet.paragraph("指令下发后，控制器返回错误码，0 表示成功。")
    sheet.table((70, 200, 225), ("错误码", "描述", "备注"), RETURNED_ERRORS)
    extraction = extract_manual(save(doc, tmp_path / "robot_zh.pdf", "接口文档", "written for the fixloop tests"))
    coded = {r.code: r.title for r in extraction.records if r.code}
    assert {code: coded.get(code) for code in ("-1", "-2", "-10000")} == {
        "-1": "命令执行失败",
        "-2": "机器人处于报警状态",
        "-10000": "命令错误",
    }
