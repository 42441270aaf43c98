"""Small byte-level BPE tokenizer.json files built by tests (random vocabularies and merge orders)."""

from __future__ import annotations

import json

from tokenizers import pre_tokenizers

import peek2
from peek2.formats.byte_level import to_bytes

BYTE_CHARS = sorted(pre_tokenizers.ByteLevel.alphabet(), key=lambda c: to_bytes(c) or b"")


def chars(data: bytes) -> str:
    """``data`` written in the byte-level alphabet."""
    return "".join(BYTE_CHARS[b] for b in data)


def byte_level_file(tokens: list[bytes], merges: list[tuple[bytes, bytes]]) -> str:
    """A Llama-3-style tokenizer.json: the 256 bytes (ids 0-255), then ``tokens`` and the tokens
    ``merges`` make, in that order; ``merges`` in their order."""
    vocab = {chars(bytes([b])): b for b in range(256)}
    for token in [*tokens, *(left + right for left, right in merges)]:
        vocab.setdefault(chars(token), len(vocab))
    split = {"type": "Split", "pattern": {"Regex": peek2.PATTERNS["llama3"]}, "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]}, "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[chars(left), chars(right)] for left, right in merges]},
    })
