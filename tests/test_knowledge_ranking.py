"""Fusing a question's rankings: by their scores, each scaled by its ranking's best."""

from knowledge.search.ranking import fuse
from knowledge.search.rows import IndexRow
from knowledge.tuning import Tuning


def _entry(code: str) -> IndexRow:
    return IndexRow(
        id=hash(code) % 10_000,
        kind="entry",
        manual_sha256="m1",
        code=code,
        code_key=code.lower(),
        canonical_id="",
        title="",
        symptom="",
        cause="",
        steps="[]",
        snippet="",
        page=1,
        pages="[1]",
        ocr=0,
        fault=1,
        vendor="Acme",
        model="X1",
        vendor_key="acme",
        model_key="x1",
        version="",
        language="en",
        file="acme.pdf",
        manual_title="",
        valid_for="",
    )


def _codes(ranked) -> list[str]:
    return [row["code"] for row, _, _ in ranked]


def test_a_row_far_ahead_in_one_ranking_is_not_outvoted_by_one_low_in_both():
    # By reciprocal rank, `LOW` (third in both) beat `FAR` (first by words only): places, not distances.
    lexical = [(_entry("FAR"), 10.0), (_entry("A"), 9.0), (_entry("LOW"), 0.8)]
    semantic = [(_entry("B"), 0.60), (_entry("C"), 0.59), (_entry("LOW"), 0.30)]
    ranked = fuse([("lexical", lexical), ("semantic", semantic)], [], "en", True, Tuning())
    assert _codes(ranked).index("FAR") < _codes(ranked).index("LOW")


def test_rows_close_in_both_rankings_come_before_rows_close_in_one():
    lexical = [(_entry("BOTH"), 9.5), (_entry("WORDS"), 10.0)]
    semantic = [(_entry("MEANING"), 0.61), (_entry("BOTH"), 0.60)]
    ranked = fuse([("lexical", lexical), ("semantic", semantic)], [], "en", True, Tuning())
    assert _codes(ranked)[0] == "BOTH"
    assert ranked[0][2] == "semantic"  # the ranking that gave it the larger share (0.98 of its best, against 0.95)


def test_the_meanings_weight_and_the_other_languages_weight_count():
    lexical = [(_entry("WORDS"), 10.0)]
    semantic = [(_entry("MEANING"), 0.6)]
    own = [("lexical", lexical), ("semantic", semantic)]
    assert _codes(fuse(own, [], "en", True, Tuning(semantic_weight=2.0)))[0] == "MEANING"
    assert _codes(fuse(own, [], "en", True, Tuning(semantic_weight=0.5)))[0] == "WORDS"
    translated = [("lexical", [(_entry("OTHER"), 30.0)])]
    assert _codes(fuse([("lexical", lexical)], translated, "en", True, Tuning(cross_weight=0.7)))[0] == "WORDS"
    assert _codes(fuse([("lexical", lexical)], translated, "en", True, Tuning(cross_weight=1.5)))[0] == "OTHER"


def test_a_ranking_with_nothing_above_zero_counts_for_nothing():
    ranked = fuse([("lexical", [(_entry("A"), 0.0)]), ("semantic", [(_entry("B"), 0.5)])], [], "en", True, Tuning())
    assert _codes(ranked) == ["B"] and ranked[0][1] > 0
