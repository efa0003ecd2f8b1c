"""Who a manual is for: title, vendor, model, version, languages and validity, read from its text.

A PDF's document information is mostly noise on real manuals (author
"Administrator" or "12345", title "Microsoft Word - x.doc"), so each field is
read from the manual itself, the first hit winning:

- labelled lines on the first pages ("Model: HP-200", "型号：HP-200");
- title: the cover's large print, a plausible document title, the running header, the file name;
- vendor: the company named with a legal form (Inc., Ltd., GmbH, 有限公司), copyright
  lines counting extra, then the manual's web domain;
- model: "DYN2 Series" / "GT 系列", then the product designation (G540, FR-SX) printed
  on the cover or in the running header, then one the file name and the text share;
- version: "V7.10", "Rev 4", "Version 3.30" on the cover, running header, document title or file name.

An operator corrects what the text gets wrong in a sidecar file `<file>.pdf.toml`
beside the PDF, or with CLI flags; those overrides are applied last.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.ingest.languages import LANGUAGES, languages_of
from knowledge.models import ManualError, ManualInfo
from knowledge.text import CJK, join_lines

if TYPE_CHECKING:  # PyMuPDF is not loaded by a search that only needs version order
    from knowledge.ingest.pdf import Block, Page, RawManual

_LABELS = {
    "vendor": ("vendor", "manufacturer", "maker", "厂商", "制造商", "生产厂家", "厂家"),
    "model": ("machine model", "model", "型号", "机型"),
    "version": ("manual version", "version", "revision", "版本号", "版本"),
    "valid_for": ("valid for", "applies to", "适用范围", "适用于"),
}
_VERSION = re.compile(
    r"(?<![\w.])(?:(?:version|revision|ver\.?|rev\.?|版本)\s*[:：]?\s*(\d+(?:\.\d+){0,2})|v\s?(\d+(?:\.\d+){1,2}))(?![\w.])",
    re.I,
)
OVERRIDE_KEYS = ("vendor", "model", "version", "title", "language", "device", "valid_for")
COVER_PAGES = 2
COVER_TITLE = 1.4  # a cover's largest print is at least this many times the body size
TITLE_PRINT = 1.25  # cover text this much larger than the body belongs to the title
MAX_TITLE = 160

# Large print on a first page that is not a title: section headings of a manual without a cover.
_NOT_TITLE = re.compile(
    r"^(?:\d{1,2}(?:\.\d{1,2})*\.?\s|chapter\s|第.{1,3}章)|^(?:introduction|contents|table of contents|preface|foreword|目\s*录|前\s*言)$",
    re.I,
)
_CONTACT = re.compile(r"www\.|https?:|@|\btel\b|\bfax\b|电话", re.I)
_WORDS = re.compile(r"[A-Za-z]{2}|[\u4e00-\u9fff]")  # logo letters ("M M", "TM") are no title
_FILE_LIKE = re.compile(
    r"\.(?:docx?|pdf|indd|xlsx?|rtf|txt|wpd)$|^microsoft\s+\w+\s+-|^<[0-9a-f]+>$|^untitled|[\\/]", re.I
)

# A company is named with its legal form. Words before it, capitalised (or a CJK run), are the name.
_LEGAL_EN = r"(?i:co\.?,?\s*ltd\.?|company\s+limited|corporation|corp\.|inc\.|ltd\.|gmbh|llc|s\.a\.|s\.p\.a\.|b\.v\.)"
# Without a period a legal form must not run on into a capitalised word: "LIMITED WARRANTY" is no company.
_LEGAL_EN_BARE = r"(?:Corp|Inc|Ltd|Limited|CORP|INC|LTD|LIMITED|AG|SE|KG|A/S)\b"
_COMPANY_EN = re.compile(
    rf"((?:[A-Z][\w&'’-]*\s+){{0,3}}?[A-Z][\w&'’-]*),?\s+(?:{_LEGAL_EN}|{_LEGAL_EN_BARE}(?!\s+[A-Z]))"
)
_COMPANY_ZH = re.compile(r"([\u4e00-\u9fff]{2,16})(?:股份有限公司|有限责任公司|有限公司|株式会社)")
# Words that start a sentence about a company rather than its name ("Contact DMM Technology Corp.").
_NOT_NAME = {"copyright", "contact", "the", "by", "from", "of", "and", "for", "please", "within", "all"}
# Characters after which a Chinese company name starts ("本手册由…", "版权归…", "对您选择…").
_ZH_BEFORE_NAME = re.compile(r".*[由归对在是为与和向被的于择用]")
_COPYRIGHT = re.compile(r"©|\(c\)\s*\d{4}|copyright|版权", re.I)
COPYRIGHT_WEIGHT = 3
# A company a trademark notice or an approval names is someone else: "Windows is a trademark of Microsoft
# Corporation", "Approvals: Underwriters Laboratories Inc. Listed", "Zertifizierungsbedingungen von Underwriters
# Laboratories Inc. (UL)", "Recognized Components". On three development manuals the certifier had been read as
# their vendor.
_SOMEONE_ELSES = re.compile(r"trademark|商标|approv|\blisted\b|recogni[sz]ed|certif|zertifi|认证", re.I)
_DOMAIN = re.compile(r"(?:www\.|https?://)(?:www\.)?([a-z0-9-]{3,})\.[a-z]{2,3}\b", re.I)
# Sites that publish what anyone uploads: a manual's link to its code or its videos there names the host, not the
# vendor (`https://github.com/...` had made `Github` a development manual's vendor).
_HOSTS = frozenset(
    {"github", "gitlab", "bitbucket", "sourceforge", "youtube", "youtu", "google", "dropbox", "baidu", "bilibili"}
)

# A product designation: a capital, then capitals and digits, with a digit or one hyphen (G540, FR-SX, GSK980MDi).
_DESIGNATION = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)?[a-z]{0,2})(?![\w-])")
# Ratings and ports print like designations: IP20, NEMA 4X, AC220V, RS485, CN1.
_NOT_MODEL = re.compile(r"^(?:IP\d\d|NEMA\d*|[AD]C\d+V?|RS-?\d{3}|USB\d*|CN\d+|CH\d+|M\d+|UL\d+|ISO\d+|EN\d+|IEC\d+)$")
# "DYN2 Series", "GT 系列"; not an all-capitals line ("ALL SERIES").
_SERIES = re.compile(r"(?<![\w-])([A-Z][A-Z0-9-]{1,11}[a-z]{0,2})\s*(?:Series|series|系列)")
MIN_BODY_MODEL = 4  # a designation found only in the body must be this long (not "G02", "CN1")


def manual_info(path: Path, sha256: str, raw: RawManual, overrides: dict[str, str] | None = None) -> ManualInfo:
    cover_blocks = [b for page in _cover_pages(raw) for b in page.blocks]
    cover = "\n".join(b.text for b in cover_blocks)
    labelled = _labelled(cover)
    body = [join_lines(b.text) for page in raw.pages for b in page.blocks]
    big_print = _cover_title(raw)
    doc_title = raw.metadata.get("title", "")
    header = _running_title(raw)
    stem = " ".join(path.stem.replace("_", " ").split())
    title = big_print or (doc_title if _plausible_title(doc_title, path) else "") or header or stem
    # Each page told by itself (a German manual's first pages may be an English cover and contents), judged on the
    # pages' whole text: a fault list is mostly tables, and the running text left beside them may be no more than
    # a heading and the codes' Latin letters.
    languages = languages_of([page.text for page in raw.pages])
    info = ManualInfo(
        file=path.name,
        sha256=sha256,
        title=title,
        vendor=labelled.get("vendor") or _vendor(raw),
        model=labelled.get("model") or _model(raw, path, big_print, header, cover_blocks, body),
        version=normalize_version(labelled.get("version", ""))
        or _first_version(big_print, *raw.bands.texts, cover, doc_title, stem),
        language=languages[0],
        languages=languages,
        valid_for=labelled.get("valid_for", ""),
        pages=len(raw.pages),
        scanned_pages=[page.number for page in raw.pages if page.scanned],
    )
    return _apply(info, overrides or {})


def read_sidecar(pdf_path: Path) -> dict[str, str]:
    """The operator's corrections for `manual.pdf`, from `manual.pdf.toml` beside it ({} if none).

    Keys: vendor, model, version, title, language (one of `languages.LANGUAGES`), device, valid_for; all strings.
    """
    sidecar = pdf_path.with_name(pdf_path.name + ".toml")
    try:
        data = tomllib.loads(sidecar.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManualError(f"{sidecar.name}: cannot read the sidecar file ({exc})") from None
    for key, value in data.items():
        if key not in OVERRIDE_KEYS:
            raise ManualError(f"{sidecar.name}: unknown key {key!r} (allowed: {', '.join(OVERRIDE_KEYS)})")
        if not isinstance(value, str):
            raise ManualError(f"{sidecar.name}: {key!r} must be a string, not {type(value).__name__}")
        if key == "language" and value not in LANGUAGES:
            raise ManualError(f"{sidecar.name}: 'language' must be one of {', '.join(LANGUAGES)}, not {value!r}")
    return data


def merge_overrides(sidecar: dict[str, str], cli: dict[str, str | None]) -> dict[str, str]:
    """CLI flags beat the sidecar; an empty or missing flag overrides nothing."""
    return {**sidecar, **{key: value for key, value in cli.items() if value}}


def normalize_version(text: str) -> str:
    """`2.1`, `v2.1`, `Version 2.1`, `Rev 4` → `V2.1`, `V4`; empty when there is no version number."""
    text = unicodedata.normalize("NFKC", text).strip()
    match = re.fullmatch(r"(?:v|ver\.?|version|rev\.?|revision|版本)?\s*(\d+(?:\.\d+){0,2})", text, re.I)
    return f"V{match.group(1)}" if match else _first_version(text)


def version_order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def _apply(info: ManualInfo, overrides: dict[str, str]) -> ManualInfo:
    update: dict[str, str | list[str]] = {key: value for key, value in overrides.items() if value}
    if "version" in update:
        # "2.1" and "V2.1" must sort and compare like extracted versions; "A1.5" stays as typed.
        update["version"] = normalize_version(overrides["version"]) or overrides["version"]
    if "language" in update:  # the operator's word on the manual's language is its every page's
        update["languages"] = [overrides["language"]]
    return info.model_copy(update=update)


def _first_version(*texts: str) -> str:
    for text in texts:
        match = _VERSION.search(unicodedata.normalize("NFKC", text))
        if match:
            return f"V{match.group(1) or match.group(2)}"
    return ""


def _labelled(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in unicodedata.normalize("NFKC", text).splitlines():
        for name, words in _LABELS.items():
            for word in words:
                match = re.match(rf"^\s*{re.escape(word)}\s*[:：]\s*(\S.*)$", line, re.I)
                if match and name not in found:
                    found[name] = match.group(1).strip()
    return found


def _cover_pages(raw: RawManual) -> list[Page]:
    """The first pages with text: a scanned cover has none, the title page follows it."""
    return [page for page in raw.pages if page.blocks][:COVER_PAGES]


def _cover_title(raw: RawManual) -> str:
    """The large print of a cover page; empty when the first page is no cover."""
    pages = _cover_pages(raw)
    if not pages:
        return ""
    blocks = [b for b in pages[0].blocks if not _company_names(_tidy(b.text))]  # the maker's logo
    biggest = max((b.size for b in blocks), default=0.0)
    if biggest < COVER_TITLE * raw.body_size or _NOT_TITLE.search(_tidy(max(blocks, key=lambda b: b.size).text)):
        return ""
    for floor in (TITLE_PRINT * raw.body_size, biggest):  # all large print, else only the largest
        parts = [
            _tidy(b.text)
            for b in blocks
            if b.size >= floor and _WORDS.search(b.text) and not _NOT_TITLE.search(_tidy(b.text))
        ]
        title = " ".join(parts)
        if len(title) <= MAX_TITLE:
            return title
    return ""  # a page of large paragraphs is a preface, not a cover


def _tidy(text: str) -> str:
    return " ".join(join_lines(unicodedata.normalize("NFKC", text)).split())


def _plausible_title(title: str, path: Path) -> bool:
    """Document titles are often a file name, a Word export name or a number."""
    title = title.strip()
    return (
        sum(c.isalpha() for c in title) >= 4
        and not _FILE_LIKE.search(title)
        and title.lower() != path.stem.lower()
        and not ("_" in title and " " not in title)
    )


def _running_title(raw: RawManual) -> str:
    """The running header or footer that names the manual, not the page number, address or web site."""
    for text in raw.bands.texts:
        text = _tidy(text)
        words = len(text.split()) >= 2 or len(CJK.findall(text)) >= 4
        if words and sum(c.isalpha() for c in text) >= 4 and not _CONTACT.search(text):
            return text
    return ""


def _vendor(raw: RawManual) -> str:
    """The company the manual names most often with a legal form, else its web domain."""
    pages = [[join_lines(b.text) for b in page.blocks] for page in raw.pages]
    texts = [text for page in pages for text in page] + raw.bands.texts
    votes: Counter[str] = Counter()
    spellings: dict[str, Counter[str]] = {}
    for text in texts:
        if _SOMEONE_ELSES.search(text):
            continue
        weight = COPYRIGHT_WEIGHT if _COPYRIGHT.search(text) else 1
        for name in _company_names(text):
            # A name counts for each of its tails: "Contact DMM Technology" also votes for
            # "DMM Technology" and "Technology".
            for tail in _tails(name):
                votes[tail.casefold()] += weight
                spellings.setdefault(tail.casefold(), Counter())[tail] += 1
    if not votes:
        # A vendor prints its web site on the cover, the back pages or every page; a site
        # elsewhere in the text may be a distributor's or a tool's.
        contact = [text for page in pages[:COVER_PAGES] + pages[-2:] for text in page] + raw.bands.texts
        return _domain_vendor(contact, texts)
    # The longest name with more than half the votes of the best: "DMM Technology", not the
    # generic "Technology" every variant ends with, nor a one-off "Contact DMM Technology".
    best = max(votes.values())
    key = max((k for k, v in votes.items() if v > best / 2), key=len)
    forms = spellings[key].most_common()
    return next((form for form, _ in forms if not form.isupper()), forms[0][0])


def _company_names(text: str) -> list[str]:
    names = [m.group(1) for m in _COMPANY_EN.finditer(text)]
    names += [_ZH_BEFORE_NAME.sub("", m.group(1)) for m in _COMPANY_ZH.finditer(text)]
    return [n for n in names if n]


def _tails(name: str) -> list[str]:
    if name.isascii() or " " in name:
        words = name.split()
        while words and words[0].lower() in _NOT_NAME:
            words = words[1:]
        return [" ".join(words[i:]) for i in range(len(words))]
    return [name[i:] for i in range(len(name) - 1)]


def _domain_vendor(contact: list[str], texts: list[str]) -> str:
    """`www.invertekdrives.com` → the spelling the text uses, "Invertek Drives"."""
    domains = Counter(
        label for text in contact for m in _DOMAIN.finditer(text) if (label := m.group(1).lower()) not in _HOSTS
    )
    if not domains:
        return ""
    label = domains.most_common(1)[0][0]
    letters = [c for c in label if c.isalnum()]
    spelled = re.compile(r"(?<![\w.])" + r"[\s-]?".join(map(re.escape, letters)) + r"(?![\w.])", re.I)
    forms = Counter(m.group(0) for text in texts for m in spelled.finditer(text))
    mixed = [form for form, _ in forms.most_common() if not form.islower() and not form.isupper()]
    return mixed[0] if mixed else label.capitalize()


def _model(raw: RawManual, path: Path, big_print: str, header: str, cover: list[Block], body: list[str]) -> str:
    for text in (big_print, header, *(b.text for b in cover)):
        match = _SERIES.search(unicodedata.normalize("NFKC", text))
        if match:
            return match.group(1)
    text = "\n".join(body)
    # The running header is printed on every page but cut out of the body: count it per page.
    in_header = {t for band in raw.bands.texts for t in _designations(band)}

    def count(token: str) -> int:
        printed = len(re.findall(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text))
        return printed + (len(raw.pages) // 2 if token in in_header else 0)

    headline = _designations(big_print) | in_header
    if headline:
        return max(headline, key=lambda t: (count(t), _print_size(t, cover)))
    # A designation only in the body is believed when the file is named after it too (EP100 in
    # "CNCmakers-EP100_B__QuickGuide-EN.pdf"); the body alone holds too many codes and part numbers.
    stem = path.stem.upper()
    named = {
        t
        for b in cover
        for t in _designations(b.text)
        if len(t) >= MIN_BODY_MODEL and re.search(rf"(?<![A-Z0-9]){re.escape(t.upper())}(?![A-Z0-9])", stem)
    }
    if named:
        return max(named, key=lambda t: (count(t), _print_size(t, cover)))
    return _file_model(path)


def _designations(text: str) -> set[str]:
    found = set()
    for token in _DESIGNATION.findall(unicodedata.normalize("NFKC", text)):
        if 3 <= len(token) <= 12 and re.search(r"[\d-]", token) and not _NOT_MODEL.match(token):
            found.add(token)
    return found


def _print_size(token: str, blocks: list[Block]) -> float:
    return max((b.size for b in blocks if token in b.text), default=0.0)


def _file_model(path: Path) -> str:
    """A designation in the file name ("gsk980mdi_alarm_list"), when the text has none."""
    for part in re.split(r"[-_\s.()（）]+", path.stem):
        # A few letters then digits ("ep100", "gsk980mdi"), not a word with a year ("manual2021").
        if (
            re.fullmatch(r"[A-Za-z]{1,4}\d+[A-Za-z0-9]*", part)
            and len(part) >= MIN_BODY_MODEL
            and not _VERSION.fullmatch(part)
        ):
            return part.upper()
    return ""
