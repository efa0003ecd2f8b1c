"""Manual ingestion and search: PDFs in, a SQLite index out, fault codes and symptoms looked up in it.

The names below are the package's API; the modules behind them are its internals. Importing the
package stays cheap: each name is imported from its module on first use (a fault-code lookup must
load neither spaCy nor torch, and `build_index` pulls in PyMuPDF), so `from knowledge import X`
costs what `from knowledge.<module> import X` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from knowledge.code_linker import CodeLinker
    from knowledge.code_mentions import CodeMention, CodeMentions
    from knowledge.codes import canonical_id, code_key, fault_key, lookup_keys, loose_key, reported_code, scope_key
    from knowledge.config import KnowledgeConfig
    from knowledge.embed import Embedder
    from knowledge.ingest.build import (
        SCHEMA_VERSION,
        BuildError,
        BuildEvent,
        BuildReport,
        IndexSchemaMismatch,
        IndexStatus,
        build_index,
        read_status,
    )
    from knowledge.models import FaultRecord, Hit, ManualError, ManualInfo, Match, Scope, SearchResult
    from knowledge.search import IndexMissing, ManualIndex

_EXPORTS = {
    # searching an index
    "ManualIndex": "knowledge.search",
    "IndexMissing": "knowledge.search",
    "Scope": "knowledge.models",
    "SearchResult": "knowledge.models",
    "Hit": "knowledge.models",
    "Match": "knowledge.models",
    "FaultRecord": "knowledge.models",
    "ManualInfo": "knowledge.models",
    "ManualError": "knowledge.models",
    # building one
    "build_index": "knowledge.ingest.build",
    "read_status": "knowledge.ingest.build",
    "IndexStatus": "knowledge.ingest.build",
    "IndexSchemaMismatch": "knowledge.ingest.build",
    "BuildError": "knowledge.ingest.build",
    "BuildEvent": "knowledge.ingest.build",
    "BuildReport": "knowledge.ingest.build",
    "SCHEMA_VERSION": "knowledge.ingest.build",
    "Embedder": "knowledge.embed",
    "KnowledgeConfig": "knowledge.config",
    # fault codes
    "code_key": "knowledge.codes",
    "canonical_id": "knowledge.codes",
    "fault_key": "knowledge.codes",
    "lookup_keys": "knowledge.codes",
    "loose_key": "knowledge.codes",
    "reported_code": "knowledge.codes",
    "scope_key": "knowledge.codes",
    "CodeMention": "knowledge.code_mentions",
    "CodeMentions": "knowledge.code_mentions",
    "CodeLinker": "knowledge.code_linker",
}

__all__ = [
    "SCHEMA_VERSION",
    "BuildError",
    "BuildEvent",
    "BuildReport",
    "CodeLinker",
    "CodeMention",
    "CodeMentions",
    "Embedder",
    "FaultRecord",
    "Hit",
    "IndexMissing",
    "IndexSchemaMismatch",
    "IndexStatus",
    "KnowledgeConfig",
    "ManualError",
    "ManualIndex",
    "ManualInfo",
    "Match",
    "Scope",
    "SearchResult",
    "build_index",
    "canonical_id",
    "code_key",
    "fault_key",
    "lookup_keys",
    "loose_key",
    "read_status",
    "reported_code",
    "scope_key",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
