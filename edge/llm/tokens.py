"""Token counts when the server reports no `usage`: a conservative estimate, so the token budget still holds.

No real Qwen2 tokenizer installs from a package without fetching its vocabulary
(`tokenizers` and `bpe-qwen` both need tokenizer.json / vocab.json + merges.txt
from the model hub, and nothing is downloaded at run time), so this counts from
characters and errs high: Qwen2's byte-level BPE gives about 4 characters of
English per token and a little less of JSON, one token per digit (numbers are split into
digits), and one token for a common Chinese character but two or three for a
rare one. Overcounting stops a run a step early; undercounting would let it
run past the budget the field report calls for.
"""

from __future__ import annotations

import math

# Prose runs about 4.2 characters a token, our JSON with its quotes and braces about 3.6; digits, the
# densest part, are counted apart.
ASCII_CHARS_PER_TOKEN = 3.5
NON_ASCII_TOKENS_PER_CHAR = 1.5
# <|im_start|>, the role, a newline, <|im_end|>, a newline.
MESSAGE_OVERHEAD_TOKENS = 5
# The "<|im_start|>assistant\n" the chat template appends for the reply.
REPLY_PRIMER_TOKENS = 3


def estimate_text_tokens(text: str) -> int:
    digits = sum(1 for c in text if c.isascii() and c.isdigit())
    non_ascii = sum(1 for c in text if not c.isascii())
    other = len(text) - digits - non_ascii
    return digits + math.ceil(non_ascii * NON_ASCII_TOKENS_PER_CHAR) + math.ceil(other / ASCII_CHARS_PER_TOKEN)


def estimate_prompt_tokens(messages: list[dict[str, str]]) -> int:
    return REPLY_PRIMER_TOKENS + sum(
        MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(m.get("content") or "") for m in messages
    )
