"""The rows a search reads from the index are what `IndexRow` (the type ranking and search are
checked against) says they are: `ManualIndex` casts its SELECT's rows to it."""

from pathlib import Path
from typing import get_type_hints

from knowledge.search import ManualIndex
from knowledge.search.rows import IndexRow


def test_every_row_a_search_reads_has_exactly_the_columns_and_types_of_an_index_row(demo_index: Path):
    index = ManualIndex(demo_index)
    rows = list(index._current().rows.values())
    hints = get_type_hints(IndexRow)
    assert {row["kind"] for row in rows} == {"entry", "page"}
    for row in rows:
        assert set(row) == set(hints)
        assert [k for k, t in hints.items() if t is int and not isinstance(row[k], int)] == []
        assert [k for k, t in hints.items() if t is str and not isinstance(row[k], str)] == []
    index.close()
