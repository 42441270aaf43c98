"""The tokenizers plugin (``Peek2()``, ``peek2.patch``) against the original tokenizers pipeline.

Every comparison is with the same tokenizer.json loaded by tokenizers unchanged: ids,
tokens, offsets and word ids, on XNLI (one row in ``PEEK2_XNLI_EVERY``, through ``encode_batch``
on both sides, and ``encode`` on a sample), the save/load and pickle round trips (a multiprocessing pool too),
training with BpeTrainer, linear time, and the refusals of ``patch``.
"""

from __future__ import annotations

import copy
import functools
import json
import multiprocessing
import pickle
import random
import threading
import time
from pathlib import Path

import pytest
from tokenizers import NormalizedString, Regex, Tokenizer, models, pre_tokenizers, processors, trainers

import peek2
from compliance import xnli
from conftest import run_threads_switching_often, xnli_every
from peek2.plugin import CHUNK_CHARS, Peek2Split, patched_family, unpatch

MODELS = ["llama3.1", "llama3.2", "qwen2", "qwen3"]
SAMPLE_PER_LANGUAGE = 20


def load(data_dir: Path, model: str) -> Tokenizer:
    return Tokenizer.from_file(str(data_dir / "tokenizers" / model / "tokenizer.json"))


def xnli_texts(data_dir: Path, every: int) -> list[str]:
    """The premise and hypothesis of one XNLI row in ``every`` (test and dev, each language), each
    distinct text once (a premise comes with three hypotheses: a repeat gives its first result)."""
    rows = xnli.every_nth(xnli.iter_xnli_tsv(data_dir / "xnli"), every)
    texts = [text for row in rows for text in (row.premise, row.hypothesis)]
    assert len(texts) == 2 * 15 * (xnli.sampled_count(5010, every) + xnli.sampled_count(2490, every))
    return list(dict.fromkeys(texts))


def sample(data_dir: Path, per_language: int = SAMPLE_PER_LANGUAGE) -> list[str]:
    by_language: dict[str, list[str]] = {}
    for row in xnli.iter_xnli_tsv(data_dir / "xnli", ("dev",)):
        bucket = by_language.setdefault(row.language, [])
        if len(bucket) < per_language:
            bucket.extend((row.premise, row.hypothesis))
    assert sorted(by_language) == sorted(xnli.LANGUAGES)
    return [text for texts in by_language.values() for text in texts]


TRICKY = [
    "",
    "Hello world, it's 12345 apples!\n\n",
    "  leading  and   trailing   ",
    "<|begin_of_text|>Hi<|eot_id|> <|im_start|>user\nyo<|im_end|><think>x</think>",
    "e\u0301 Cafe\u0301 \ufb01 \u212b",  # not NFC: Qwen's normalizer changes them
    "\U0001F44D\U0001F3FD emoji, \u0915\u094D\u0937 \u0e01\u0e32 \u4f60\u597d\u3002",
    "x" * 3000 + " " + "\u00e9" * 2500,  # longer than CHUNK_CHARS: the halving path
    "a\r\n\tb \u00a0c\u3000d",
]


def same(expected: object, got: object) -> None:
    for field in ("ids", "tokens", "offsets", "word_ids", "attention_mask"):
        assert getattr(got, field) == getattr(expected, field), field


@pytest.fixture(scope="module", params=MODELS)
def pair(request: pytest.FixtureRequest, data_dir: Path) -> tuple[Tokenizer, Tokenizer]:
    return load(data_dir, request.param), peek2.patch(load(data_dir, request.param))


# ==== Equality with the original pipeline ====


@pytest.mark.parametrize("text", TRICKY)
def test_encode_equals_original(pair: tuple[Tokenizer, Tokenizer], text: str) -> None:
    original, patched = pair
    for add in (True, False):
        same(original.encode(text, add_special_tokens=add), patched.encode(text, add_special_tokens=add))
    assert patched.decode(patched.encode(text).ids) == original.decode(original.encode(text).ids)


def test_split_special_tokens_equal_original(pair: tuple[Tokenizer, Tokenizer]) -> None:
    original, patched = pair
    original.encode_special_tokens = patched.encode_special_tokens = True
    try:
        same(original.encode(TRICKY[3]), patched.encode(TRICKY[3]))
    finally:
        original.encode_special_tokens = patched.encode_special_tokens = False


def test_pre_tokenize_str_equals_original(pair: tuple[Tokenizer, Tokenizer]) -> None:
    original, patched = pair
    for text in TRICKY:
        assert patched.pre_tokenizer.pre_tokenize_str(text) == original.pre_tokenizer.pre_tokenize_str(text)


def test_pairs_padding_truncation_equal_original(pair: tuple[Tokenizer, Tokenizer], data_dir: Path) -> None:
    original, patched = pair
    texts = sample(data_dir, 2)
    pairs = list(zip(texts[::2], texts[1::2]))
    for tok in (original, patched):
        tok.enable_padding(pad_id=0, pad_token="!")
        tok.enable_truncation(max_length=40)
    try:
        for expected, got in zip(original.encode_batch(pairs), patched.encode_batch(pairs)):
            same(expected, got)
    finally:
        for tok in (original, patched):
            tok.no_padding()
            tok.no_truncation()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["llama3.1", "llama3.2", "qwen2", "qwen3"])
def test_xnli_encode_batch_equals_original(data_dir: Path, model: str) -> None:
    """XNLI (15 languages, test and dev, premise and hypothesis; each distinct text once; one row in
    ``PEEK2_XNLI_EVERY``, all with 1): ids, tokens, offsets, word ids, for both Llama-3
    ``ignore_merges`` variants and Qwen2 and Qwen3.
    """
    original, patched = load(data_dir, model), peek2.patch(load(data_dir, model))
    texts = xnli_texts(data_dir, xnli_every())
    mismatches = []
    for start in range(0, len(texts), 5000):
        chunk = texts[start : start + 5000]
        for text, expected, got in zip(chunk, original.encode_batch(chunk), patched.encode_batch(chunk)):
            if (expected.ids, expected.tokens, expected.offsets, expected.word_ids) != (
                got.ids, got.tokens, got.offsets, got.word_ids
            ):
                mismatches.append(text)
    assert mismatches == []


def test_xnli_sample_encode_equals_original(pair: tuple[Tokenizer, Tokenizer], data_dir: Path) -> None:
    """``encode`` one text at a time, every language."""
    original, patched = pair
    for text in sample(data_dir):
        same(original.encode(text), patched.encode(text))


# ==== Peek2() itself ====


def test_peek2_is_the_whole_pre_tokenizer(data_dir: Path) -> None:
    """``tok.pre_tokenizer = Peek2(family)`` on a Llama-3 and a Qwen2 tokenizer: the original's results."""
    for model, family in (("llama3", "llama3"), ("qwen2", "qwen2")):
        original, tok = load(data_dir, model), load(data_dir, model)
        tok.pre_tokenizer = peek2.Peek2(family)
        for text in TRICKY:
            same(original.encode(text), tok.encode(text))


def test_peek2_accepts_a_pattern_string_and_pickles() -> None:
    by_name, by_pattern = peek2.Peek2("qwen2"), peek2.Peek2(peek2.PATTERNS["qwen2"])
    text = "I've 1234 \u00e9t\u00e9s"
    assert by_name.pre_tokenize_str(text) == by_pattern.pre_tokenize_str(text)
    assert pickle.loads(pickle.dumps(by_name)).pre_tokenize_str(text) == by_name.pre_tokenize_str(text)
    reference = pre_tokenizers.Split(Regex(peek2.PATTERNS["llama3"]), "isolated")
    assert peek2.Peek2(byte_level=False).pre_tokenize_str(text) == reference.pre_tokenize_str(text)


@pytest.mark.parametrize("bad, error", [("gpt5", peek2.UnsupportedPatternError), (r"\p{L}+", peek2.UnsupportedPatternError), (3, TypeError)])
def test_peek2_refuses_unknown_patterns(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        peek2.Peek2(bad)  # type: ignore[arg-type]


# ==== Linear time ====


def split_cost_per_byte(split: Peek2Split, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        normalized = NormalizedString(text)
        start = time.process_time()  # CPU time of this process: another process does not count
        pieces = split._split(0, normalized)
        best = min(best, time.process_time() - start)
    assert "".join(map(str, pieces)) == text
    return best / len(text.encode("utf-8"))


@pytest.mark.slow
def test_split_is_linear_on_non_ascii_text() -> None:
    """Cost per byte of the split at 1M characters against 100K (slicing each piece out of the whole
    string would be ~10x: char offsets are found by walking from the start); no wall-clock limit."""
    unit = "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u6f22\u5b57 12345.\n"
    small, large = (unit * (100_000 // len(unit)))[:100_000], (unit * (1_000_000 // len(unit)))[:1_000_000]
    split = Peek2Split("llama3")
    small_cost, large_cost = split_cost_per_byte(split, small, 3), split_cost_per_byte(split, large, 3)
    assert large_cost < 2.5 * small_cost, (small_cost, large_cost)


def test_halving_keeps_offsets(data_dir: Path) -> None:
    """A text far above CHUNK_CHARS, one long piece among short ones: the original's offsets."""
    original, patched = load(data_dir, "qwen3"), peek2.patch(load(data_dir, "qwen3"))
    text = ("caf\u00e9 \u4f60\u597d 1 " * 800) + "y" * (3 * CHUNK_CHARS) + " \u00e9\n" * 500
    same(original.encode(text), patched.encode(text))


class CountingNormalized:
    """A NormalizedString that records how it was cut (``split`` behaviours, ``slice`` forms)."""

    def __init__(self, normalized: NormalizedString, seen: set[str]) -> None:
        self.normalized, self.seen = normalized, seen

    def split(self, char: str, behavior: str) -> list[CountingNormalized]:
        self.seen.add(behavior)
        return [CountingNormalized(part, self.seen) for part in self.normalized.split(char, behavior)]

    def slice(self, where: int | tuple[int, int]) -> CountingNormalized:
        self.seen.add("slice by index" if isinstance(where, int) else "slice by range")
        part = self.normalized.slice(where)
        assert part is not None
        return CountingNormalized(part, self.seen)


@pytest.mark.parametrize("family", list(peek2.PATTERNS))
def test_random_texts_cut_like_the_regex(family: str) -> None:
    """Random texts of characters that repeat and sit on either side of cuts (runs of spaces,
    punctuation, marks, digits): the pieces and offsets of ``Split(Regex(pattern))``, and every
    way of cutting (each split behaviour, both slice forms) is used."""
    from peek2.plugin.cuts import cut_pieces

    alphabet = list("  \n\r\t..,,''!?()-_1234aAzZ\u00e9\u0301\u0915\u093e\u094d\u0e01\u0e48\u4f60\u3002\u00a0\u3000")
    regex = pre_tokenizers.Split(Regex(peek2.PATTERNS[family]), "isolated")
    mine = pre_tokenizers.PreTokenizer.custom(Peek2Split(family))
    pattern = peek2.pretokenize.pattern.resolve(family)
    rng = random.Random(family)
    seen: set[str] = set()
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        expected = regex.pre_tokenize_str(text)
        assert mine.pre_tokenize_str(text) == expected, text
        pieces = cut_pieces(CountingNormalized(NormalizedString(text), seen), text, pattern.split_ends(text))
        assert [str(piece.normalized) for piece in pieces] == [piece for piece, _ in expected], text
    long_text = "".join(rng.choice(alphabet) for _ in range(5 * CHUNK_CHARS))  # halved first
    assert mine.pre_tokenize_str(long_text) == regex.pre_tokenize_str(long_text)
    assert seen == {"isolated", "merged_with_next", "merged_with_previous", "slice by index", "slice by range"}


# ==== Serialisation ====


def test_to_str_and_save_write_the_original(data_dir: Path, tmp_path: Path) -> None:
    original, patched = load(data_dir, "qwen3"), peek2.patch(load(data_dir, "qwen3"))
    assert patched.to_str() == original.to_str()
    patched.save(str(tmp_path / "tokenizer.json"))
    reloaded = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))  # plain tokenizers reads it
    assert patched_family(reloaded) is None
    same(original.encode(TRICKY[1]), reloaded.encode(TRICKY[1]))
    same(original.encode(TRICKY[1]), patched.encode(TRICKY[1]))  # still patched after saving
    assert patched_family(patched) is not None


@pytest.mark.parametrize("model", ["llama3.1", "llama3.2", "qwen3", "gpt4o", "deepseek-v3"])
def test_the_saved_form_follows_what_changed_after_patching(data_dir: Path, model: str) -> None:
    """The saved form is made beside the patched tokenizer (its model and components shared, its
    added tokens given again in the order of their ids), never by writing to it: it must be the
    unpatched tokenizer's to_str, byte for byte, after any change made since patching."""
    from tokenizers import AddedToken

    original, patched = load(data_dir, model), peek2.patch(load(data_dir, model))
    assert patched.to_str() == original.to_str() and patched.to_str(True) == original.to_str(True)
    for tok in (original, patched):
        tok.enable_truncation(max_length=77, stride=3, direction="left")
        tok.enable_padding(pad_id=5, pad_token="x", pad_to_multiple_of=8)
        tok.add_tokens(["zqzq", AddedToken("hello there", single_word=True, lstrip=True)])
        tok.add_special_tokens(["<new>"])
        tok.add_tokens([AddedToken("<other>", normalized=False)])
        tok.encode_special_tokens = True
        tok.decoder = None
    assert patched.to_str() == original.to_str()
    for tok in (original, patched):
        tok.normalizer = None
        tok.no_padding()
    assert patched.to_str(True) == original.to_str(True)
    same(original.encode("a zqzq <new> hello there <other>"), patched.encode("a zqzq <new> hello there <other>"))
    # A truncation, then a post-processor that adds more tokens than it leaves room for: tokenizers
    # checks a truncation when it is set, and the saved form set it after the post-processor (a
    # bug hunt: ValueError, stride greater than the effective max length).
    for tok in (original, patched):
        tok.enable_truncation(10, stride=5)
        tok.post_processor = processors.TemplateProcessing(
            single="[A] [A] [A] $A [B] [B] [B]", pair="$A $B", special_tokens=[("[A]", 1), ("[B]", 2)]
        )
    assert patched.to_str() == original.to_str()
    # Trained since patching: a model of 300 tokens, the added tokens keeping their ids (the
    # saved form renumbered them, and the save fell back to writing to the tokenizer, which hung
    # beside an encode in another thread: a bug hunt).
    for tok in (original, patched):
        tok.no_truncation()
        tok.train_from_iterator(["hello world foo bar"] * 50, trainer=trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>"], show_progress=False))
    assert patched.to_str() == original.to_str() and patched.to_str(True) == original.to_str(True)


def test_a_saved_file_is_the_unpatched_tokenizers_file(data_dir: Path, tmp_path: Path) -> None:
    original, patched = load(data_dir, "llama3.1"), peek2.patch(load(data_dir, "llama3.1"))
    for pretty in (True, False):
        original.save(str(tmp_path / "a.json"), pretty)
        patched.save(str(tmp_path / "b.json"), pretty)
        assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_saving_beside_an_encode_in_another_thread_does_not_hang(data_dir: Path) -> None:
    """A bug hunt: to_str, save or pickle in one thread while another encoded with the patched
    tokenizer hung the process for good (the save set the pre-tokenizer, waiting with the GIL for
    the lock the encode held while Peek2 waited for the GIL). Run in a child process, whose hang
    the timeout ends (as a failure; the child takes about a second)."""
    child = (
        "import pickle, sys, threading, peek2\n"
        "from tokenizers import Tokenizer\n"
        "tok = peek2.patch(Tokenizer.from_file(sys.argv[1]))\n"
        "if sys.argv[2] == 'trained':\n"
        "    from tokenizers import trainers\n"
        "    tok.train_from_iterator(['hello world foo bar'] * 50, trainer=trainers.BpeTrainer(vocab_size=300, special_tokens=['<s>'], show_progress=False))\n"
        "texts = ['Hello world, this is a sentence. 12345'] * 500\n"
        "expected = tok.to_str()\n"
        "def encoder(call):\n"
        "    for _ in range(10): call()\n"
        "def saver():\n"
        "    for _ in range(10): assert tok.to_str() == expected; pickle.loads(pickle.dumps(tok))\n"
        "threads = [threading.Thread(target=encoder, args=(lambda: tok.encode_batch(texts),)),\n"
        "           threading.Thread(target=encoder, args=(lambda: [tok.encode(t) for t in texts[:100]],)),\n"
        "           threading.Thread(target=saver)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print('finished')\n"
    )
    import subprocess
    import sys

    path = str(data_dir / "tokenizers" / "qwen2" / "tokenizer.json")
    for state in ("loaded", "trained"):
        result = subprocess.run([sys.executable, "-c", child, path, state], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0 and result.stdout == "finished\n", (state, result.stderr)


def test_pickle_and_deepcopy_stay_patched(data_dir: Path) -> None:
    original, patched = load(data_dir, "llama3.1"), peek2.patch(load(data_dir, "llama3.1"))
    patched.add_tokens(["<my token>"])
    original.add_tokens(["<my token>"])
    for clone in (pickle.loads(pickle.dumps(patched)), copy.deepcopy(patched)):
        assert patched_family(clone) == "llama3"
        for text in TRICKY[:4] + ["a <my token> b"]:
            same(original.encode(text), clone.encode(text))


@pytest.mark.parametrize("replacement", ["WhitespaceSplit", "none"])
def test_a_pre_tokenizer_given_after_patching_is_kept(data_dir: Path, tmp_path: Path, replacement: str) -> None:
    """to_str, save and pickle wrote the original pre-tokenizer in place of one the user set after
    patching, and to_str put Peek2 back into the live tokenizer: silently undoing the assignment."""
    step = pre_tokenizers.WhitespaceSplit() if replacement == "WhitespaceSplit" else None
    reference, tok = load(data_dir, "gpt4o"), peek2.patch(load(data_dir, "gpt4o"))
    reference.pre_tokenizer = step
    tok.pre_tokenizer = step
    text = "Hello world! It's   here"
    # (no 10 MB value in an assert: pytest's explanation of a failure would diff them for ever)
    written, expected = json.loads(tok.to_str()), json.loads(reference.to_str())
    step_written, step_expected = written.pop("pre_tokenizer"), expected.pop("pre_tokenizer")
    assert step_written == step_expected
    rest_equal = written == expected
    assert rest_equal
    same(reference.encode(text), tok.encode(text))
    assert patched_family(tok) is None
    for clone in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok)):
        assert patched_family(clone) is None
        same(reference.encode(text), clone.encode(text))
    other = peek2.patch(load(data_dir, "gpt4o"))
    other.pre_tokenizer = step
    other.save(str(tmp_path / "tokenizer.json"))
    step_saved = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))["pre_tokenizer"]
    assert step_saved == step_expected
    same(reference.encode(text), other.encode(text))


def encode_ids(tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text).ids


def test_multiprocessing_pool(data_dir: Path) -> None:
    original, patched = load(data_dir, "qwen2"), peek2.patch(load(data_dir, "qwen2"))
    texts = sample(data_dir, 4)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.starmap(encode_ids, [(patched, text) for text in texts], chunksize=len(texts) // 2)
    assert got == [e.ids for e in original.encode_batch(texts)]


def test_unpatch_restores_the_original(data_dir: Path) -> None:
    tok = peek2.patch(load(data_dir, "qwen2"))
    assert peek2.patch(tok) is tok  # patching twice does nothing
    unpatch(tok)
    assert patched_family(tok) is None and "save" not in tok.__dict__
    assert tok.pre_tokenizer.__getstate__() == load(data_dir, "qwen2").pre_tokenizer.__getstate__()


# ==== Training ====


@pytest.mark.slow
def test_training_equals_original(data_dir: Path) -> None:
    """BpeTrainer on XNLI in all 15 languages: the same vocabulary and merges as with the regex."""
    corpus = sample(data_dir, 60)

    def train(pre_tokenizer: pre_tokenizers.PreTokenizer) -> dict[str, object]:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizer
        trainer = trainers.BpeTrainer(
            vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        tok.train_from_iterator(corpus, trainer)
        model = json.loads(tok.model.__getstate__())  # to_str refuses the custom component
        return {"vocab": model["vocab"], "merges": model["merges"]}

    regex = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(peek2.PATTERNS["llama3"]), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    expected, got = train(regex), train(peek2.Peek2("llama3"))
    assert len(expected["merges"]) > 2000  # type: ignore[arg-type]
    assert got == expected


# ==== Refusals ====


def with_pre_tokenizer(pre_tokenizer: object) -> Tokenizer:
    """A small byte-level BPE tokenizer with this pre_tokenizer (JSON form)."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    data = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "vocab": {char: k for k, char in enumerate(sorted(alphabet))}, "merges": []},
    }
    return Tokenizer.from_str(json.dumps(data))


SPLIT = {"type": "Split", "pattern": {"Regex": peek2.PATTERNS["llama3"]}, "behavior": "Isolated", "invert": False}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}


@pytest.mark.parametrize(
    "pre_tokenizer, error, message",
    [
        (None, NotImplementedError, "no pre_tokenizer"),
        ({"type": "Whitespace"}, NotImplementedError, "Whitespace"),
        ({"type": "Sequence", "pretokenizers": [SPLIT]}, NotImplementedError, "ByteLevel"),  # not byte-level
        ({"type": "Sequence", "pretokenizers": [SPLIT, {**BYTE_LEVEL, "add_prefix_space": True}]}, NotImplementedError, "add_prefix_space"),
        ({"type": "Sequence", "pretokenizers": [{**SPLIT, "pattern": {"Regex": r"\p{L}+|\p{N}"}}, BYTE_LEVEL]},
         peek2.UnsupportedPatternError, "nearest family"),
        ({"type": "Sequence", "pretokenizers": [{**SPLIT, "behavior": "Removed", "invert": False}, BYTE_LEVEL]},
         NotImplementedError, "Isolated"),
        ({"type": "Sequence", "pretokenizers": [{**SPLIT, "pattern": {"String": " "}}, BYTE_LEVEL]}, NotImplementedError, "Regex"),
    ],
)
def test_patch_refuses_unsupported_pipelines(pre_tokenizer: object, error: type[Exception], message: str) -> None:
    tok = with_pre_tokenizer(pre_tokenizer)
    with pytest.raises(error, match=message):
        peek2.patch(tok)
    assert patched_family(tok) is None and "save" not in tok.__dict__


def test_patch_accepts_the_supported_pipeline() -> None:
    tok = peek2.patch(with_pre_tokenizer({"type": "Sequence", "pretokenizers": [SPLIT, BYTE_LEVEL]}))
    assert patched_family(tok) == "llama3"
    assert tok.encode("Hi  there").tokens == ["H", "i", "Ġ", "Ġ", "t", "h", "e", "r", "e"]


def test_patch_accepts_split_removed_inverted() -> None:
    # Removed with invert keeps the matches, which for a family pattern cover every character
    # (issue 24: hub ports of cl100k are written that way): the same pieces as Isolated.
    pipeline = {"type": "Sequence", "pretokenizers": [{**SPLIT, "behavior": "Removed", "invert": True}, BYTE_LEVEL]}
    original, tok = with_pre_tokenizer(pipeline), peek2.patch(with_pre_tokenizer(pipeline))
    assert patched_family(tok) == "llama3"
    for text in ("Hi  there", "I'm 12345!\n\n  ok", "漢字 \t x"):
        assert tok.encode(text).tokens == original.encode(text).tokens
        assert tok.encode(text).offsets == original.encode(text).offsets


PATCH_TEXTS = (
    "Hi  there", "I'm 12345!\n\n  ok", "漢字 \t x", "McDonald's iPHONE ÉCOLE'S\n//x",
    "日本語のテキスト123(café) \x00\x01x  1", "<|endoftext|>x<｜begin▁of▁sentence｜>",
)


@pytest.mark.parametrize("model", ["gpt4o", "deepseek-v3"])
def test_patch_new_families(data_dir: Path, model: str) -> None:
    # GPT-4o's Split(Removed, invert) of o200k's pattern; DeepSeek-V3's three Splits (issue 24).
    original, tok = load(data_dir, model), peek2.patch(load(data_dir, model))
    assert patched_family(tok) == {"gpt4o": "o200k", "deepseek-v3": "deepseek-v3"}[model]
    for text in PATCH_TEXTS:
        expected, got = original.encode(text), tok.encode(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), text
    assert json.loads(tok.to_str())["pre_tokenizer"] == json.loads(original.to_str())["pre_tokenizer"]


def test_patch_gpt2(data_dir: Path) -> None:
    # GPT-2's one ByteLevel(use_regex=true) becomes Peek2's gpt2 split + a ByteLevel that maps bytes.
    from compliance.reference import reference_and_peek2

    original = reference_and_peek2(str(data_dir / "tokenizers" / "gpt2" / "encoder.json"))[0]
    tok = peek2.patch(reference_and_peek2(str(data_dir / "tokenizers" / "gpt2" / "encoder.json"))[0])
    assert patched_family(tok) == "gpt2"
    for text in PATCH_TEXTS:
        expected, got = original.encode(text), tok.encode(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), text
    assert json.loads(tok.to_str())["pre_tokenizer"] == json.loads(original.to_str())["pre_tokenizer"]


def test_patch_refuses_custom_and_non_tokenizers(data_dir: Path) -> None:
    tok = load(data_dir, "llama3.1")
    tok.pre_tokenizer = peek2.Peek2()
    with pytest.raises(NotImplementedError, match="custom component"):
        peek2.patch(tok)
    with pytest.raises(TypeError, match="tokenizers.Tokenizer"):
        peek2.patch("tokenizer.json")  # type: ignore[arg-type]


def test_docstring_examples() -> None:
    import doctest

    import peek2.plugin.pre_tokenizer

    failures, attempted = doctest.testmod(peek2.plugin.pre_tokenizer)
    assert failures == 0 and attempted >= 4


def test_concurrent_saves_keep_the_patch(tmp_path: Path) -> None:
    """A bug hunt: one thread's save put the original pre-tokenizer in, another's took it for a
    user's replacement and dropped the patch; the first then failed with KeyError."""
    pipeline = {"type": "Sequence", "pretokenizers": [SPLIT, BYTE_LEVEL]}
    expected = with_pre_tokenizer(pipeline).to_str()
    tok = peek2.patch(with_pre_tokenizer(pipeline))
    errors: list[BaseException] = []
    written: list[bool] = []
    start = threading.Barrier(4)

    def work(index: int) -> None:
        try:
            start.wait()
            for round_ in range(300):
                if index == 0:
                    pickle.loads(pickle.dumps(tok))
                elif index == 1:
                    tok.save(str(tmp_path / f"{round_ % 2}.json"))
                else:
                    written.append(tok.to_str() == expected)
        except BaseException as error:
            errors.append(error)

    # (threads switch inside the swap's window, as on a busy machine)
    run_threads_switching_often([functools.partial(work, index) for index in range(4)], 1e-6)
    assert errors == []
    assert written == [True] * 600
    assert patched_family(tok) == "llama3"
    with pytest.raises(Exception, match="cannot be serialized"):
        tok.pre_tokenizer.__getstate__()  # Peek2's custom component still installed
