"""One vector for all of a text, however long.

all-MiniLM-L6-v2 reads a 256-token window: 254 tokens of text between [CLS] and [SEP]. A
longer text embedded as it is gets a vector that says what its first ~190 words say, so a
long memory (a design note, a postmortem) was found by dense search only for its opening;
the detail below it was left to full text search.

A text over the window is cut into pieces of about `PIECE_TOKENS` tokens (memsys.chunking's
split: paragraphs, then lines, then words) and its vector is the first piece's vector (its
opening, usually what the text is about) plus the mean of all its pieces' vectors, each
weighted by its tokens so that every token of the text counts once; normalised. The opening
weighs as much as the whole body, and any section of the body can pull the vector toward a
question about it. A text within the window gets the model's vector unchanged.

Each token goes through the model once, so a long text costs the model time its length asks
for (SciFact's abstracts over the window: 1.6x the time of their first window alone, where
embedding that window as well cost 2.6x). Measured against the first window alone, the first
window plus the mean, and the mean alone, on SciFact's abstracts and the agent set's long
notes: benchmarks/README.md, "A long memory's vector from all of it".

Both local embedders (sentence-transformers and ONNX) call `embed_whole` around their own
batch function, so stored content, queries, observations and the benchmarks' vectors are all
made one way. `VECTOR_SCHEME` names that way for caches of vectors kept outside the database.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memsys.chunking import split_to_budget
from memsys.tokens import count_tokens_batch

WINDOW_TOKENS = 254  # the model's 256-token window less [CLS] and [SEP]
PIECE_TOKENS = 200  # a piece of a longer text: well inside the window, a paragraph or two
VECTOR_SCHEME = "opening+token-weighted-pieces/1"


def beyond_window(texts: list[str]) -> list[int]:
    """Positions of the texts the model alone would read only in part. Every text is counted:
    a character may be more than one token (the check on length alone would miss those)."""
    return [i for i, n in enumerate(count_tokens_batch(texts)) if n > WINDOW_TOKENS]


def embed_whole(embed: Callable[[list[str]], np.ndarray], texts: list[str]) -> np.ndarray:
    """`embed` (normalised vectors of texts the model truncates at its window) applied so
    that each vector reads all of its text: one call to `embed` with the short texts and the
    pieces of the long ones, so a batch stays one batch."""
    pieces: list[str] = []
    spans: list[tuple[int, int, int]] = []  # (text position, first piece, end)
    for i in beyond_window(texts):
        own = split_to_budget(texts[i], PIECE_TOKENS)
        if own:  # always, for a text of that many tokens; else it is embedded as it is
            spans.append((i, len(pieces), len(pieces) + len(own)))
            pieces += own
    if not spans:
        return embed(texts)
    long = {i for i, _, _ in spans}
    short = [i for i in range(len(texts)) if i not in long]
    vectors = np.asarray(embed([*(texts[i] for i in short), *pieces]), dtype=np.float32)
    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
    out[short] = vectors[: len(short)]
    of_pieces = vectors[len(short) :]
    sizes = np.asarray(count_tokens_batch(pieces), dtype=np.float32)
    for i, start, end in spans:
        weights = sizes[start:end]
        body = (of_pieces[start:end] * weights[:, None]).sum(axis=0) / max(weights.sum(), 1.0)
        combined = of_pieces[start] + body
        out[i] = combined / max(float(np.linalg.norm(combined)), 1e-12)
    return out
