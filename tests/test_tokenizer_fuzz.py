"""Fuzzing of the whole tokenizer against tokenizers.Tokenizer, with fixed seeds.

Each example is checked on every tokenizer below (so the budget is per tokenizer): ids with
and without special tokens, ids with special tokens treated as text, count, offsets (through
the normalizer), and decode of the reference's ids. Texts mix special-token strings (whole, partial, nested), NFC-sensitive
sequences (combining marks, Hangul jamo, composition exclusions), scripts, whitespace and
digits. The budget is PEEK2_FUZZ_EXAMPLES (default 20,000 texts, the sample CI runs; a campaign
sets it higher, see the README).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer as Reference

from compliance.reference import first_mismatch
from conftest import DEFAULT_DATA, fuzz_examples
from peek2.tokenizer import Tokenizer
from fuzzing import ATOMS, campaign, join_parts

MODELS = ["llama3.1", "llama3.2", "qwen2", "qwen3"]

SPECIAL = [
    "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|reserved_special_token_5|>", "<|endoftext|>",
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|eot_id|", "<|im_", "<think", "</", "<|", "|>", "<<|eot_id|>>", "<|<|im_end|>",
]
NFC_SENSITIVE = [
    "e\u0301", "a\u0308\u0304", "\u1100\u1161\u11a8", "\u1112\u1161", "\u0958", "\u212b", "\u2126", "\u00c5\u0327",
    "\u0f73", "\u0344", "\uac00\u11a8", "\u0065\u0327\u0301", "\u1e9b\u0323",
]

POOL = ATOMS + SPECIAL + NFC_SENSITIVE


def build_text(rng: random.Random) -> str:
    """Up to 20 parts from POOL or arbitrary scalars (no surrogates), drawn from ``rng``."""
    return join_parts(rng, rng.randint(0, 20), POOL, 0.75)


# The budget is cut into shards (distinct seeds: the shard salts them) so that pytest-xdist
# runs them on separate cores.
SHARDS = 2


def load(model: str) -> tuple[Tokenizer, Reference]:
    path = Path(os.environ.get("PEEK2_DATA", DEFAULT_DATA)) / "tokenizers" / model / "tokenizer.json"
    return Tokenizer.from_file(path), Reference.from_file(str(path))


PAIRS = {model: load(model) for model in MODELS}
SPLITTING = {model: load(model)[1] for model in MODELS}
for reference in SPLITTING.values():
    reference.encode_special_tokens = True


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_tokenizers(shard: int) -> None:
    campaign(check_all_models, build_text, fuzz_examples(20_000) // SHARDS, f"tokenizer:{shard}")


def check_all_models(text: str) -> None:
    for model, (ours, reference) in PAIRS.items():
        # One reference encode: with special tokens is tokenizers' own post_process of it.
        encoding = reference.encode(text, add_special_tokens=False)
        for add in (True, False):
            expected = (reference.post_process(encoding, None, True) if add else encoding).ids
            got = ours.encode(text, add)
            assert got == expected, f"{model} add={add} {ascii(text)}: {first_mismatch(expected, got)}"
        assert ours.count(text) == len(expected) + len(ours.spec.prefix_ids), f"{model} count {ascii(text)}"
        got_offsets = ours.encode_with_offsets(text, False)
        assert got_offsets.offsets == encoding.offsets, f"{model} offsets {ascii(text)}"
        split = SPLITTING[model].encode(text).ids
        assert ours.encode(text, split_special_tokens=True) == split, f"{model} split_special_tokens {ascii(text)}"
        assert ours.decode(expected, False) == reference.decode(expected, skip_special_tokens=False), f"{model} {ascii(text)}"
        assert ours.decode(expected, True) == reference.decode(expected, skip_special_tokens=True), f"{model} {ascii(text)}"
