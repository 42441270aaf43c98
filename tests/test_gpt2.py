"""The gpt2 family (issue 24): GPT-2's encoder.json + vocab.bpe, and tokenizer.json files whose
pre-tokenizer is ``ByteLevel(use_regex=true)``, against tokenizers and tiktoken.

The pieces are checked scalar by scalar in tests/test_codepoints.py and by the fuzz tests (the
family is in ``peek2.PATTERNS``); the ids on XNLI in tests/test_xnli.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import random
import warnings
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public
from tokenizers import pre_tokenizers

import peek2
from compliance.reference import reference_and_peek2
from compliance.xnli import iter_xnli_tsv
from peek2.formats.byte_level import to_bytes
from peek2.spec import TokenizerFormatError
from fuzzing import atoms_text, long_text

TEXTS = [
    "Hello world", "I'm here. It's 2024!!  \n\n  ok", "'S 'sx 're 'LL 'll", "  \t\n x", "abc123 4567890123",
    " \u0301x", "a\r\nb", "  ", " !! ?", "中文 テスト", "x  ", "\n\n\n", "Hello<|endoftext|> world",
    "def f(x):\n    return x  # done\n", "<html>\n  <body>  </body>\n</html>", "e\u0301\u0301A\u0301BC!x",
]


@pytest.fixture(scope="module")
def gpt2(data_dir: Path) -> tuple[Any, peek2.Tokenizer]:
    return reference_and_peek2(str(data_dir / "tokenizers" / "gpt2" / "encoder.json"))


@pytest.fixture(scope="module")
def tiktoken_gpt2(data_dir: Path) -> tiktoken.Encoding:
    """tiktoken's own gpt2 encoding, its two downloads replaced by the local files (same sha256)."""
    folder = data_dir / "tokenizers" / "gpt2"
    local = {"vocab.bpe": folder / "vocab.bpe", "encoder.json": folder / "encoder.json"}

    def read_local(url: str, expected_hash: str | None = None) -> bytes:
        data = local[url.rsplit("/", 1)[1]].read_bytes()
        assert hashlib.sha256(data).hexdigest() == expected_hash, f"{url}: the local file is not tiktoken's"
        return data

    original = tiktoken.load.read_file_cached
    tiktoken.load.read_file_cached = read_local  # type: ignore[assignment]
    try:
        definition = openai_public.gpt2()
    finally:
        tiktoken.load.read_file_cached = original
    return tiktoken.Encoding(**definition)


def test_ids_equal_tokenizers_and_tiktoken(gpt2: tuple[Any, peek2.Tokenizer], tiktoken_gpt2: tiktoken.Encoding, data_dir: Path) -> None:
    reference, tok = gpt2
    rng = random.Random(2)
    texts = TEXTS + [atoms_text(rng) for _ in range(300)] + [long_text(rng) for _ in range(20)]
    texts += [row.premise for k, row in enumerate(iter_xnli_tsv(data_dir / "xnli", ("dev",))) if k % 7 == 0]
    for text in texts:
        expected = reference.encode(text)
        got = tok.encode_with_offsets(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), ascii(text[:60])
        assert tok.encode(text, split_special_tokens=True) == tiktoken_gpt2.encode(text, disallowed_special=()), ascii(text[:60])
        assert tok.encode(text) == tiktoken_gpt2.encode(text, allowed_special="all"), ascii(text[:60])
        assert tok.decode(got.ids, skip_special_tokens=False) == text


def test_byte_level_regex_is_the_pattern() -> None:
    # tokenizers' ByteLevel(use_regex=true) splits with GPT-2's regex: the same pieces as peek2's
    # gpt2 family (the scalar-by-scalar tests compare with Split(Regex(PATTERNS["gpt2"]))).
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    rng = random.Random(3)
    for text in TEXTS + [atoms_text(rng) for _ in range(500)]:
        pieces = [to_bytes(piece) for piece, _ in byte_level.pre_tokenize_str(text)]
        assert [p.decode("utf-8") if p is not None else None for p in pieces] == peek2.split(text, "gpt2"), ascii(text)


def test_tokenizer_json_with_byte_level_regex(gpt2: tuple[Any, peek2.Tokenizer], tmp_path: Path, data_dir: Path) -> None:
    # HuggingFace's gpt2 tokenizer.json has this pipeline: from_file reads it as the gpt2 family.
    reference, files = gpt2
    path = tmp_path / "tokenizer.json"
    path.write_text(reference.to_str(), encoding="utf-8")
    tok = peek2.Tokenizer.from_file(path)
    assert tok.family == "gpt2"
    for text in TEXTS:
        assert tok.encode(text) == files.encode(text) == reference.encode(text).ids
    # After another step, tokenizers would put the space before each of that step's pieces.
    byte_level = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    spec = json.loads(reference.to_str())
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level]}
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(NotImplementedError, match=r"pretokenizers\[1\] ByteLevel add_prefix_space=true is not supported \(after another"):
        peek2.Tokenizer.from_file(path)
    llama = json.loads((data_dir / "tokenizers" / "llama3.1" / "tokenizer.json").read_text(encoding="utf-8"))
    llama["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True
    path.write_text(json.dumps(llama), encoding="utf-8")
    with pytest.raises(NotImplementedError, match=r"pretokenizers\[1\] ByteLevel add_prefix_space=true is not supported"):
        peek2.Tokenizer.from_file(path)


def prefix_space_file(reference_json: str, normalizer: bool, normalized: bool, trim: bool) -> str:
    """GPT-2's tokenizer.json with ``ByteLevel(add_prefix_space=true)``, RoBERTa's ``<mask>`` (lstrip)
    and a non-special token, and the variants a file may have around them."""
    spec = json.loads(reference_json)
    spec["pre_tokenizer"]["add_prefix_space"] = True
    spec["added_tokens"] += [
        {"id": 50257, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "special": True},
    ]
    if normalized or not normalizer:  # (one case keeps NFC with raw tokens only: a file that streams)
        spec["added_tokens"].append(
            {"id": 50258, "content": "\u03a9x", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False}
        )
    if normalizer:
        spec["normalizer"] = {"type": "NFC"}  # (then U+2126 OHM SIGN + "x" is the Omega token)
    for token in spec["added_tokens"]:
        token["normalized"] = token["normalized"] or normalized
    if trim:
        spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    return json.dumps(spec)


@pytest.mark.parametrize(("normalizer", "normalized", "trim"), [(False, False, False), (False, False, True), (True, True, True), (True, False, False)])
def test_add_prefix_space_as_tokenizers(
    gpt2: tuple[Any, peek2.Tokenizer], tmp_path: Path, normalizer: bool, normalized: bool, trim: bool
) -> None:
    # ByteLevel(add_prefix_space=true) puts a space before each text segment between added tokens
    # that does not start with one; the space spans the segment's first character. Every path.
    from tokenizers import Tokenizer as Reference

    path = tmp_path / "tokenizer.json"
    path.write_text(prefix_space_file(gpt2[0].to_str(), normalizer, normalized, trim), encoding="utf-8")
    reference, tok = Reference.from_file(str(path)), peek2.Tokenizer.from_file(path)
    splitting = Reference.from_file(str(path))
    splitting.encode_special_tokens = True
    assert tok.spec.prefix_space
    rng = random.Random(11)
    marks = ["<mask>", " <mask> ", "\u03a9x", "\u2126x", "<|endoftext|>", "", " "]
    texts = TEXTS + ["", " ", "x", "\nx", " Hello", "a <mask> b", "<mask>x", " <mask>", "\u0301x", "<|endoftext|><|endoftext|>x"]
    texts += [atoms_text(rng) + rng.choice(marks) + atoms_text(rng) + rng.choice(marks) for _ in range(250)]
    texts += [long_text(rng) for _ in range(5)]
    # (streaming refuses normalized tokens with lstrip, or with a normalizer: tests/test_streaming.py)
    streams = not normalized
    for text in texts:
        expected = reference.encode(text)
        got = tok.encode_with_offsets(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), ascii(text[:60])
        assert tok.encode(text) == expected.ids and tok.count(text) == len(expected.ids), ascii(text[:60])
        assert tok.encode_batch_flat([text, text]).ids.tolist() == expected.ids * 2, ascii(text[:60])
        assert tok.encode(text, split_special_tokens=True) == splitting.encode(text).ids, ascii(text[:60])
        if streams:
            encoder, ids, at = tok.stream_encoder(add_special_tokens=True), [], 0
            while at < len(text):
                size = rng.choice([1, 2, 7, 300])
                encoder.feed(text[at : at + size], ids)
                at += size
            assert encoder.finish(ids) == expected.ids, ascii(text[:60])
            session = tok.prompt_session()
            for at in range(0, len(text), 5):
                session.append(text[at : at + 5])
            assert session.ids == expected.ids, ascii(text[:60])
    # encode_ordinary: the whole text is one segment (special or not, no token is matched).
    for text in ("Hello <|endoftext|> there", "<mask>x", ""):
        assert tok.encode_ordinary(text) == splitting.encode(text, add_special_tokens=False).ids


def test_add_prefix_space_in_the_plugin(gpt2: tuple[Any, peek2.Tokenizer], tmp_path: Path) -> None:
    # peek2.patch of such a file: Peek2 puts the space first, as the ByteLevel it stands for.
    from tokenizers import Tokenizer as Reference

    text_json = prefix_space_file(gpt2[0].to_str(), False, False, True)
    reference, patched = Reference.from_str(text_json), peek2.patch(Reference.from_str(text_json))
    rng = random.Random(12)
    for text in TEXTS + ["", "a <mask> b", " <mask>"] + [atoms_text(rng) + " <mask>" + atoms_text(rng) for _ in range(200)]:
        expected, got = reference.encode(text), patched.encode(text)
        assert (got.ids, got.tokens, got.offsets, got.word_ids) == (expected.ids, expected.tokens, expected.offsets, expected.word_ids)
    again = pickle.loads(pickle.dumps(patched))
    assert json.loads(again.to_str())["pre_tokenizer"]["add_prefix_space"] is True
    assert again.encode("Hi there").tokens == ["\u0120Hi", "\u0120there"]


@pytest.mark.parametrize("model", ["gpt2", "llama3.1"])
@pytest.mark.parametrize("add_prefix_space", [True, False])
def test_trim_offsets_as_tokenizers(data_dir: Path, tmp_path: Path, model: str, add_prefix_space: bool) -> None:
    # A ByteLevel post-processor with trim_offsets (HuggingFace's gpt2 tokenizer.json has one):
    # the offsets of a token leave out its spaces, as tokenizers' process_offsets does.
    from tokenizers import Tokenizer as Reference
    from tokenizers import processors

    name = "encoder.json" if model == "gpt2" else "tokenizer.json"
    reference = reference_and_peek2(str(data_dir / "tokenizers" / model / name))[0]
    trim = processors.ByteLevel(add_prefix_space=add_prefix_space, trim_offsets=True)
    template = reference.post_processor
    reference.post_processor = trim if template is None else processors.Sequence([trim, template])
    path = tmp_path / "tokenizer.json"
    path.write_text(reference.to_str(), encoding="utf-8")
    reference, tok = Reference.from_file(str(path)), peek2.Tokenizer.from_file(path)
    assert tok.spec.trim_offsets == (True, add_prefix_space)
    rng = random.Random(7)
    texts = TEXTS + [" hello  world \n x", "  a", "x   ", " <|endoftext|> y  ", " <|eot_id|>  z ", " "]
    for text in texts + [atoms_text(rng) for _ in range(300)]:
        for add in (True, False):
            expected, got = reference.encode(text, add_special_tokens=add), tok.encode_with_offsets(text, add)
            assert (got.ids, got.offsets) == (expected.ids, expected.offsets), (add, ascii(text))


def test_streaming_sessions_and_pickles(gpt2: tuple[Any, peek2.Tokenizer]) -> None:
    _, tok = gpt2
    rng = random.Random(5)
    for text in TEXTS + ["\n" * 5000 + "x", " " * 5000 + "=" * 5000 + "ok", "x" + "\u0301" * 3000]:
        encoder = tok.stream_encoder()
        ids: list[int] = []
        at = 0
        while at < len(text):
            size = rng.choice([1, 3, 50, 700])
            encoder.feed(text[at : at + size], ids)
            at += size
        assert encoder.finish(ids) == tok.encode(text, False), ascii(text[:30])
    assert pickle.loads(pickle.dumps(tok)).encode(TEXTS[1]) == tok.encode(TEXTS[1])
    # A prompt session fed a growing whitespace run: GPT-2's pattern keeps it one piece at the end
    # of the text whatever newlines it holds (StreamEngine._finish_run, without the newline cut).
    for unit in (" \n", "\n\t ", "\xa0 "):
        session = tok.prompt_session(add_special_tokens=False)
        text = "x"
        session.append(text)
        for k in range(12):
            part = (unit * 400)[: rng.randint(200, 900)]
            session.append(part)
            text += part
            if k % 4 == 3:
                assert session.ids == tok.encode(text, False), ascii(unit)
        session.append("y")
        assert session.ids == tok.encode(text + "y", False), ascii(unit)


def test_bad_files_name_the_file_and_line(data_dir: Path, tmp_path: Path) -> None:
    folder = data_dir / "tokenizers" / "gpt2"
    merges = (folder / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    merges[5] = "Ġt"  # one token, not two
    bad = tmp_path / "vocab.bpe"
    bad.write_text("\n".join(merges), encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match=r"vocab.bpe, line 6"):
        peek2.Tokenizer.from_gpt2_files(folder / "encoder.json", bad)
    encoder = tmp_path / "encoder.json"
    encoder.write_text('["not", "an", "object"]', encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match="encoder.json: must be a JSON object"):
        peek2.Tokenizer.from_gpt2_files(encoder, folder / "vocab.bpe")
    with pytest.raises(FileNotFoundError):
        peek2.Tokenizer.from_gpt2_files(tmp_path / "missing.json", folder / "vocab.bpe")
    # A merges file cut short loaded silently, with other ids; tiktoken refuses the pair, tokenizers
    # loads it as peek2 does: a warning naming the first token no merge makes (a bug hunt), from
    # the cache too. The real pair, with or without its special token, has none.
    half = tmp_path / "half.bpe"
    half.write_text("\n".join((folder / "vocab.bpe").read_text(encoding="utf-8").split("\n")[:25001]) + "\n", encoding="utf-8")
    for _ in range(2):
        with pytest.warns(UserWarning, match=r"half.bpe makes 25,000 of its 50,257 tokens \(the first, id 25256: b'IDENT'\): cut short"):
            peek2.Tokenizer.from_gpt2_files(folder / "encoder.json", half)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for specials in (None, {}):
            peek2.Tokenizer.from_gpt2_files(folder / "encoder.json", folder / "vocab.bpe", special_tokens=specials)


def test_r50k_base_rank_file_with_tiktokens_pattern(tiktoken_gpt2: tiktoken.Encoding, tmp_path: Path, data_dir: Path) -> None:
    """r50k_base.tiktoken, rebuilt here from GPT-2's files (tiktoken's pinned sha256 checks it is
    the published file), loads with r50k's pat_str as the gpt2 family and gives tiktoken's ids."""
    ranks = sorted(tiktoken_gpt2._mergeable_ranks.items(), key=lambda item: item[1])
    data = b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ranks)
    path = tmp_path / "r50k_base.tiktoken"
    path.write_bytes(data)

    def read_built(url: str, expected_hash: str | None = None) -> bytes:
        assert url.endswith("/r50k_base.tiktoken") and hashlib.sha256(data).hexdigest() == expected_hash
        return data

    original = tiktoken.load.read_file_cached
    tiktoken.load.read_file_cached = read_built  # type: ignore[assignment]
    try:
        r50k = tiktoken.Encoding(**openai_public.r50k_base())
    finally:
        tiktoken.load.read_file_cached = original
    tok = peek2.Tokenizer.from_tiktoken(path, pattern=openai_public.r50k_pat_str, special_tokens={"<|endoftext|>": 50256})
    assert tok.family == "gpt2"
    rng = random.Random(5)
    texts = TEXTS + [atoms_text(rng) for _ in range(300)] + [long_text(rng) for _ in range(20)]
    texts += [row.hypothesis for k, row in enumerate(iter_xnli_tsv(data_dir / "xnli", ("dev",))) if k % 11 == 0]
    for text in texts + [t + "  \n " for t in TEXTS]:
        assert tok.encode(text) == r50k.encode(text, allowed_special="all"), ascii(text[:60])


@pytest.mark.parametrize(("trim_offsets", "add_prefix_space"), [(True, False), (True, True), (False, False)])
def test_roberta_processing_as_tokenizers(data_dir: Path, tmp_path: Path, trim_offsets: bool, add_prefix_space: bool) -> None:
    """RoBERTa's post-processor (``<s> text </s>``, its own offset trimming) on GPT-2's vocabulary
    with RoBERTa's two special tokens: ids and offsets as tokenizers gives them."""
    from tokenizers import Tokenizer as Reference
    from tokenizers import AddedToken, decoders, models, processors

    folder = data_dir / "tokenizers" / "gpt2"
    reference = Reference(models.BPE.from_file(str(folder / "encoder.json"), str(folder / "vocab.bpe")))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    reference.decoder = decoders.ByteLevel()
    # RoBERTa's <mask> takes in the whitespace before it (lstrip): trimmed from its span too.
    reference.add_special_tokens(["<|endoftext|>", "<s>", "</s>", AddedToken("<mask>", lstrip=True)])
    cls, sep = reference.token_to_id("<s>"), reference.token_to_id("</s>")
    reference.post_processor = processors.RobertaProcessing(
        ("</s>", sep), ("<s>", cls), trim_offsets=trim_offsets, add_prefix_space=add_prefix_space
    )
    path = tmp_path / "tokenizer.json"
    reference.save(str(path))
    tok = peek2.Tokenizer.from_file(path)
    rng = random.Random(7)
    masked = ["a <mask> b", " <mask>", "x\u3000\u2003 <mask>.", "<mask>"] + [atoms_text(rng) + " <mask>" + atoms_text(rng) for _ in range(50)]
    for text in TEXTS + ["  leading", " one", "trailing  ", "<s> x </s>", " <s>  y"] + masked + [atoms_text(rng) for _ in range(200)]:
        for add in (True, False):
            expected = reference.encode(text, add_special_tokens=add)
            got = tok.encode_with_offsets(text, add)
            assert (got.ids, got.offsets) == (expected.ids, expected.offsets), (add, ascii(text[:60]))
            assert tok.encode(text, add) == expected.ids
    bad = json.loads(path.read_text(encoding="utf-8"))
    bad["post_processor"]["cls"] = ["<s>"]
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(peek2.TokenizerFormatError, match=r"post_processor\.cls must be a \[token, id\] pair"):
        peek2.Tokenizer.from_file(path)


@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_trimmed_offsets_of_vocabulary_tokens_an_added_token_shares(data_dir: Path, tmp_path: Path, add_prefix_space: bool) -> None:
    """A bug hunt (stop 59): added tokens whose content is a vocabulary token's byte-level spelling
    ("ĉ" is GPT-2's token 197, a tab; "Ġ" its 220, a space) share its id, and trim_offsets took
    every token of that id for the added token: the tab of "def f():\n\treturn 1" spanned (10, 10)
    where tokenizers gives (9, 10), and a prefix space (0, 1) for (1, 1)."""
    from tokenizers import Tokenizer as Reference
    from tokenizers import decoders, models, processors

    folder = data_dir / "tokenizers" / "gpt2"
    reference = Reference(models.BPE.from_file(str(folder / "encoder.json"), str(folder / "vocab.bpe")))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    reference.decoder = decoders.ByteLevel()
    reference.add_special_tokens(["<s>", "</s>"])
    reference.post_processor = processors.RobertaProcessing(("</s>", 50258), ("<s>", 50257), add_prefix_space=add_prefix_space)
    reference.add_tokens(["\u010a\u010a", "\u0109", "\u0120", "a\u0109b"])  # ("ĊĊ" 628, "ĉ" 197, "Ġ" 220: vocabulary tokens)
    path = tmp_path / "tokenizer.json"
    reference.save(str(path))
    reference = Reference.from_file(str(path))
    tok = peek2.Tokenizer.from_file(path)
    rng = random.Random(11)
    texts = ["def f():\n\treturn 1", "x\n\ny", "\x1c", " \t x", "\t", "a\u0109b \u0109 \u0120 x", "\u0120\t\u0120"]
    for text in texts + [atoms_text(rng) for _ in range(100)]:
        for add in (True, False):
            expected = reference.encode(text, add_special_tokens=add)
            got = tok.encode_with_offsets(text, add)
            assert (got.ids, got.offsets) == (expected.ids, expected.offsets), (add, ascii(text[:60]))


def test_trimmed_offsets_of_normalized_tokens_count_their_normalized_spaces(data_dir: Path, tmp_path: Path) -> None:
    """A bug hunt (stop 59): with NFC, "G" + U+0307 is the byte-level space "Ġ". A normalized added
    token that starts or ends with it has its spaces counted in the text it matched after
    normalization, as tokenizers counts them, and taken off its raw span: "<t>Ġ" in "a<t>G\u0307"
    spans (1, 4), where its raw span "<t>G" showed no space ((1, 5) before)."""
    from tokenizers import AddedToken, decoders, models, normalizers, processors
    from tokenizers import Tokenizer as Reference

    folder = data_dir / "tokenizers" / "gpt2"
    reference = Reference(models.BPE.from_file(str(folder / "encoder.json"), str(folder / "vocab.bpe")))
    reference.normalizer = normalizers.NFC()
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    reference.decoder = decoders.ByteLevel()
    reference.post_processor = processors.ByteLevel(trim_offsets=True)
    reference.add_tokens(["<t>\u0120", "\u0120<u>", AddedToken("<m>", lstrip=True, rstrip=True), AddedToken(" <w> ", lstrip=True)])
    path = tmp_path / "tokenizer.json"
    reference.save(str(path))
    reference = Reference.from_file(str(path))
    tok = peek2.Tokenizer.from_file(path)
    rng = random.Random(13)
    pieces = ["<t>G\u0307", "G\u0307<u>", "<t>\u0120", "\u0120<u>", " <m> ", "\u3000<m>\t", " <w> ", "  <w>  ", "e\u0301", "G", "\u0307", " ", "x"]
    texts = ["a<t>G\u0307", "aG\u0307<u>", "a<t>\u0120 b", " <t>G\u0307 G\u0307<u> "] + ["".join(rng.choice(pieces) for _ in range(8)) for _ in range(300)]
    for text in texts:
        expected = reference.encode(text)
        got = tok.encode_with_offsets(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), ascii(text)


def test_two_special_tokens_of_one_id_decode_as_the_first(data_dir: Path) -> None:
    """A bug hunt: from_gpt2_files decoded the id of ``{"<a>": 50257, "<b>": 50257}`` as "<b>",
    where from_tiktoken decodes the first name given, as tiktoken's own o200k_harmony needs (its
    ``<|endofprompt|>`` and ``<|reserved_200018|>`` are one id, and tiktoken decodes either one,
    from one process to the next)."""
    folder = data_dir / "tokenizers" / "gpt2"
    ranks = data_dir / "tokenizers" / "llama3.2" / "tokenizer.model"
    for specials, load in (
        ({"<a>": 50257, "<b>": 50257}, lambda s: peek2.Tokenizer.from_gpt2_files(folder / "encoder.json", folder / "vocab.bpe", special_tokens=s)),
        ({"<a>": 128256, "<b>": 128256}, lambda s: peek2.Tokenizer.from_tiktoken(ranks, special_tokens=s)),
    ):
        tok = load(specials)
        token_id = specials["<a>"]
        assert tok.encode("<a><b>") == [token_id, token_id]
        assert tok.decode([token_id], skip_special_tokens=False) == "<a>"


def test_special_tokens_checked_as_from_tiktoken_checks_them(data_dir: Path) -> None:
    """from_gpt2_files took special_tokens unchecked: a list was a bare AttributeError and a negative
    id said it was the id of <|endoftext|> (Python's index from the end)."""
    folder = data_dir / "tokenizers" / "gpt2"
    ranks = data_dir / "tokenizers" / "llama3.2" / "tokenizer.model"
    for special_tokens, error, message in [
        ([("<|x|>", 50257)], TypeError, "special_tokens must be a dict of str to int, not list"),
        ({"<|x|>": -1}, ValueError, "the id of '<|x|>' must not be negative, not -1"),
    ]:
        with pytest.raises(error, match=message):
            peek2.Tokenizer.from_gpt2_files(folder / "encoder.json", folder / "vocab.bpe", special_tokens=special_tokens)  # type: ignore[arg-type]
        with pytest.raises(error, match=message):
            peek2.Tokenizer.from_tiktoken(ranks, special_tokens=special_tokens)  # type: ignore[arg-type]
