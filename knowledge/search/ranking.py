"""A question's candidates as one list, best first: the rankings fused by their scores, the priors that tilt
them, an entry taking over the page it came from, the second opinion on the first few where it is asked, the
manuals the question names first and, asked at a machine, its own manuals before those of no machine in particular."""

from __future__ import annotations

from collections.abc import Callable

from knowledge.models import Match
from knowledge.search.candidates import Candidates
from knowledge.search.rows import Group, IndexRow, Ranked, Scored, group
from knowledge.tuning import Tuning

# The second opinion's cosine to the question of each row given (None: no vector for it).
Opinion = Callable[[list[IndexRow]], list[float | None]]


def rank(found: Candidates, tuning: Tuning, opinion: Opinion | None = None) -> Ranked:
    rows = found.snapshot.rows
    ranked = fuse(
        own=[
            ("lexical", [(rows[i], s) for i, s in found.lexical]),
            ("semantic", [(rows[i], s) for i, s in found.semantic]),
            ("lexical", [(rows[i], s) for i, s in found.coded]),
        ],
        cross=[(how, [(rows[i], s) for i, s in ranking]) for how, ranking in found.cross],
        language=found.question.language,
        about_a_fault=found.question.about_a_fault,
        tuning=tuning,
    )
    ranked = sorted(entries_over_their_pages(ranked, found.snapshot.entry_pages()), key=lambda item: -item[1])
    weight = opinion_weight(tuning, read=bool(found.semantic))
    if opinion is not None and ranked and weight:
        head = ranked[: tuning.opinion_depth]
        ranked = second_opinion(head, opinion([row for row, _, _ in head]), weight) + ranked[len(head) :]
    # A manual the question names comes first: the technician said which machine it is. Asked at a machine, its
    # own manuals come before those whose vendor and model the build could not read, which are in every
    # machine's scope only because nothing rules them out.
    scope, snap = found.scope, found.snapshot
    manuals = {row["manual_sha256"] for row, _, _ in ranked} if scope.vendor or scope.model else set()
    nobodys = {sha for sha in manuals if not snap.in_scope_manual(sha, scope, own=True)}
    return sorted(
        ranked,
        key=lambda item: (
            item[0]["manual_sha256"] not in found.question.mentioned,
            item[0]["manual_sha256"] in nobodys,
        ),
    )


def fuse(
    own: list[tuple[Match, Scored]],
    cross: list[tuple[Match, Scored]],
    language: str,
    about_a_fault: bool,
    tuning: Tuning,
) -> Ranked:
    """The question's own rankings (words, meaning, printed codes) and the cross-language ones (weighted
    less) as one list of (row, score, how it matched), best first.

    A row's score is the weighted sum of its scores in the rankings, each divided by its ranking's best
    (a convex combination of normalised scores). Unlike reciprocal rank, which counts only places, it keeps
    how far ahead a ranking's first is: a row far closer in meaning than any other is not outvoted by rows
    a little above the middle of both rankings."""
    weights = {"lexical": 1.0, "semantic": tuning.semantic_weight}
    rankings = [(weights[how], how, _scaled(rows)) for how, rows in own]
    rankings += [(tuning.cross_weight * weights[how], how, _scaled(rows)) for how, rows in cross]
    rankings = [ranking for ranking in rankings if ranking[2]]
    total = sum(weight for weight, _, _ in rankings)
    rows: dict[Group, IndexRow] = {}
    for _, _, scores in rankings:  # an entry is represented by its row in the question's own rankings first
        for key, (row, _) in scores.items():
            rows.setdefault(key, row)
    ranked: Ranked = []
    for key, row in rows.items():
        votes = [(weight * scores[key][1], how) for weight, how, scores in rankings if key in scores]
        if row["kind"] == "entry":
            prior = tuning.entry_prior
        else:
            prior = tuning.fault_page_prior if row["fault"] and about_a_fault else 1.0
        prior *= tuning.language_prior if row["language"] == language else 1.0
        ranked.append((row, sum(vote for vote, _ in votes) / total * prior, max(votes)[1]))
    return sorted(ranked, key=lambda item: -item[1])


def opinion_weight(tuning: Tuning, read: bool) -> float:
    """The second opinion's weight on a question the first encoder read (its meaning ranking is the question's
    own), or did not: then e5 is the only reader of its meaning in its own language."""
    return tuning.opinion_weight if read else tuning.opinion_weight_unread


def second_opinion(head: Ranked, cosines: list[float | None], weight: float) -> Ranked:
    """The first rows of the fused list reordered with a second encoder's word: each gains `weight` times its
    cosine scaled from the lowest of theirs (0) to the highest (1). Scaled, as the fusion scales each
    ranking by its best: e5 puts any two texts above 0.7, so its cosines mean something only against each
    other. A row without a vector gains nothing; so does every row where the encoder cannot tell them apart.
    The rows after these keep their scores, below theirs."""
    known = [cosine for cosine in cosines if cosine is not None]
    low, high = min(known, default=0.0), max(known, default=0.0)
    if high <= low:
        return head
    rescored = [
        (row, score + weight * ((cosine if cosine is not None else low) - low) / (high - low), match)
        for (row, score, match), cosine in zip(head, cosines, strict=True)
    ]
    return sorted(rescored, key=lambda item: -item[1])


def entries_over_their_pages(ranked: Ranked, entry_pages: dict[Group, set[tuple[str, int]]]) -> Ranked:
    """A page that matched and an entry extracted from it (in any edition) are one answer, and
    the entry is the better one: it takes the page's score when that is higher, and the page
    leaves the list. `entry_pages`: each entry group's (manual, page) pairs."""
    best_entry: dict[tuple[str, int], int] = {}
    for position, (row, score, _) in enumerate(ranked):
        if row["kind"] == "entry":
            for key in entry_pages.get(group(row), ()):
                if key not in best_entry or ranked[best_entry[key]][1] < score:
                    best_entry[key] = position
    out = list(ranked)
    dropped = set()
    for position, (row, score, match) in enumerate(ranked):
        entry = best_entry.get((row["manual_sha256"], row["page"])) if row["kind"] == "page" else None
        if entry is not None:
            dropped.add(position)
            if score > out[entry][1]:
                out[entry] = (out[entry][0], score, match)
    return [item for position, item in enumerate(out) if position not in dropped]


def _scaled(rows: Scored) -> dict[Group, tuple[IndexRow, float]]:
    """Each group's first row and its score as a share of the ranking's best (0 to 1)."""
    best: dict[Group, tuple[IndexRow, float]] = {}
    for row, score in rows:
        best.setdefault(group(row), (row, max(score, 0.0)))
    top = max((score for _, score in best.values()), default=0.0)
    return {key: (row, score / top) for key, (row, score) in best.items()} if top > 0 else {}
