"""Token ids without a tokenizer download.

No real tokenizer is available offline here, so text becomes *length-faithful
synthetic ids*: text is split into word-like pieces (runs of letters/digits,
single punctuation marks; long words cut into 4-character pieces, roughly
what BPE tokenizers do, about 1.3 pieces per English word) and each piece
maps to a stable id in ``[0, vocab_size)`` by CRC32. The same text always
gives the same ids, so texts that share a prefix share a token prefix and
the server's prefix cache sees the real sharing pattern. Generators that
have no text draw random ids from a seeded RNG (``random_ids``).
"""

from __future__ import annotations

import random
import re
import zlib

DEFAULT_VOCAB_SIZE = 1024  # the tiny test model's vocabulary
_PIECE = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]")
_MAX_PIECE_CHARS = 4


class SyntheticTokenizer:
    def __init__(self, vocab_size: int = DEFAULT_VOCAB_SIZE) -> None:
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        self.vocab_size = vocab_size

    def pieces(self, text: str) -> list[str]:
        out: list[str] = []
        for m in _PIECE.finditer(text):
            word = m.group()
            out.extend(word[k:k + _MAX_PIECE_CHARS] for k in range(0, len(word), _MAX_PIECE_CHARS))
        return out

    def encode(self, text: str) -> list[int]:
        return [zlib.crc32(p.encode("utf-8")) % self.vocab_size for p in self.pieces(text)]

    def count(self, text: str) -> int:
        return len(self.pieces(text))


def random_ids(rng: random.Random, n: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> tuple[int, ...]:
    """``n`` random ids; distinct draws almost never share a prefix."""
    return tuple(rng.randrange(vocab_size) for _ in range(n))


def check_token_ids(ids: object, vocab_size: int) -> tuple[int, ...]:
    """Validate a user-given id list; raises ValueError naming the problem."""
    if not isinstance(ids, (list, tuple)) or not ids:
        raise ValueError("token ids must be a non-empty list of integers")
    for t in ids:
        if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab_size:
            raise ValueError(f"token id {t!r} is not an integer in [0, {vocab_size})")
    return tuple(ids)
