"""Manual search: a question's route through the index, a stage a module.

- `question.py`: the question parsed once (language, the manuals it names and its text without them, words,
  printed / display / typed codes, cue words);
- `store.py`: opening the index file and its snapshots; every SQL statement and lock;
- `lookup.py`: codes looked up exactly, then as look-alikes, then their near codes when not found;
- `candidates.py`: the rankings (words, codes, meaning, the other language) and the evidence for an answer;
- `floors.py`: the not-found floors that evidence must pass;
- `ranking.py`: the rankings fused under the fitted `Tuning`, priors, entries over their pages, the second opinion;
- `second_opinion.py`: a second encoder's cosines (multilingual-e5-small) for the best candidates, where it is on;
- `hits.py`: ranked rows collapsed into hits (versions, languages, snippets) and every message;
- `rows.py`: a row as a search reads it and the answers rows group into;
- `index.py`: `ManualIndex`, whose `query` is the route: codes first, then the search.
"""

from knowledge.search.candidates import Candidates, Mode
from knowledge.search.floors import Evidence
from knowledge.search.index import ManualIndex
from knowledge.search.question import Question
from knowledge.search.rows import IndexRow
from knowledge.search.store import IndexMissing

__all__ = ["Candidates", "Evidence", "IndexMissing", "IndexRow", "ManualIndex", "Mode", "Question"]
