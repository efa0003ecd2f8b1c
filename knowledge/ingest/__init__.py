"""Manual ingestion: PDFs in, one SQLite index out. A manual's stages, in the order a build runs them:

- `pdf.py` reads a PDF's text in reading order (PyMuPDF, symbol fonts, letter-spaced lines), with `bands.py`
  (running headers and footers), `ruled.py` (ruled tables by PyMuPDF's own steps) and `tables.py` (unruled
  and scanned tables); `ocr.py` reads scanned pages and table cells with Tesseract;
- `languages.py` tells a page's language and holds each language's fault words; `sections.py` finds the
  fault sections, `records.py` assembles fault entries from their tables, headings and sentences, `passages.py` cuts every page into passages, `metadata.py` reads vendor, model, version and
  language, `safety.py` the hazard statements;
- `extract.py` runs these on one manual, and `build.py` builds the index from many: the schema, reuse of
  unchanged manuals, embedding, the atomic swap, and the index's status; `opinion_vectors.py` the second
  opinion's vectors it stores when asked (multilingual-e5-small, clipped, as signed bytes).

Importing the package stays cheap (PyMuPDF loads with `pdf.py`): each name below is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from knowledge.ingest.build import (
        SCHEMA_VERSION,
        BuildError,
        BuildEvent,
        BuildReport,
        IndexSchemaMismatch,
        IndexStatus,
        build_index,
        outdated,
        read_status,
    )
    from knowledge.ingest.extract import Extraction, extract_manual, file_sha256
    from knowledge.ingest.metadata import normalize_version, version_order
    from knowledge.ingest.safety import for_entry, hands_on, read_statements

_EXPORTS = {
    "build_index": "knowledge.ingest.build",
    "read_status": "knowledge.ingest.build",
    "outdated": "knowledge.ingest.build",
    "BuildError": "knowledge.ingest.build",
    "BuildEvent": "knowledge.ingest.build",
    "BuildReport": "knowledge.ingest.build",
    "IndexSchemaMismatch": "knowledge.ingest.build",
    "IndexStatus": "knowledge.ingest.build",
    "SCHEMA_VERSION": "knowledge.ingest.build",
    "Extraction": "knowledge.ingest.extract",
    "extract_manual": "knowledge.ingest.extract",
    "file_sha256": "knowledge.ingest.extract",
    "normalize_version": "knowledge.ingest.metadata",
    "version_order": "knowledge.ingest.metadata",
    "for_entry": "knowledge.ingest.safety",
    "hands_on": "knowledge.ingest.safety",
    "read_statements": "knowledge.ingest.safety",
}

__all__ = [
    "SCHEMA_VERSION",
    "BuildError",
    "BuildEvent",
    "BuildReport",
    "Extraction",
    "IndexSchemaMismatch",
    "IndexStatus",
    "build_index",
    "extract_manual",
    "file_sha256",
    "for_entry",
    "hands_on",
    "normalize_version",
    "outdated",
    "read_statements",
    "read_status",
    "version_order",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
