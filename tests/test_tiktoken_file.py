"""tiktoken rank files: parsing, its errors, and rebuilding HuggingFace's merges from ranks."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from peek2.formats.byte_level import to_bytes
from peek2.formats.tiktoken_file import converter_merges, load_ranks, recover_merges


def rank_file(tmp_path: Path, tokens: list[bytes], ranks: list[int] | None = None) -> Path:
    path = tmp_path / "test.tiktoken"
    lines = [f"{base64.b64encode(t).decode()} {r}" for t, r in zip(tokens, ranks or range(len(tokens)))]
    path.write_text("\n".join(lines) + "\n")
    return path


def hf_merges(path: Path) -> tuple[dict[bytes, int], list[tuple[bytes, bytes]]]:
    """The vocab and merges of a tokenizer.json, in raw bytes ("a b" strings or [a, b] pairs)."""
    model = json.loads(path.read_text(encoding="utf-8"))["model"]
    vocab = {to_bytes(token): token_id for token, token_id in model["vocab"].items()}
    merges = []
    for merge in model["merges"]:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        merges.append((to_bytes(left), to_bytes(right)))
    assert None not in vocab
    return vocab, merges  # type: ignore[return-value]


def test_load_ranks(tmp_path: Path) -> None:
    path = rank_file(tmp_path, [b"b", b"a", b"ab", b"\xff\n "], [1, 0, 2, 3])
    assert load_ranks(path) == {b"a": 0, b"b": 1, b"ab": 2, b"\xff\n ": 3}
    assert load_ranks(str(path)) == load_ranks(path)


def test_blank_lines_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "crlf.tiktoken"
    path.write_bytes(b"YQ== 0\r\n\r\nYg== 1\r\n")
    assert load_ranks(path) == {b"a": 0, b"b": 1}


@pytest.mark.parametrize(
    "content, message",
    [
        (b"YQ== 0\nYg==\n", r"bad\.tiktoken:2: expected '<base64 token> <rank>'"),
        (b"YQ== 0\nYg== 1 2\n", r"bad\.tiktoken:2: expected"),
        (b"YQ== 0\nYg== -1\n", r"bad\.tiktoken:2: expected"),
        (b"YQ== 0\nY!== 1\n", r"bad\.tiktoken:2: token .* is not valid base64"),
        (b"YQ== 0\nYQ== 1\n", r"bad\.tiktoken:2: token b'a' repeated"),
        (b"YQ== 0\nYg== 0\n", r"bad\.tiktoken:2: rank 0 repeated \(first on line 1\)"),
    ],
    ids=["one-field", "three-fields", "negative", "base64", "dup-token", "dup-rank"],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_ranks(path)


def test_a_rank_file_with_a_gap_loads_as_tiktoken_reads_it(tmp_path: Path, data_dir: Path) -> None:
    """Ranks may leave gaps, as tiktoken allows: OpenAI's p50k_base file has none at 50256, the id
    of its special token; it was refused ("ranks are not contiguous"; a bug hunt). Llama-3's ranks
    with a gap opened at 100,000, a special token there: the ids of tiktoken on the same file."""
    import random

    import numpy as np
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from peek2 import Peek2Pattern, Tokenizer

    gap = 100_000
    ranks = {token: rank + (rank >= gap) for token, rank in load_tiktoken_bpe(str(data_dir / "tokenizers" / "llama3.2" / "tokenizer.model")).items()}
    path = rank_file(tmp_path, list(ranks), list(ranks.values()))
    specials = {"<|gap|>": gap}
    assert Tokenizer.from_tiktoken(path, pattern="llama3", special_tokens={"<|gap|>": np.int64(gap)}).encode("<|gap|>") == [gap]  # (refused; same hunt)
    reference = tiktoken.Encoding("gap", pat_str=Peek2Pattern("llama3").pattern, mergeable_ranks=ranks, special_tokens=specials)
    ours = Tokenizer.from_tiktoken(path, pattern="llama3", special_tokens=specials)
    rng = random.Random(50256)
    words = [token.decode("utf-8", "replace") for token in rng.sample(list(ranks), 3000)] + ["<|gap|>", " ", "\n"]
    texts = ["".join(rng.choice(words) for _ in range(rng.randint(1, 60))) for _ in range(300)]
    assert [ours.encode(text) for text in texts] == [reference.encode(text, allowed_special="all") for text in texts]
    ids = [token_id for text in texts for token_id in reference.encode(text, allowed_special="all")]
    assert ours.decode_bytes(ids, skip_special_tokens=False) == reference.decode_bytes(ids)
    assert ours.vocab_size == reference.n_vocab


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.tiktoken"):
        load_ranks(tmp_path / "nope.tiktoken")


def test_recover_merges_follows_bpe_on_lower_ranks() -> None:
    # "abc" is built as ab + c because "ab" ranks below "bc".
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    assert recover_merges(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")]
    assert converter_merges(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc"), (b"ab", b"c")]


def test_recover_merges_refuses_a_token_that_is_not_one_merge() -> None:
    # BPE on lower ranks gives "a" "bc" "d" (3 parts) for "abcd".
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"d": 3, b"bc": 4, b"abcd": 5}
    with pytest.raises(ValueError, match=r"token b'abcd' \(rank 5\) is not one merge .* 3 parts"):
        recover_merges(ranks)


def test_llama3_rank_file_rebuilds_the_tokenizer_json(data_dir: Path) -> None:
    """Llama-3.2's tokenizer.model against Llama-3's tokenizer.json: same ids, and merges = every split."""
    tokenizers = data_dir / "tokenizers"
    ranks = load_ranks(tokenizers / "llama3.2" / "tokenizer.model")
    vocab, merges = hf_merges(tokenizers / "llama3" / "tokenizer.json")
    assert len(ranks) == 128000
    assert vocab == ranks
    # HuggingFace's converter lists all 280,147 two-token splits, not one merge per token ...
    assert converter_merges(ranks) == merges
    # ... and 678 Llama-3 tokens are not one merge of lower ranks at all (tiktoken reaches them
    # only as whole pieces, which is what ignore_merges does).
    with pytest.raises(ValueError, match=r"token b'\.:\.:' \(rank 100421\)"):
        recover_merges(ranks)


def test_qwen_rank_file_rebuilds_the_tokenizer_json(data_dir: Path) -> None:
    """Qwen's merges are exactly one per token, as byte-pair merging on lower ranks builds it."""
    vocab, merges = hf_merges(data_dir / "tokenizers" / "qwen2" / "tokenizer.json")
    recovered = recover_merges(vocab)
    assert recovered == merges
    assert len(recovered) == 151387


def test_special_tokens_decode_as_tiktoken_decodes_them(tmp_path: Path) -> None:
    """A bug hunt: a special token's name of byte-level alphabet characters ("\u2039|\xe9|>", "\u0120")
    decoded through that alphabet ("<|\\ufffd|>", " "), where tiktoken decodes its UTF-8; and
    ``id_to_bytes`` of a special token was b"". Checked against tiktoken's Encoding."""
    import tiktoken

    from peek2 import Tokenizer

    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abc"]
    path = rank_file(tmp_path, tokens)
    specials = {"\u2039|\xe9|>": 300, "\u0120": 301, "<|end|>": 302}
    tok = Tokenizer.from_tiktoken(path, pattern="cl100k_base", special_tokens=specials)
    ranks = {t: r for r, t in enumerate(tokens)}
    reference = tiktoken.Encoding("test", pat_str=_cl100k_pat(), mergeable_ranks=ranks, special_tokens=specials)
    text = "abc \u2039|\xe9|>\u0120 x<|end|>"
    ids = reference.encode(text, allowed_special="all")
    assert tok.encode(text) == ids
    assert tok.decode(ids, skip_special_tokens=False) == reference.decode(ids) == text
    for token_id in (300, 301, 302, 257, 97):
        assert tok.id_to_bytes(token_id) == reference.decode_single_token_bytes(token_id)


def _cl100k_pat() -> str:
    from peek2.pretokenize.families import TIKTOKEN_PATTERNS

    return TIKTOKEN_PATTERNS["cl100k"]


def test_special_tokens_argument_errors(tmp_path: Path) -> None:
    from peek2 import Tokenizer

    path = rank_file(tmp_path, [bytes([b]) for b in range(256)])
    with pytest.raises(ValueError, match=r"special_tokens: an empty name \(id 300\)"):
        Tokenizer.from_tiktoken(path, pattern="cl100k", special_tokens={"": 300})
    with pytest.raises(TypeError, match=r"special_tokens must be a dict of str to int, not list"):
        Tokenizer.from_tiktoken(path, pattern="cl100k", special_tokens=["<|end|>"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"or a tiktoken encoding: .*cl100k_base"):
        Tokenizer.from_tiktoken(path, pattern="cl100k_bas")


def test_a_long_token_of_a_rank_file_loads_in_linear_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug hunt: every split of a token of L bytes was sliced and hashed (``converter_merges``),
    quadratic in L: a rank file with a token of 64 KB took 7.6 s to load. A chain of doublings
    of "=" up to a long token: the ids are tiktoken's, and 4x the token loads in about the same
    time (the rest of the file dominates)."""
    import tiktoken

    from peek2 import Tokenizer
    from tests.scaling import growth

    def chain(size: int) -> list[bytes]:
        tokens = [bytes([b]) for b in range(256)]
        while len(tokens[-1]) * 2 <= size:
            tokens.append((tokens[-1] if len(tokens[-1]) > 1 else b"=") * 2)
        return tokens

    monkeypatch.setenv("PEEK2_CACHE", "0")  # (every load parses the file: no load cache)
    tokens = chain(4096)
    path = rank_file(tmp_path, tokens)
    reference = tiktoken.Encoding("chain", pat_str=_cl100k_pat(), mergeable_ranks={t: r for r, t in enumerate(tokens)}, special_tokens={})
    tok = Tokenizer.from_tiktoken(path, pattern="cl100k_base")
    for text in ("=" * 5000, "a " + "=" * 4096 + " b", "==="):
        assert tok.encode_ordinary(text) == reference.encode_ordinary(text)
    paths = {size: rank_file(tmp_path / str(size), chain(size)) for size in (16_384, 65_536) if (tmp_path / str(size)).mkdir() is None}
    assert growth(lambda size: str(paths[size]), lambda path: Tokenizer.from_tiktoken(path, pattern="cl100k_base"), 16_384) < 8
