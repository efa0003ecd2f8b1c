"""Which page passages are searched by meaning as well as by words (`knowledge.ingest.passages`)."""

from knowledge.ingest.passages import EMBEDDED_PER_PAGE, page_passages
from knowledge.ingest.pdf import Page
from knowledge.ingest.sections import FaultSections

# Paragraphs long enough that no two make one passage.
PARAGRAPHS = [f"Paragraph {n}: " + " ".join(["the unit beeps and the display shows nothing."] * 9) for n in range(5)]


def _embedded(page: Page, sections: FaultSections | None = None, entry_pages: frozenset[int] = frozenset()) -> list:
    passages = page_passages([page], sections or FaultSections(), set(entry_pages), {page.number: "en"})
    assert len(passages) > EMBEDDED_PER_PAGE
    return [p.embedded for p in passages]


def test_a_text_page_outside_fault_sections_is_embedded_by_its_opening_passages():
    embedded = _embedded(Page(1, text_blocks=PARAGRAPHS))
    assert embedded == [n < EMBEDDED_PER_PAGE for n in range(len(embedded))]


def test_every_passage_of_an_ocr_page_is_embedded():
    """A scan seldom gives the headings that make a fault section, and its troubleshooting table (symptom, cause,
    remedy) is further down the page than the opening passages: by words alone, OCR's misread words lose it."""
    assert all(_embedded(Page(1, text_blocks=PARAGRAPHS, ocr=True)))


def test_every_passage_of_a_fault_section_page_without_entries_is_embedded():
    sections = FaultSections(pages={1})
    assert all(_embedded(Page(1, text_blocks=PARAGRAPHS), sections))
    assert not all(_embedded(Page(1, text_blocks=PARAGRAPHS), sections, frozenset({1})))
