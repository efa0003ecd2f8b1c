"""Assembling fault records from the fault sections of a manual: running-text entries (a code
as a heading, then cause and remedy paragraphs) and tables with a code column."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Literal

from knowledge.codes import Heading, code_key, hex_code, named_alarm, negative_code, parse_code_cell, parse_heading
from knowledge.ingest.languages import VOCABULARIES, every
from knowledge.ingest.pdf import Block, Page
from knowledge.ingest.safety import signal_statements
from knowledge.ingest.sections import FAULT_WORDS
from knowledge.ingest.tables import FIELD_WORDS, MAX_HEADER_CHARS, column_roles, named_roles, numbers_rows
from knowledge.models import FaultRecord
from knowledge.text import CJK, join_lines

_LABEL = re.compile(
    r"^\s*(?P<label>"
    + "|".join(sorted((re.escape(w) for ws in FIELD_WORDS.values() for w in ws), key=len, reverse=True))
    + r")\s*[:：]\s*(?P<rest>.*)$",
    re.I | re.S,
)
# Numbered (1. 2) ①) and lettered (a) b.) steps; a letter needs its bracket or dot right after it.
_STEP = re.compile(
    r"^\s*(?:step\s*|步骤\s*)?(?P<n>\d{1,2}\s*[.)．、]|[a-hA-H][.)）])\s*(?=\S)(?P<rest>.*)$", re.I | re.S
)
_CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩"
# A sentence listing codes in prose: it says it lists codes, then "<code> indicating <meaning>" at
# least `MIN_LISTED` times, separated by commas or semicolons.
_SENTENCE_END = re.compile(r"(?<=[.。;；])\s+|(?<=[。；])")
_LIST_INTRO = re.compile(
    r"\b(?:error|fault|alarm|status)\s*(?:codes?|numbers?|states?)\b|错误码|故障码|报警码|错误代码|故障代码|报警代码",
    re.I,
)
_LISTED = re.compile(
    r"(?:^|[,;，；、:：]\s*(?:and\s+|or\s+)?)(?P<code>0x[0-9A-Fa-f]{1,4}|\d{1,4})\s*"
    r"(?:indicating|indicates|means|represents|stands for|=|表示|代表)\s*(?P<name>[^,;，；。]{3,80}?)\s*(?=[,;，；。]|\.?$)"
)
_NO_FAULT = re.compile(r"\s*(?:no (?:fault|error|alarm)|normal|ok\b|正常|无故障|无错误)", re.I)
MIN_LISTED = 3
MAX_TITLE_CHARS = 120
MIN_SAID = 10  # letters, digits or CJK characters of a line that says what a code means
# A line of an OCR'd page holding one token, what it stands for in brackets after it (`O.L(OVER LOAD)`).
_GLOSSED = re.compile(r"(?P<token>[^\s()（）]{1,12})\s*(?:[(（](?P<gloss>[^()（）]{1,40})[)）])?")
# A display's word in capitals alone on a line (a status `PEAK`, a key `ZERO`): a heading of something no fault.
_DISPLAY_WORD = re.compile(r"[A-Z]{2,8}")


@dataclass
class _Draft:
    code: str
    title: str
    page: int
    source: Literal["table", "text"]
    pages: set[int] = field(default_factory=set)
    symptom: list[str] = field(default_factory=list)
    cause: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    current: str = "cause"
    boxes: list[tuple[int, float, float, float, float]] = field(default_factory=list)

    def mark(self, page: int, bbox: tuple[float, float, float, float] | None) -> None:
        """Where a part of the entry is printed (a block, a table row)."""
        if bbox is not None:
            x0, y0, x1, y1 = (round(v, 1) for v in bbox)
            box = (page, x0, y0, x1, y1)
            if box not in self.boxes:
                self.boxes.append(box)

    def add(self, field_name: str, text: str) -> None:
        self.current = "steps" if field_name == "remedy" else field_name
        if text:
            getattr(self, self.current).append(text)

    def extend_current(self, text: str) -> None:
        target = getattr(self, self.current)
        if target and self.current == "steps":
            target[-1] = join_lines(f"{target[-1]}\n{text}")
        else:
            target.append(text)

    def record(self) -> FaultRecord:
        return FaultRecord(
            code=self.code,
            title=self.title,
            symptom=" ".join(self.symptom),
            cause=" ".join(self.cause),
            steps=self.steps,
            page=self.page,
            pages=sorted(self.pages | {self.page}),
            source=self.source,
            boxes=self.boxes,
        )


@dataclass
class Assembly:
    records: list[FaultRecord]
    duplicates: int


def assemble(
    pages: list[Page], body_size: float, fault_pages: set[int], not_codes: frozenset[str] = frozenset()
) -> Assembly:
    """Entries come from fault-section pages only: elsewhere codes are cross-references and numbers are parameters;
    but a list that says what it lists (a sentence of codes and their meanings, a list of codes a line each after
    words that name faults) counts on any page. `not_codes`: keys that look like codes but name something else (the
    machine model `HP-200`)."""
    code_lists = {
        (page.number, n): drafts
        for page in pages
        for n, block in enumerate(page.blocks)
        if (drafts := _code_lines(block, page.number))
    }
    listed = _from_prose_lists(pages) + [draft for drafts in code_lists.values() for draft in drafts]
    pages = [page for page in pages if page.number in fault_pages]
    # A code listed in a sentence says what it means; a table row with nothing but the same number
    # (a parts list's "No.") is then merged into it, not it into the row.
    drafts = _from_text(pages, body_size, set(code_lists)) + listed + _from_tables(pages)
    merged: dict[str, FaultRecord] = {}
    duplicates = 0
    for draft in drafts:
        record = draft.record()
        # A symptom's entry (a troubleshooting table keyed by what the machine does) has no code: its key is
        # the symptom as printed, so that each is its own entry.
        key = code_key(record.code) if record.code else f"\0{' '.join(record.title.casefold().split())}"
        if key in not_codes:
            continue
        if key in merged:
            duplicates += 1
            merged[key] = merged[key].merge(record)
        else:
            merged[key] = record
    return Assembly(records=list(merged.values()), duplicates=duplicates)


def _from_text(pages: list[Page], body_size: float, code_lists: set[tuple[int, int]]) -> list[_Draft]:
    """`code_lists`: the blocks (page, index) that list codes a line each, read as entries already (`assemble`)."""
    drafts: list[_Draft] = []
    current: _Draft | None = None
    displayed = False  # `current` is headed by a display code alone on an OCR'd line (`_display_heading`)
    for page in pages:
        statements = {line for statement in signal_statements(page.blocks) for line in statement.lines}
        for index, block in enumerate(page.blocks):
            emphasized = block.bold or block.size > body_size + 0.5
            shown = _display_heading(block, page.blocks[index + 1 : index + 2]) if page.ocr else None
            heading = parse_heading(join_lines(block.text), emphasized) or shown
            if heading:
                current = _Draft(code=heading.code, title=heading.title, page=page.number, source="text")
                current.mark(page.number, block.bbox)
                drafts.append(current)
                displayed = heading is shown
                continue
            if displayed and _DISPLAY_WORD.fullmatch(block.text.strip()):
                current, displayed = None, False  # the list goes on with what is no fault (`PEAK`, a key's `ZERO`)
                continue
            rest = _without(block, {n for b, n in statements if b == index})
            if rest is not block:
                # A CAUTION beside the steps is no cause or step, and its bold signal word no heading that
                # ends the entry: it stays where the entry is printed, for knowledge.ingest.safety to read there.
                if current is not None:
                    current.pages.add(page.number)
                    current.mark(page.number, block.bbox)
                if not rest.text.strip():
                    continue
                block = rest
            if (
                current is not None
                and not current.title
                and len(block.text) <= MAX_TITLE_CHARS
                and not _LABEL.match(unicodedata.normalize("NFKC", block.text))
            ):
                current.title = join_lines(block.text)  # a code printed alone, its message below it
                current.mark(page.number, block.bbox)
                continue
            if (page.number, index) in code_lists:
                current, displayed = None, False
                continue
            led = _code_led(block)
            if led is not None:  # a row of an unruled table: code, name, then the description
                current, displayed = led, False
                current.page = page.number
                current.mark(page.number, block.bbox)
                drafts.append(current)
                continue
            if emphasized:  # a section heading without a code ends the record
                current = None
                continue
            if current is None:
                continue
            current.pages.add(page.number)
            current.mark(page.number, block.bbox)
            for unit in _units(block.text):
                _add_unit(current, unit)
    return drafts


def _display_heading(block: Block, after: list[Block]) -> Heading | None:
    """On an OCR'd page no font tells a heading: a display code alone on its line heads its entry, as a
    heading font does on a text page (`L.BAT`, `E-01`, `O.L(OVER LOAD)`: the brackets say what it stands for,
    its title), where the line `after` it says what it means. Letters with a digit, a dot or a dash, printed as
    one token: a word alone on a line is a key's or a status's name, a number numbers a list, and `L. BAT` is
    a drawing's label, spaced out. A drawing's labels (a connector's `ENC2`, a menu's `EE-SEL`) line up alone
    too, each over another label, a stray mark or a caption."""
    match = _GLOSSED.fullmatch(unicodedata.normalize("NFKC", block.text).strip())
    code = parse_code_cell(match.group("token")) if match else None
    if match is None or code is None or not re.search(r"[A-Za-z]", code) or not re.search(r"[\d.\-]", code):
        return None
    if not after or not _says(after[0].text):
        return None
    return Heading(code=code, title=" ".join((match.group("gloss") or "").split()))


def _says(text: str) -> bool:
    """Whether a line is a sentence or a part of one: words enough, more than one of them (CJK runs as words)."""
    return sum(c.isalnum() for c in text) >= MIN_SAID and (" " in text.strip() or CJK.search(text) is not None)


def _from_prose_lists(pages: list[Page]) -> list[_Draft]:
    """Codes a sentence lists with their meanings, as protocol notes print them: "the error code is of
    uint8 type, with 0 indicating no fault, 1 indicating motor over-temperature fault, 2 indicating
    over-current fault…". The sentence names what it lists, so it counts on any page."""
    drafts: list[_Draft] = []
    for page in pages:
        for block in page.blocks:
            for sentence in _SENTENCE_END.split(join_lines(block.text)):
                if not _LIST_INTRO.search(sentence):
                    continue
                listed = [m for m in _LISTED.finditer(sentence) if not _NO_FAULT.match(m.group("name"))]
                if len(listed) < MIN_LISTED:
                    continue
                for match in listed:
                    draft = _Draft(
                        code=match.group("code"), title=match.group("name").strip(), page=page.number, source="text"
                    )
                    draft.mark(page.number, block.bbox)
                    drafts.append(draft)
    return drafts


def _without(block: Block, lines: set[int]) -> Block:
    """The block without the given lines (a hazard statement set in it); the block itself if none."""
    if not lines:
        return block
    kept = [n for n in range(len(block.text.splitlines())) if n not in lines]
    texts = block.text.splitlines()
    starts = block.line_x if len(block.line_x) == len(texts) else ()
    return replace(
        block, text="\n".join(texts[n] for n in kept), line_x=tuple(starts[n] for n in kept) if starts else ()
    )


# A line of a list of codes: letters and a number, as a display shows them (`Er   14`), a colon, what it means.
_CODE_LINE = re.compile(r"^\s*(?P<letters>[A-Za-z]{1,4})[ \t]*(?P<number>\d{1,5})\s*[:：=]\s*(?P<name>\S.*)$")
# Lines of one such list a block prints, at least: fewer may be a pin-out or a note's references.
MIN_CODE_LINES = 3


def _code_lines(block: Block, page: int) -> list[_Draft]:
    """The codes a block lists a line each after words that name faults (`Liste möglicher Störungsanzeigen:`, then
    `Er    1 : Warmwasserfühler 1 defekt`): lines of one prefix with a number, a colon and their meaning, as a
    controller's handbook prints its display codes. The named faults say what the list is, on any page: codes, not
    a pin-out's `Pin 1:` lines or a procedure's `Step 1:`."""
    lines = unicodedata.normalize("NFKC", block.text).splitlines()
    matches = [(n, _CODE_LINE.match(line)) for n, line in enumerate(lines)]
    found = [(n, match) for n, match in matches if match is not None]
    if len(found) < MIN_CODE_LINES:
        return []
    letters = max({m.group("letters") for _, m in found}, key=lambda p: sum(m.group("letters") == p for _, m in found))
    listed = [(n, m) for n, m in found if m.group("letters") == letters]
    first = listed[0][0]
    if len(listed) < MIN_CODE_LINES or not FAULT_WORDS.search("\n".join(lines[:first])):
        return []
    drafts = []
    for _, match in listed:
        draft = _Draft(
            code=f"{letters}{match.group('number')}", title=match.group("name").strip(), page=page, source="text"
        )
        draft.mark(page, block.bbox)
        drafts.append(draft)
    return drafts


def _code_led(block: Block) -> _Draft | None:
    """A row of an unruled table read as one block: a code alone on its first line (with letters:
    `0x0400`, `Er4`; a bare number may be anything), its name on the next. Later lines that start
    where the name starts continue the name (the name cell wrapped); the others describe."""
    lines = block.text.splitlines()
    starts = list(block.line_x) if len(block.line_x) == len(lines) else [None] * len(lines)
    rows = [(line, x) for line, x in zip(lines, starts) if line.strip()]
    if len(rows) < 2 or not re.search(r"[A-Za-z]", rows[0][0]):
        return None
    code = parse_code_cell(rows[0][0])
    if code is None:
        return None
    name_x = rows[1][1]
    wrapped = [name_x is not None and x is not None and abs(x - name_x) < 2 for _, x in rows[2:]]
    in_name = [line for (line, _), name in zip(rows[2:], wrapped) if name]
    described = [line for (line, _), name in zip(rows[2:], wrapped) if not name]
    draft = _Draft(code=code, title=join_lines("\n".join([rows[1][0], *in_name])), page=0, source="text")
    for unit in _units("\n".join(described)):
        _add_unit(draft, unit)
    return draft


def _units(text: str) -> list[str]:
    """Lines regrouped into logical units: a label or a step number starts a new one."""
    units: list[str] = []
    for line in text.splitlines():
        normal = unicodedata.normalize("NFKC", line)
        if not units or _LABEL.match(normal) or _STEP.match(normal) or line.lstrip()[:1] in _CIRCLED:
            units.append(line)
        else:
            units[-1] += "\n" + line
    return [join_lines(unicodedata.normalize("NFKC", unit)) for unit in units if unit.strip()]


def _add_unit(draft: _Draft, unit: str) -> None:
    label = _LABEL.match(unit)
    if label:
        draft.add(_field_of(label.group("label")), label.group("rest").strip())
        return
    step = _STEP.match(unit)
    if step or unit[:1] in _CIRCLED:
        draft.add("remedy", (step.group("rest") if step else unit[1:]).strip())
        return
    draft.extend_current(unit)


def _field_of(label: str) -> str:
    label = label.lower()
    return next(name for name, words in FIELD_WORDS.items() if label in words)


def _from_tables(pages: list[Page]) -> list[_Draft]:
    drafts: list[_Draft] = []
    roles: dict[int, str] | None = None
    headed = named = listed = False  # listed: the roles are a symptom table's read without a header
    columns = 0
    for page in pages:
        for table in page.tables:
            rows = _merge_split_columns(table.rows)
            boxes = table.row_boxes if len(table.row_boxes) == len(rows) else [None] * len(rows)
            if any(_is_parameter_header(row) for row in rows[:2]):
                roles = None  # a parameter or parts list printed inside a fault section
                continue
            header_at, header, lines = _header(rows)
            # Symptoms beside what to do about them, read on a text page (OCR garbles a scanned table's cells:
            # `+ cause` over `Check-up`).
            lists = not page.ocr and _lists_symptoms(rows[(header_at or 0) + lines :])
            if header_at is not None:
                printed = column_roles(header)
                rows, boxes = rows[header_at + lines :], boxes[header_at + lines :]
                roles, headed, columns = _header_roles(header, rows), True, len(header)
                code_at = next((i for i, role in roles.items() if role == "code"), None)
                if code_at is not None and _numbers_things(header, code_at):
                    roles = None  # a list of pins, parts or models printed inside a fault section
                    continue
                # "Alarm", "Fault": names may stand for codes; so may the short tokens of a column the
                # header left unnamed ("Display | Error | Cause | Remedy" over `OCA`, `*LV`). No code column:
                # a troubleshooting table keyed by symptom (`_symptom_row`).
                named = code_at is not None and (
                    bool(FAULT_WORDS.search(header[code_at])) or "code" not in printed.values()
                )
                listed = False
            elif (
                roles is None
                or len(rows[0]) != columns
                or (lists and "code" in roles.values())
                or (listed and not lists)
            ):
                # No header (or a new table: symptoms go on no table of codes, and a table after symptoms read
                # without a header goes on with them only listing symptoms too): the column where most cells are
                # codes is the code column.
                roles, headed, named, columns = _roles_from_content(rows), False, False, len(rows[0])
                printed = roles or {}
                listed = roles is None and lists
                if listed:
                    # No codes, no header: what the machine does, each beside what to do about it (the Z550iQ's
                    # `4.1 Verhaltensweisen des Gerätes`), read as a symptom table's rows.
                    roles, headed = {0: "symptom", 1: "remedy"}, True
                    printed = roles  # no row of it is a header repeated
            for row, box in zip(rows, boxes):
                if row and column_roles(row) == printed:
                    continue  # the header repeated on a continuation page
                _add_row(drafts, roles or {}, row, page.number, headed, named, box)
    return drafts


# A symptom as a troubleshooting table prints one: a phrase of a few words (`Das Gerät löst den Schutzschalter aus`,
# `Vibration of the washing machine`), not a label or a value.
_SYMPTOM_WORDS = (2, 15)
# What to do about it says more than the symptom: its remedy cells hold this many times its letters, or more.
_REMEDY_SHARE = 1.5


def _lists_symptoms(rows: list[list[str]]) -> bool:
    """Whether a table of two columns without a header (on a fault section's page) pairs symptoms with what to
    do about them: each first cell a phrase of a few words with no digit in it, each second cell filled, and the
    second column saying more than the first."""
    if len(rows) < 2 or any(len(row) != 2 for row in rows):
        return False
    symptoms = [join_lines(row[0]) for row in rows]
    remedies = [join_lines(row[1]) for row in rows]
    low, high = _SYMPTOM_WORDS
    return (
        all(low <= len(symptom.split()) <= high and not any(c.isdigit() for c in symptom) for symptom in symptoms)
        and all(remedies)
        and sum(map(len, remedies)) >= _REMEDY_SHARE * sum(map(len, symptoms))
    )


def _numbers_things(header: list[str], code_at: int) -> bool:
    """Whether a code column numbers things that are no faults, its rows (`No.`, `序号`) or the things it lists
    (`Pin No.`, `Part No.`, `Model No.`, `LED No.`), in a table whose header names no fault and says nothing of
    causes, remedies or symptoms: a parts list's `No. | Name | No. | Name`, whose second name is no description
    of a fault. A fault table numbered by its rows says what to do (`No. | Name | Cause | Remedy`)."""
    cell = " ".join(header[code_at].split())
    of = re.fullmatch(r"(.+?)\s*(?:no\.?|number)", cell, re.I)
    return (
        (numbers_rows(header[code_at]) or (of is not None and not FAULT_WORDS.search(of.group(1))))
        and not any(FAULT_WORDS.search(name) for name in header)
        and not {"cause", "remedy", "symptom"} & named_roles(header)
    )


def _header(rows: list[list[str]]) -> tuple[int | None, list[str], int]:
    """Where a table's header is, what it says and how many rows it takes: one row that names a code
    column, or two read as one where each header cell wraps onto a second row (`Error` over `code`), or
    one that names a fault's remedy over a column of short tokens it does not name, or a first row over the
    messages a display shows (whose rows may then name alarms and warnings, `Alarm / Warning`: no header).
    A row that starts with a number or repeats a cell is data, whatever words its cells use (`_is_data`)."""
    if rows and _names_messages(rows[0]):
        return 0, rows[0], 1
    for at, row in enumerate(rows[:3]):
        if _names_a_code_column(row):
            return at, row, 1
        if at + 1 < len(rows) and not _names_a_code_column(rows[at + 1]):
            joined = [f"{a} {b}".strip() for a, b in zip(row, rows[at + 1], strict=False)]
            if _names_a_code_column(joined) and not any(_is_data(cells) for cells in (row, rows[at + 1])):
                return at, joined, 2
        if _names_a_fault(row) and _token_column(rows[at + 1 :], len(row)) is not None:
            return at, row, 1
        if _names_symptoms(row) and len(rows) > at + 1 and _roles_from_content(rows[at + 1 :]) is None:
            return at, row, 1
    return None, [], 0


def _names_symptoms(row: list[str]) -> bool:
    """A troubleshooting table's header keyed by what the machine does, not by a code: a symptom or a fault
    named (`Symptom | Check | Remedy`, `Problem | Possible cause | Corrective action`, `Störung | Ursache |
    Abhilfe`) with what to do about it. Only over rows no column of which holds codes (`_roles_from_content`)."""
    roles = set(column_roles(row).values())
    return "code" not in roles and "remedy" in roles and bool(roles & {"symptom", "title"}) and not _is_data(row)


# What a display shows, named in a header: its messages are what a technician reads off the machine.
_MESSAGE = re.compile("|".join(word for v in VOCABULARIES for word in v.messages))


def _names_a_fault(row: list[str]) -> bool:
    """A header that names what to do about something it also names or explains (a state table of LEDs
    and relays names no remedy)."""
    roles = set(column_roles(row).values())
    return "code" not in roles and "remedy" in roles and bool(roles & {"cause", "title"}) and not _is_data(row)


def _names_messages(row: list[str]) -> bool:
    """A header over the messages a display shows and what they mean or what to do about them
    (`Displayed Message | Type | Meaning`, `Problem | Display Message | Possible Cause | Corrective Action`):
    the messages are the codes."""
    roles = column_roles(row)
    return (
        "code" not in roles.values()
        and _message_column(row, roles) is not None
        and bool({"cause", "remedy"} & set(roles.values()))
        and not _is_data(row)
    )


def _message_column(header: list[str], roles: dict[int, str]) -> int | None:
    return next((i for i, role in roles.items() if role == "title" and _MESSAGE.search(header[i].lower())), None)


def _header_roles(header: list[str], data: list[list[str]]) -> dict[int, str]:
    """The roles a header's words give its columns; where they name no code column, the first column of
    short tokens is it, and a name the header gave that column moves to the first column it left unnamed;
    where no column holds such tokens, the column of the messages a display shows is it."""
    roles = column_roles(header)
    if "code" in roles.values():
        return roles
    code = _token_column(data, len(header))
    if code is None:
        message = _message_column(header, roles)
        if message is not None:
            roles[message] = "code"  # the messages themselves, each its own name
        return roles
    if roles.get(code) == "title":
        spare = next((i for i in range(len(header)) if i not in roles), None)
        if spare is not None:
            roles[spare] = "title"
    roles[code] = "code"
    return roles


# What a display shows in a code column no header word names: one token of up to six letters and digits,
# with a footnote mark (`*LV`), dots or a dash (`E.S.`, `b.b.`, `OL-1`), and not a word as text prints it:
# capitals alone, a capital after the first letter, a digit or a dot (`OCA`, `oH`, `SP0`; not `Menu`, `error`),
# nor a state an LED or a contact is in (`ON`, `OFF`).
_TOKEN_CELL = re.compile(
    r"[*†]?(?!(?:ON|OFF|OK|YES|NO|NC|N/?A)\b)(?=\S*(?:[A-Z]{2}|[a-z][A-Z]|[0-9.]))[A-Za-z0-9][A-Za-z0-9.\-]{0,5}[*†]?"
)


def _token_column(data: list[list[str]], width: int) -> int | None:
    """The first column whose filled cells nearly all hold one short token, alone or over the name of what it
    shows (`E04` over `Niederdruck im Kältekreis`), in a table of at least two such rows."""
    for i in range(width):
        filled = [row[i] for row in data if i < len(row) and row[i].strip()]
        if len(filled) >= 2 and sum(_leads_with_token(cell) for cell in filled) >= 0.8 * len(filled):
            return i
    return None


def _leads_with_token(cell: str) -> bool:
    """Whether a cell is one short token, or its first line is one (the name printed below it)."""
    first = next(line.strip() for line in cell.splitlines() if line.strip())
    return bool(_TOKEN_CELL.fullmatch(join_lines(cell).strip()) or _TOKEN_CELL.fullmatch(first))


def _names_a_code_column(row: list[str]) -> bool:
    return "code" in column_roles(row).values() and not _is_data(row)


def _is_data(row: list[str]) -> bool:
    """Whether a row is data, whatever words its cells use: it starts with a number (`0023`; a header may
    start with a code-like name, `AL8` over a column of LED states), or it repeats a cell (a header names
    each column once; a drawing's labels repeat, `POWER` over every column of a sequence chart)."""
    filled = [join_lines(cell) for cell in row if cell.strip()]
    return bool(filled) and (filled[0].isdigit() or len(set(filled)) < len(filled))


def _merge_split_columns(rows: list[list[str]]) -> list[list[str]]:
    """Ruling lines that stop short split one printed column into several table columns, most
    of them empty, and a header cell centred over them need not sit above its data: each used
    column joins the header cell nearest to it."""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    used = [i for i in range(width) if any(row[i].strip() for row in rows)]
    header = next((row for row in rows if sum(1 for i in used if row[i].strip()) >= 2), rows[0])
    anchors = [i for i in used if header[i].strip()] or used
    groups: list[list[int]] = [[] for _ in anchors]
    for i in used:
        groups[min(range(len(anchors)), key=lambda n: (abs(anchors[n] - i), anchors[n]))].append(i)
    return [["\n".join(row[i] for i in group if row[i].strip()) for group in groups] for row in rows]


# A header with one of these heads a parameter list, or a parts list (its "No." column numbers items).
_PARAMETER_WORDS = every("parameters")


def _is_parameter_header(row: list[str]) -> bool:
    short = [cell for cell in row if 0 < len(cell.strip()) <= MAX_HEADER_CHARS]
    return sum(bool(_PARAMETER_WORDS.search(cell)) for cell in short) >= 1 and len(short) >= 2


def _roles_from_content(rows: list[list[str]]) -> dict[int, str] | None:
    width = len(rows[0])
    if width < 2:
        return None
    shares = [
        sum(parse_code_cell(join_lines(row[i])) is not None for row in rows if i < len(row)) / len(rows)
        for i in range(width)
    ]
    code_columns = [i for i in range(width) if shares[i] >= 0.5]
    if not code_columns:
        return None
    code = code_columns[0]  # the display code comes first; a second code column is what the bus reports
    lengths = [sum(len(row[i]) for row in rows if i < len(row)) for i in range(width)]
    text_columns = [i for i in range(width) if i not in code_columns and lengths[i]]
    roles = {code: "code", **{i: "alias" for i in code_columns[1:2]}}
    if text_columns:
        roles[text_columns[0]] = "title"
    if len(text_columns) > 1:
        roles[text_columns[-1]] = "remedy"
    if len(text_columns) > 2:
        roles[text_columns[1]] = "cause"
    return roles


def _add_row(
    drafts: list[_Draft],
    roles: dict[int, str],
    row: list[str],
    page: int,
    headed: bool,
    named: bool,
    box: tuple[float, float, float, float] | None,
    name: str = "",
) -> None:
    """One row's entry (or its entries, or the rest of the entry above). `name`: what the code cell printed
    under its code, the fault's name."""
    cells = {role: row[index] if index < len(row) else "" for index, role in roles.items()}
    if headed and "code" not in cells:
        _symptom_row(drafts, cells, page, box)
        return
    if (over := _codes_over_name(cells.get("code", ""), headed)) is not None:
        (first, *others), name = over
        column = next(i for i, role in roles.items() if role == "code")
        made = len(drafts)
        _add_row(
            drafts, roles, [first if i == column else c for i, c in enumerate(row)], page, headed, named, box, name
        )
        if len(drafts) > made:
            # One fault printed with several codes (`E16 / E17`): an entry each, sharing its causes and steps, also
            # those of the rows below it.
            drafts.extend(replace(drafts[-1], code=code) for code in others)
        return
    if named and (several := _names_several(cells.get("code", ""))):
        column = next(i for i, role in roles.items() if role == "code")
        for name in several:  # one row for the alarms a display may show for one problem: an entry each
            _add_row(
                drafts, roles, [name if i == column else cell for i, cell in enumerate(row)], page, headed, named, box
            )
        return
    cells["code"] = join_lines(cells.get("code", "")).strip("*†")  # `*LV`: a footnote says more about it
    code = _cell_code(cells["code"], headed)
    if code is None and named:
        code = named_alarm(cells["code"])
        cells.setdefault("title", code or "")
    if code is not None and code.isdigit() and len(code) < 3 and not headed:
        code = None  # a short number in a column nobody named: a step, a pin, a count
    if code is None:
        if drafts and not cells["code"] and drafts[-1].source == "table":
            last = drafts[-1]
            if cells.get("cause", "").strip() and last.boxes and last.boxes[-1][0] == page:
                _add_check(last, cells, page, box)  # another cause under a code cell merged over its rows
            else:
                _continue_row(last, cells, page, box)  # a row split over two lines or pages
        return
    alias = join_lines(cells.get("alias", ""))
    title = join_lines("\n".join((name, cells.get("title", ""))))
    draft = _Draft(code=code, title=f"{title} ({alias})" if alias else title, page=page, source="table")
    draft.mark(page, box)
    draft.add("symptom", join_lines(cells.get("symptom", "")))
    draft.add("cause", join_lines(cells.get("cause", "")))
    draft.steps = _steps(cells.get("remedy", ""))
    drafts.append(draft)


def _symptom_row(
    drafts: list[_Draft], cells: dict[str, str], page: int, box: tuple[float, float, float, float] | None
) -> None:
    """A row of a troubleshooting table keyed by symptom: an entry without a code, named by its symptom (or the
    fault it names), with the check or cause and the remedy. A row whose symptom cell is empty goes on with the
    entry above (the symptom printed once over several checks)."""
    symptom = join_lines(cells.get("symptom", ""))
    title = join_lines(cells.get("title", "")) or symptom
    if not title:
        if not (drafts and drafts[-1].source == "table" and not drafts[-1].code):
            return
        if not cells.get("cause", "").strip():
            _continue_row(drafts[-1], cells, page, box)  # a row broken over two lines or pages
            return
        _add_check(drafts[-1], cells, page, box)  # another check under the same symptom
        return
    draft = _Draft(code="", title=title, page=page, source="table")
    draft.mark(page, box)
    draft.add("symptom", symptom)
    draft.add("cause", join_lines(cells.get("cause", "")))
    draft.steps = _steps(cells.get("remedy", ""))
    drafts.append(draft)


# Codes printed side by side for one fault: `E16 / E17`, `F1, F2`, `E16 und E17`.
_CODE_LIST = re.compile(r"\s*(?:[/,;&]|\b(?:and|or|und|oder)\b)\s*", re.I)


def _codes_over_name(cell: str, headed: bool) -> tuple[list[str], str] | None:
    """The codes a code cell prints on its first lines, and the name printed under them (`E04` over
    `Niederdruck im Kältekreis`; `E16 / E17` over `Lüfter gestört`), where the cell is not one code as a whole.
    Numbers only as a cell's one line (`3/9`): a number over words is as often an item's number, or a speck
    OCR read in a list of LEDs, as a fault's code."""
    if _cell_code(join_lines(cell), headed) is not None:
        return None
    lines = [line.strip() for line in cell.splitlines() if line.strip()]
    codes: list[str] = []
    at = 0  # lines of codes read
    while at < len(lines) and (listed := _code_list(lines[at], headed, numbers=len(lines) == 1)):
        codes += listed
        at += 1
    if not codes or (len(codes) == 1 and len(lines) == 1):
        return None
    return codes, join_lines("\n".join(lines[at:]))


def _code_list(line: str, headed: bool, numbers: bool) -> list[str]:
    """The codes one line of a code cell lists, all of one kind: with letters, or (`numbers`) all numbers
    (`E 9001 / 80` is one code and where it was found, no list); none if any part of it is no code."""
    codes = [_cell_code(part, headed) for part in _CODE_LIST.split(line)]
    kinds = {code.isdigit() for code in codes if code}
    if None in codes or len(kinds) != 1 or (True in kinds and not numbers):
        return []
    return [code for code in codes if code]


def _cell_code(text: str, headed: bool) -> str | None:
    """A code cell's code, with the marks around it left out; a hex or negative code only in a column named a code."""
    text = text.strip("*†")
    code = parse_code_cell(text)
    return code if code is not None or not headed else hex_code(text) or negative_code(text)


def _names_several(cell: str) -> list[str]:
    """The alarm names a cell lists a line each (`Low Lvl Wrn` over `LW Shutdown`), where the cell is no one
    name (wrapped onto two lines: `Blowdown` over `Unsuccessful`) and most of its lines are names."""
    lines = [line.strip() for line in cell.splitlines() if line.strip()]
    if len(lines) < 2 or named_alarm(join_lines(cell)) is not None:
        return []
    names = [line for line in lines if named_alarm(line)]
    return names if 2 * len(names) > len(lines) else []


def _add_check(draft: _Draft, cells: dict[str, str], page: int, box: tuple[float, float, float, float] | None) -> None:
    """Another check or cause of the entry above, in a row of its own: its remedy is a step of its own."""
    draft.pages.add(page)
    draft.mark(page, box)
    draft.add("cause", join_lines(cells["cause"]))
    draft.steps.extend(_steps(cells.get("remedy", "")))


def _continue_row(
    draft: _Draft, cells: dict[str, str], page: int, box: tuple[float, float, float, float] | None
) -> None:
    draft.pages.add(page)
    draft.mark(page, box)
    for role in ("title", "symptom", "cause"):
        extra = join_lines(cells.get(role, ""))
        if extra:
            if role == "title":
                draft.title = join_lines(f"{draft.title}\n{extra}")
            else:
                draft.add(role, extra)
    more = _steps(cells.get("remedy", ""))
    if more and draft.steps and not _STEP.match(unicodedata.normalize("NFKC", cells.get("remedy", ""))):
        draft.steps[-1] = join_lines(f"{draft.steps[-1]}\n{more.pop(0)}")
    draft.steps.extend(more)


def _steps(cell: str) -> list[str]:
    steps: list[str] = []
    for unit in _units(cell):
        step = _STEP.match(unit)
        steps.append((step.group("rest") if step else unit).strip())
    return [s for s in steps if s]
