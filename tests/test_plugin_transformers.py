"""``peek2.patch_transformers()`` against the unpatched transformers tokenizers, on XNLI in every language.

The patched and the unpatched tokenizer of each model are loaded from the same folder by
``AutoTokenizer.from_pretrained``; both the standalone path (no offsets) and the backend
path (offsets, padding, pairs) must give what the unpatched one gives.
"""

from __future__ import annotations

import copy
import json
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer  # in the test extra: a missing transformers fails, never skips

import peek2
from compliance import xnli
from peek2.plugin import transformers_patch
from peek2.plugin import patched_family

# The Llama-3 and Qwen backend classes (TokenizersBackend, Qwen2Tokenizer), DeepSeek-V3's three
# Splits, and GPT-4o's folder, which names GPT2Tokenizer: transformers 5 rebuilds it with GPT-2's
# own ByteLevel regex (not the file's o200k Split), so the patch meets the gpt2 family there.
MODELS = ["llama3.1", "qwen3", "deepseek-v3", "gpt4o"]
PER_LANGUAGE = 40


def unpatched(tok: Any, *args: Any, **kwargs: Any) -> Any:
    """``tok(*args, **kwargs)`` with transformers unpatched (the patch is on the class: it reaches every instance)."""
    was_patched = transformers_patch.is_transformers_patched()
    peek2.unpatch_transformers()
    try:
        return tok(*args, **kwargs)
    finally:
        if was_patched:
            peek2.patch_transformers()


def took_the_standalone_path(result: Any) -> bool:
    """Whether a call's result was made by peek2's standalone engine (its encodings made when read)."""
    return type(result) is transformers_patch._plain_result_class()


def engines_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an item for each engine the patch makes from a backend's JSON (none kept from before)."""
    made: list[int] = []
    real = transformers_patch.Tokenizer.from_str

    def counted(text: str) -> Any:
        made.append(1)
        return real(text)

    monkeypatch.setattr(transformers_patch.Tokenizer, "from_str", staticmethod(counted))
    monkeypatch.setattr(transformers_patch, "_ENGINES", type(transformers_patch._ENGINES)())
    return made


@pytest.fixture(scope="module")
def texts(data_dir: Path) -> list[str]:
    by_language: dict[str, list[str]] = {}
    for row in xnli.iter_xnli_tsv(data_dir / "xnli", ("test",)):
        bucket = by_language.setdefault(row.language, [])
        if len(bucket) < PER_LANGUAGE:
            bucket.extend((row.premise, row.hypothesis))
    assert sorted(by_language) == sorted(xnli.LANGUAGES)
    special = ["<|begin_of_text|>a<|eot_id|>", "<|im_start|>user\nhi<|im_end|><think>", "  x  \n\n\t y \u00e9"]
    return [text for bucket in by_language.values() for text in bucket] + special


@pytest.fixture(scope="module", params=MODELS)
def tokenizers_of(request: pytest.FixtureRequest, data_dir: Path) -> tuple[Any, Any]:
    """Two instances from the same folder: the reference is only ever called unpatched."""
    folder = str(data_dir / "tokenizers" / request.param)
    return AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


@pytest.fixture
def patched_transformers() -> Iterator[None]:
    """transformers patched for the test, unpatched after it whatever happens."""
    peek2.patch_transformers()
    try:
        yield
    finally:
        peek2.unpatch_transformers()


@pytest.fixture
def pair(tokenizers_of: tuple[Any, Any], patched_transformers: None) -> tuple[Any, Any]:
    return tokenizers_of


def test_call_without_offsets_is_the_standalone_engine(pair: tuple[Any, Any], texts: list[str]) -> None:
    reference, patched = pair
    expected = unpatched(reference, texts)
    expected_plain = unpatched(reference, texts, add_special_tokens=False, split_special_tokens=True)
    got = patched(texts)
    assert took_the_standalone_path(got)
    assert dict(got) == dict(expected)
    # made without BatchEncoding.__init__: the attributes BatchEncoding(data) gives, and what the
    # encodings are made from when first read
    assert isinstance(got, type(expected)) and got.__dict__.keys() == vars(type(expected)(dict(got))).keys() - {"_encodings"} | {
        transformers_patch._PENDING
    }
    assert dict(patched(texts, add_special_tokens=False, split_special_tokens=True)) == dict(expected_plain)
    assert patched.encode(texts[0]) == expected["input_ids"][0]
    assert dict(patched(texts[1])) == {key: value[1] for key, value in expected.items()}
    # (the keywords the shortcut of __call__ takes, and one it leaves to transformers)
    assert dict(patched(texts[2], return_attention_mask=False)) == dict(unpatched(reference, texts[2], return_attention_mask=False))
    assert dict(patched(texts[3], return_length=True)) == dict(unpatched(reference, texts[3], return_length=True))


def test_offsets_padding_and_pairs_take_the_backend_path(pair: tuple[Any, Any], texts: list[str]) -> None:
    reference, patched = pair
    for tok in (reference, patched):
        tok.pad_token = tok.pad_token or tok.eos_token  # Llama-3 files have none
    expected = unpatched(reference, texts, return_offsets_mapping=True)
    padded = unpatched(reference, texts[:30], texts[30:60], padding=True, truncation=True, max_length=48)
    got = patched(texts, return_offsets_mapping=True)
    assert patched_family(patched.backend_tokenizer) is not None  # the plugin does this path
    assert dict(got) == dict(expected)
    assert got.word_ids(5) == expected.word_ids(5)
    assert dict(patched(texts[:30], texts[30:60], padding=True, truncation=True, max_length=48)) == dict(padded)
    # a plain call after it turns the backend's padding and truncation off, as transformers does
    assert patched.backend_tokenizer.padding is not None and patched.backend_tokenizer.truncation is not None
    assert dict(patched(texts[0])) == dict(unpatched(reference, texts[0]))
    assert patched.backend_tokenizer.padding is None and patched.backend_tokenizer.truncation is None
    assert reference.backend_tokenizer.padding is None and reference.backend_tokenizer.truncation is None


def _outcome(tok: Any, text: Any, kwargs: dict[str, Any], rows: int) -> tuple[Any, ...]:
    """What a call gives: its data (arrays as their dtype, shape and values), each row's tokens,
    word ids and attention mask (its encodings), its warnings, and the backend's truncation and
    padding after it; or the error it raises."""
    import warnings

    import numpy as np

    def plain(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return (str(value.dtype), value.shape, [plain(v) for v in value] if value.dtype == object else value.tolist())
        return [plain(v) for v in value] if isinstance(value, list) else value

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = tok(text, **kwargs)
            got: tuple[Any, ...] = (
                {key: plain(value) for key, value in result.items()},
                [(result.tokens(r), result.word_ids(r), result[r].attention_mask, result[r].ids) for r in range(rows)],
            )
        except Exception as error:  # (the same error, unpatched and patched)
            got = (type(error).__name__, str(error))
    return (*got, [str(w.message) for w in caught], tok.backend_tokenizer.truncation, tok.backend_tokenizer.padding)


def test_padding_truncation_and_tensors_as_transformers_gives_them(tokenizers_of: tuple[Any, Any], texts: list[str]) -> None:
    """``tok(batch, padding=True, truncation=True, max_length=n, return_tensors="np")`` went through
    the backend with the plugin (a Python pre-tokenizer called for every text): 1.3-1.8x the
    unpatched time of a padded batch, where a plain call takes 0.05x. It is answered from peek2's
    ids, padded and truncated as the backend does it; random combinations of the options, each
    against the unpatched call: data, encodings, warnings and the backend's settings after it."""
    import itertools
    import random
    import warnings

    reference, patched = tokenizers_of
    for tok in (reference, patched):
        tok.pad_token = tok.pad_token or tok.eos_token  # Llama-3 files have none
    options = {
        "padding": [True, "longest", "max_length", False], "truncation": [True, "only_first", False, "only_second"],
        "max_length": [None, 0, 1, 2, 12], "pad_to_multiple_of": [None, 8], "padding_side": [None, "left"],
        "return_tensors": [None, "np"], "add_special_tokens": [True, False],
    }  # fmt: skip
    rng = random.Random(26)
    every = [dict(zip(options, values)) for values in itertools.product(*options.values())]
    # (padding="max_length" without one pads to model_max_length, 131,072 ids a row with Qwen3's file)
    combos = rng.sample([kwargs for kwargs in every if kwargs["padding"] != "max_length" or kwargs["max_length"] is not None], 60)
    calls = [(rng.choice(["right", "left"]), kwargs, rng.choice([texts[::9], texts[-4]])) for kwargs in combos]
    was = transformers_patch.is_transformers_patched()
    peek2.unpatch_transformers()
    try:
        expected = []
        for side, kwargs, text in calls:
            reference.truncation_side = side
            expected.append(_outcome(reference, text, kwargs, 1 if isinstance(text, str) else len(text)))
    finally:
        if was:
            peek2.patch_transformers()
    peek2.patch_transformers()
    try:
        standalone = 0
        for (side, kwargs, text), want in zip(calls, expected):
            patched.truncation_side = side
            assert _outcome(patched, text, kwargs, 1 if isinstance(text, str) else len(text)) == want, (side, kwargs)
            if isinstance(want[0], dict):  # (not an error)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # (compared above)
                    standalone += took_the_standalone_path(patched(text, **kwargs))
        assert standalone > 20
    finally:
        if not was:
            peek2.unpatch_transformers()


def test_a_subclass_reset_of_truncation_and_padding_is_called(data_dir: Path, patched_transformers: None) -> None:
    calls: list[tuple[Any, Any]] = []

    class Recording(type(AutoTokenizer.from_pretrained(str(data_dir / "tokenizers" / "llama3.1")))):  # type: ignore[misc]
        def set_truncation_and_padding(self, padding_strategy: Any, truncation_strategy: Any, *args: Any, **kwargs: Any) -> None:
            calls.append((padding_strategy, truncation_strategy))
            super().set_truncation_and_padding(padding_strategy, truncation_strategy, *args, **kwargs)

    tok = Recording.from_pretrained(str(data_dir / "tokenizers" / "llama3.1"))
    assert tok("Hello world")["input_ids"] == [128000, 9906, 1917]
    assert [(p.value, t.value) for p, t in calls] == [("do_not_pad", "do_not_truncate")]


def test_added_tokens_and_bos_changes_are_seen(data_dir: Path, patched_transformers: None) -> None:
    folder = str(data_dir / "tokenizers" / "llama3.1")
    reference = AutoTokenizer.from_pretrained(folder)
    patched = AutoTokenizer.from_pretrained(folder)
    text = "a <new tok> b"
    assert patched(text)["input_ids"] == unpatched(reference, text)["input_ids"]
    for tok in (reference, patched):
        tok.add_tokens(["<new tok>"])
        tok.add_bos_token = False
    assert patched(text)["input_ids"] == unpatched(reference, text)["input_ids"]
    assert patched(text)["input_ids"][0] != 128000
    text = "x <extra special> y"
    for tok in (reference, patched):
        tok.add_special_tokens({"additional_special_tokens": ["<extra special>"]})
    assert patched(text)["input_ids"] == unpatched(reference, text)["input_ids"]
    assert patched_family(reference.backend_tokenizer) is None  # never called while patched


def test_save_pickle_and_unpatch(data_dir: Path, tmp_path: Path, patched_transformers: None) -> None:
    folder = str(data_dir / "tokenizers" / "qwen2")
    reference = AutoTokenizer.from_pretrained(folder)
    patched = AutoTokenizer.from_pretrained(folder)
    text = "Hello \u4f60\u597d 123"
    expected = dict(unpatched(reference, text, return_offsets_mapping=True))
    assert dict(patched(text, return_offsets_mapping=True)) == expected  # installs the plugin
    patched.save_pretrained(str(tmp_path))
    clone = pickle.loads(pickle.dumps(patched))
    assert dict(clone(text, return_offsets_mapping=True)) == expected
    assert dict(copy.deepcopy(patched)(text)) == dict(unpatched(reference, text))
    peek2.unpatch_transformers()  # (idempotent: the fixture's unpatch after the test is a no-op)
    assert not transformers_patch.is_transformers_patched()
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path))  # unpatched transformers reads what was saved
    assert dict(reloaded(text, return_offsets_mapping=True)) == expected
    assert reloaded(text).encodings is not None


def test_unsupported_tokenizers_are_left_alone(data_dir: Path, tmp_path: Path, patched_transformers: None) -> None:
    # DeepSeek-V3's files with its first Split changed to \p{N}{1,4}: no peek2 family.
    source = data_dir / "tokenizers" / "deepseek-v3"
    data = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\p{N}{1,4}"
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    shutil.copy(source / "tokenizer_config.json", tmp_path / "tokenizer_config.json")
    folder = str(tmp_path)
    reference = AutoTokenizer.from_pretrained(folder)
    patched = AutoTokenizer.from_pretrained(folder)
    text = "Hello world 12345 \u4f60\u597d"
    got = patched(text)
    assert not took_the_standalone_path(got)  # transformers' own path
    assert dict(got) == dict(unpatched(reference, text))
    assert patched_family(patched.backend_tokenizer) is None


def test_tokenize_works_while_patched(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: ``tok.tokenize(text)`` raised ValueError while patched (it reads ``.tokens()``
    of a result the plain path makes without encodings)."""
    for model in MODELS:
        folder = str(data_dir / "tokenizers" / model)
        reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
        for text in ("Hello world", "  x  \n\n\t y \u00e9 <|im_start|>", "漢字かな Ωmega 123456"):
            peek2.unpatch_transformers()
            expected = reference.tokenize(text), reference.tokenize(text, "a pair", add_special_tokens=True)
            peek2.patch_transformers()
            assert (patched.tokenize(text), patched.tokenize(text, "a pair", add_special_tokens=True)) == expected


def test_plain_results_answer_tokens_word_ids_and_offsets(pair: tuple[Any, Any], texts: list[str]) -> None:
    """A bug hunt: a plain call's result (peek2's standalone engine) had no ``encodings``:
    ``.tokens()``, ``.word_ids()``, ``.char_to_token()`` and ``result[0]`` raised "not available
    when using Python based tokenizers", ``is_fast`` was False and ``n_sequences`` None, where
    transformers' own path answers them. They are the backend's, made when first read."""
    reference, patched = pair
    sample = texts[::7] + texts[-3:]
    options = [{}, {"add_special_tokens": False, "split_special_tokens": True}]
    for kwargs in options:
        expected = unpatched(reference, sample, **kwargs)
        got = patched(sample, **kwargs)
        assert took_the_standalone_path(got) and got.is_fast and got.n_sequences == expected.n_sequences == 1
        for row, text in enumerate(sample):
            assert got.tokens(row) == expected.tokens(row)
            assert got.word_ids(row) == expected.word_ids(row) and got.sequence_ids(row) == expected.sequence_ids(row)
            assert got[row].offsets == expected[row].offsets and got[row].ids == expected["input_ids"][row]
            assert [got.char_to_token(row, i) for i in range(len(text))] == [expected.char_to_token(row, i) for i in range(len(text))]
        one, one_expected = patched(sample[-2], **kwargs), unpatched(reference, sample[-2], **kwargs)
        assert one.tokens() == one_expected.tokens() and one.word_ids() == one_expected.word_ids() and one.n_sequences == 1
    # pickled and deep-copied as transformers' own BatchEncoding, encodings included
    got, expected = patched(sample[:3]), unpatched(reference, sample[:3])
    for clone in (pickle.loads(pickle.dumps(got)), copy.deepcopy(got)):
        assert type(clone) is type(expected) and dict(clone) == dict(expected) and clone.tokens(2) == expected.tokens(2)
    # the texts as they were at the call, and the backend's truncation and padding left as they were
    batch = list(sample[:2])
    got = patched(batch)
    batch[0] = "changed"
    patched.backend_tokenizer.enable_truncation(max_length=3)
    assert got.tokens(0) == expected.tokens(0) and patched.backend_tokenizer.truncation["max_length"] == 3
    patched.backend_tokenizer.no_truncation()
    # a tokenizer changed since the call: an error, never encodings of other ids
    changed = AutoTokenizer.from_pretrained(patched.name_or_path)  # (the module's pair stays as loaded)
    got = changed("Hello world")
    changed.add_tokens(["world"])
    with pytest.raises(RuntimeError, match="changed since this call"):
        got.tokens()


def test_tokens_added_at_run_time_keep_their_live_ids(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: a token added to GPT-4o's tokenizer takes id 200019 in the live backend (after
    its largest added id) where a reload of the saved JSON numbers it 200000; the plain path gave
    200000, an id the live tokenizer does not have."""
    folder = str(data_dir / "tokenizers" / "gpt4o")
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    for tok in (reference, patched):
        tok.add_tokens(["hello world"])
        tok.add_special_tokens({"additional_special_tokens": ["<extra special>"]})
    text = "say hello world <extra special> twice: hello world"
    expected = unpatched(reference, text)["input_ids"]
    assert 200019 in expected  # (the live numbering this test is about)
    assert patched(text)["input_ids"] == expected
    assert patched(text, return_offsets_mapping=True)["input_ids"] == expected
    assert patched.decode(expected) == reference.decode(expected)


def test_added_tokens_equal_once_normalized_take_the_backend_path(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: with Qwen2's NFC, "e\\u0301" added as a token and "\\u00e9" as a special one are
    the same token once normalized. tokenizers matches one or the other from one run to the next
    (its automaton follows a hash map's order), and peek2's standalone engine matches the first:
    a patched call gave 151650 for "d\\u00e9" where transformers gave 165. The choice is even one
    tokenizer object's (two loads of one folder in one process may differ), so the reference is
    the same object unpatched, and such a tokenizer takes its backend's path."""
    from tokenizers import AddedToken

    patched = AutoTokenizer.from_pretrained(str(data_dir / "tokenizers" / "qwen2"))
    patched.add_tokens(["e\u0301"])
    patched.add_tokens([AddedToken("\u00e9", lstrip=True, normalized=True, special=True)])
    texts = ["d\u00e9 de\u0301", "caf\u00e9", "e\u0301t\u00e9 \u00e9"]
    for text in (texts[0], texts):
        got = patched(text)
        assert not took_the_standalone_path(got)
        assert dict(got) == dict(unpatched(patched, text))
    assert patched.encode(texts[0]) == unpatched(patched, texts[0])["input_ids"]
    assert transformers_patch._STATE[patched][1] is None  # (decided when it was built)


@pytest.mark.parametrize("model", ["qwen3", "llama3.1", "gpt4o"])
def test_a_special_token_added_again_as_a_normal_one_takes_the_backend_path(data_dir: Path, patched_transformers: None, model: str) -> None:
    """A bug hunt (stop 59): "ar" added as a special token, then as a normal one, stays special in
    the live backend (``split_special_tokens=True`` never matches it) while its saved JSON, which
    peek2 reads, calls it normal: the patched plain call matched "ar" inside "start" (Qwen3
    [267, 277, 83] instead of [2468]). Such a tokenizer now takes the backend's path; the usual
    re-adds (transformers' own at every load, the eos token made the pad token) keep the fast one."""
    folder = str(data_dir / "tokenizers" / model)
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    assert transformers_patch._engine(patched) is not None
    for tok in (reference, patched):
        tok.add_special_tokens({"pad_token": tok.eos_token})
    assert transformers_patch._engine(patched) is not None
    for tok in (reference, patched):
        tok.add_special_tokens({"additional_special_tokens": ["ar"]})
        tok.add_tokens(["ar"])
    for text in ("start", ["start", "a car ar", "ar"]):
        for split in (True, False):
            expected = unpatched(reference, text, split_special_tokens=split)["input_ids"]
            assert patched(text, split_special_tokens=split)["input_ids"] == expected, (text, split)


def test_tokens_added_after_a_truncating_call_keep_the_fast_path(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: tokens added after a call with ``truncation=True`` (which leaves truncation set
    on the backend) rebuilt the standalone tokenizer from JSON holding that truncation, which it
    refused: every later plain call took the backend's path."""
    folder = str(data_dir / "tokenizers" / "llama3.1")
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    for tok in (reference, patched):
        tok(["a b c d e"], truncation=True, max_length=3)
        tok.add_tokens(["zzz"])
    assert patched("hi zzz")["input_ids"] == unpatched(reference, "hi zzz")["input_ids"]
    state = transformers_patch._STATE[patched]
    assert state[1] is not None  # the standalone tokenizer, not the backend's path


class _SameDecoder:
    def decode_chain(self, tokens: list[str]) -> list[str]:
        return tokens


class _SameNormalizer:
    def normalize(self, normalized: Any) -> None:
        pass


@pytest.mark.parametrize("component", ["decoder", "normalizer"])
def test_custom_components_are_left_alone(data_dir: Path, patched_transformers: None, component: str) -> None:
    """A bug hunt: a custom Python decoder on the backend made every patched call raise
    "Custom PyDecoder cannot be serialized" (the standalone tokenizer is built from its JSON)."""
    from tokenizers import decoders, normalizers

    folder = str(data_dir / "tokenizers" / "llama3.1")
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    for tok in (reference, patched):
        if component == "decoder":
            tok.backend_tokenizer.decoder = decoders.Decoder.custom(_SameDecoder())
        else:
            tok.backend_tokenizer.normalizer = normalizers.Normalizer.custom(_SameNormalizer())
    for text in ("Hello world", ["a b", "c"]):
        got = patched(text)
        assert not took_the_standalone_path(got)  # transformers' own path
        assert dict(got) == dict(unpatched(reference, text))
    peek2.unpatch_transformers()
    expected = reference.tokenize("Hello world")
    peek2.patch_transformers()
    assert patched.tokenize("Hello world") == expected
    assert transformers_patch._STATE[patched][1] is None  # decided once
    assert patched_family(patched.backend_tokenizer) is None


def test_tokens_added_while_unpatched_or_through_a_copy_are_seen(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: peek2's tokenizer built before ``add_tokens`` was kept when the tokens were added
    while transformers was unpatched, or through a ``copy.copy`` (which shares the backend)."""
    folder = str(data_dir / "tokenizers" / "llama3.1")
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    text = "a<new>b<newer>c"
    assert patched("warm up")["input_ids"] == unpatched(reference, "warm up")["input_ids"]  # builds peek2's
    peek2.unpatch_transformers()
    for tok in (reference, patched):
        tok.add_tokens(["<new>"])
    peek2.patch_transformers()
    assert patched(text)["input_ids"] == unpatched(reference, text)["input_ids"]
    twin = copy.copy(patched)
    assert twin.backend_tokenizer is patched.backend_tokenizer
    assert twin("warm up")["input_ids"] == unpatched(reference, "warm up")["input_ids"]
    for tok in (reference, twin):
        tok.add_tokens(["<newer>"])
    expected = unpatched(reference, text)["input_ids"]
    assert patched(text)["input_ids"] == expected
    assert twin(text)["input_ids"] == expected


def test_a_subclass_encode_plus_is_called(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: the patched ``__call__`` and ``tokenize`` skipped a subclass's own ``_encode_plus``."""
    folder = str(data_dir / "tokenizers" / "llama3.1")

    class Lower(type(AutoTokenizer.from_pretrained(folder))):  # type: ignore[misc]
        def _encode_plus(self, text: Any, text_pair: Any = None, **kwargs: Any) -> Any:
            text = text.lower() if isinstance(text, str) else [t.lower() for t in text]
            return super()._encode_plus(text, text_pair, **kwargs)

    reference, patched = Lower.from_pretrained(folder), Lower.from_pretrained(folder)
    for text in ("HELLO World", ["ONE Two", "tHREE"]):
        assert dict(patched(text)) == dict(unpatched(reference, text))
        assert dict(patched(text, add_special_tokens=False)) == dict(unpatched(reference, text, add_special_tokens=False))
    peek2.unpatch_transformers()
    expected = reference.tokenize("HELLO World"), reference.encode("HELLO World")
    peek2.patch_transformers()
    assert (patched.tokenize("HELLO World"), patched.encode("HELLO World")) == expected


def test_a_lone_surrogate_raises_what_transformers_raises(data_dir: Path, patched_transformers: None) -> None:
    # (a bug hunt: the patched plain path raised ValueError where transformers raises TypeError)
    tok = AutoTokenizer.from_pretrained(str(data_dir / "tokenizers" / "llama3.1"))
    for call in (lambda: tok("a\ud800"), lambda: tok(["a", "a\ud800"]), lambda: tok.encode("a\ud800")):
        with pytest.raises(TypeError, match=r"lone surrogate U\+D800 at index 1"):
            call()
        with pytest.raises(TypeError):
            unpatched(tok, "a\ud800")


THREADS_SCRIPT = r'''
import random, sys, threading
import peek2
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
texts = [f"Hello world {i} d\u00e9j\u00e0 vu <think>x</think> \u4f60\u597d" * (1 + i % 5) for i in range(50)]
expected = {(t, s): (tok(t, split_special_tokens=s).tokens(), tok(t, return_offsets_mapping=True, split_special_tokens=s)["offset_mapping"]) for t in texts for s in (False, True)}
peek2.patch_transformers()
wrong = []
def work(seed):
    rng = random.Random(seed)
    for _ in range(300):
        t, s = rng.choice(texts), rng.random() < 0.5
        if rng.random() < 0.5:
            got = tok(t, split_special_tokens=s).tokens()  # (the plain path, its encodings made by the backend)
            wrong.extend([(t, s)] if got != expected[(t, s)][0] else [])
        else:
            got = tok(t, return_offsets_mapping=True, split_special_tokens=s)["offset_mapping"]  # (the backend's path)
            wrong.extend([(t, s)] if got != expected[(t, s)][1] else [])
threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print("done", len(wrong))
'''


def test_threads_with_other_settings_do_not_deadlock_the_backend(data_dir: Path) -> None:
    """A bug hunt: 4 threads calling a patched tokenizer with ``split_special_tokens`` on and off
    hung for ever. The backend runs peek2's pre-tokenizer, a Python callback that its encode (which
    releases the GIL) needs the GIL for; a thread setting ``encode_special_tokens`` (transformers'
    path does at every call) waited for that encode while holding the GIL. The patched methods now
    take the backend's lock. (The timeout only turns a hang into a failure: the run takes seconds.)"""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT, str(data_dir / "tokenizers" / "qwen3")], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["done", "0"]


FORK_WHILE_BUSY = """
import os, signal, sys, threading, time, warnings
warnings.simplefilter("ignore")
import peek2, tokenizers
from transformers import AutoTokenizer
folder = sys.argv[1]
if sys.argv[2] == "transformers":
    peek2.patch_transformers()
    tok = AutoTokenizer.from_pretrained(folder)
    call = lambda: tok("hello")["input_ids"]
    busy = lambda: tok(["some text here " * 5] * 4)
else:
    tok = peek2.patch(tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json")))
    call = busy = tok.to_str
expected = call()
def loop():
    while True:
        busy()
threading.Thread(target=loop, daemon=True).start()
time.sleep(0.2)
for attempt in range(10):
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # (a child that hangs ends with SIGALRM)
        os._exit(0 if call() == expected else 3)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        print(f"fork {attempt}: the child {'hung' if os.WIFSIGNALED(status) else 'got other ids'}")
        sys.exit(1)
"""


@pytest.mark.parametrize("patched", ["transformers", "tokenizers"])
def test_a_fork_while_another_thread_calls_the_patched_tokenizer(data_dir: Path, patched: str) -> None:
    """A bug hunt: a child forked while another thread was in a patched call (transformers: the
    backend's lock) or in a save of a patched ``tokenizers.Tokenizer`` (the swap lock) hung at its
    first such call, the lock held for ever by a thread the child does not have. Unpatched, the
    child runs; each lock is made anew in a child now."""
    import subprocess
    import sys

    folder = str(data_dir / "tokenizers" / "llama3.1")
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_BUSY, folder, patched], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize("model", ["llama3.1", "qwen3"])
def test_apply_chat_template_takes_the_standalone_path(data_dir: Path, patched_transformers: None, model: str) -> None:
    """A bug hunt: ``apply_chat_template(tokenize=True)`` passes ``sanitize_control_tokens=False``,
    an argument the plain path did not know: every chat encode took transformers' path through
    the plugin, 1.2-1.55x slower than unpatched. It is the standalone engine's call now, with
    the unpatched ids; ``sanitize_control_tokens=True`` stays transformers' own."""
    folder = str(data_dir / "tokenizers" / model)
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    chat = [{"role": ["user", "assistant"][k % 2], "content": f"Turn {k}: déjà vu 你好 <|eot_id|> <|im_end|>\n\n" * (1 + k % 3)} for k in range(12)]
    for kwargs in ({}, {"add_generation_prompt": True}, {"continue_final_message": True}):
        peek2.unpatch_transformers()
        try:
            expected = reference.apply_chat_template(chat, tokenize=True, return_dict=True, **kwargs)
        finally:
            peek2.patch_transformers()
        got = patched.apply_chat_template(chat, tokenize=True, return_dict=True, **kwargs)
        assert took_the_standalone_path(got), kwargs
        assert dict(got) == dict(expected), kwargs


CHANGES_WHILE_ENCODING = """
import random, sys, threading, time
import peek2
from transformers import AutoTokenizer
peek2.patch_transformers()
tok = AutoTokenizer.from_pretrained(sys.argv[1])
texts = ["Hello world %d 漢字 <think>x</think> " % i * 20 for i in range(64)]
expected = tok(texts[:4], return_offsets_mapping=True)["offset_mapping"]
if sys.argv[2] == "unpatched":  # (the backend took the plugin while patched)
    peek2.unpatch_transformers()
stop = time.time() + 2
wrong = []
def encode(seed):
    rng = random.Random(seed)
    while time.time() < stop:
        got = tok(texts[:4], return_offsets_mapping=True, split_special_tokens=rng.random() < 0.5)["offset_mapping"]
        # (add_eos_token may have put an end token after each row)
        wrong.extend(k for k, (row, want) in enumerate(zip(got, expected)) if row[: len(want)] != want or len(row) > len(want) + 1)
def change():
    k = 0
    while time.time() < stop:
        k += 1
        tok.add_tokens([f"<z{k}>"])
        tok.add_eos_token = bool(k % 2)
threads = [threading.Thread(target=encode, args=(seed,)) for seed in range(2)]
if sys.argv[2] == "patched":
    threads.append(threading.Thread(target=change))
for thread in threads: thread.start()
for thread in threads: thread.join()
print("done", len(wrong))
"""


@pytest.mark.parametrize("state", ["patched", "unpatched"])
def test_a_backend_changed_or_unpatched_while_threads_encode_does_not_hang(data_dir: Path, state: str) -> None:
    """A bug hunt: with the plugin in the backend, a thread adding tokens (``add_tokens``) or
    setting ``add_eos_token`` while another's call encoded with offsets hung the process; so did
    threads calling a tokenizer unpatched after a patched call (the backend kept the plugin, and
    transformers' own calls take no lock). The changes now take the backend's lock, and unpatching
    gives each backend its own pre-tokenizer back. (The timeout turns a hang into a failure.)"""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", CHANGES_WHILE_ENCODING, str(data_dir / "tokenizers" / "qwen3"), state], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["done", "0"]


def test_flags_that_are_not_bools_behave_as_unpatched(data_dir: Path, patched_transformers: None) -> None:
    """A bug hunt: ``split_special_tokens=0`` (equal to the backend's False, which transformers then
    leaves alone) raised TypeError in the plain path, and ``is_split_into_words=0``, which
    transformers refuses, was answered by it."""
    folder = str(data_dir / "tokenizers" / "qwen3")
    reference, patched = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    text = "a <|im_end|> b"
    peek2.unpatch_transformers()
    try:
        expected = [(dict(reference(text, split_special_tokens=flag)), reference.encode(text, split_special_tokens=flag)) for flag in (0, 0.0)]
        with pytest.raises(TypeError):
            reference(["a b"], is_split_into_words=0)
    finally:
        peek2.patch_transformers()
    assert [(dict(patched(text, split_special_tokens=flag)), patched.encode(text, split_special_tokens=flag)) for flag in (0, 0.0)] == expected
    with pytest.raises(TypeError):
        patched(["a b"], is_split_into_words=0)


def test_copies_and_settings_set_back_reuse_the_engine(data_dir: Path, patched_transformers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug hunt: every new transformers object of a tokenizer (``copy.copy``, ``deepcopy``,
    unpickling, another load of the folder) and every change of it made peek2's engine again from
    the backend's JSON, 1-2.5 s each, also for ``add_eos_token`` set back to what it was. The
    engines last made are kept by the backend's saved form and live added tokens."""
    folder = str(data_dir / "tokenizers" / "llama3.1")
    tok, reference = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    made = engines_made(monkeypatch)
    expected = dict(unpatched(reference, "Hello world"))
    assert dict(tok("Hello world")) == expected and len(made) == 1
    for other in (copy.copy(tok), copy.deepcopy(tok), pickle.loads(pickle.dumps(tok)), AutoTokenizer.from_pretrained(folder)):
        assert dict(other("Hello world")) == expected
    assert len(made) == 1
    answers = []
    for value in (True, False, True):  # (the post-processor transformers makes each time: the same ids unpatched)
        tok.add_eos_token = reference.add_eos_token = value
        answers.append((dict(tok("Hello world")), dict(unpatched(reference, "Hello world"))))
    assert answers[0] == answers[2] and all(got == want for got, want in answers)
    assert len(made) == 3  # (True, then False: new engines; True again: the first one)


@pytest.mark.parametrize("model", MODELS)
def test_tokens_added_after_a_call_reuse_the_engine(data_dir: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> None:
    """A bug hunt (stop 69): the first call after ``add_tokens`` or ``add_special_tokens`` made
    peek2's engine again from the backend's JSON, 0.4-1.5 s where the unpatched call takes 0.1 ms.
    Added tokens do not touch the engine: the tokenizer with the live added tokens shares it, and
    answers as the unpatched one does, after additions of every kind. (The answers unpatched are
    taken first: patching again starts a new epoch, which makes the engine from the JSON.)"""
    from tokenizers import AddedToken

    folder = str(data_dir / "tokenizers" / model)
    additions: list[tuple[str, Any]] = [
        ("tokens", ["<new tok>"]),
        ("tokens", ["hello"]),  # (a vocabulary token: its own id)
        ("special", {"additional_special_tokens": ["<extra special>"]}),
        ("tokens", [AddedToken("[gap]", lstrip=True, rstrip=True)]),
        ("tokens", [AddedToken("caf\u00e9 au lait", normalized=True)]),
        ("special", {"pad_token": "<pad here>"}),
        ("tokens", [AddedToken("word", single_word=True)]),
    ]
    texts: list[Any] = [
        "say hello<new tok>world <extra special> twice:  [gap]  x",
        "un caf\u00e9 au lait <pad here><pad here> a word, words, sword",
        "<|begin_of_text|><|im_start|>user\nhello<|im_end|>",
    ]
    texts.append(list(texts))

    def answers(tok: Any) -> list[Any]:
        ids = tok("hello<new tok><extra special> [gap] word")["input_ids"]
        return [dict(tok(text, split_special_tokens=split)) for text in texts for split in (True, False)] + [ids, tok.decode(ids)]

    assert not transformers_patch.is_transformers_patched()
    reference = AutoTokenizer.from_pretrained(folder)
    expected = []
    for kind, new in additions:
        reference.add_tokens(new) if kind == "tokens" else reference.add_special_tokens(new)
        expected.append(answers(reference))
    made = engines_made(monkeypatch)
    peek2.patch_transformers()
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        tok("Hello world")
        first = transformers_patch._STATE[tok][1]
        assert first is not None and made == [1]
        for (kind, new), want in zip(additions, expected):
            tok.add_tokens(new) if kind == "tokens" else tok.add_special_tokens(new)
            assert took_the_standalone_path(tok(texts[0])), (kind, new)
            assert answers(tok) == want, (kind, new)
            engine = transformers_patch._STATE[tok][1]
            assert engine is not None and engine._engine is first._engine, (kind, new)
        assert made == [1]
    finally:
        peek2.unpatch_transformers()


@pytest.mark.parametrize("model", ["llama3.1", "deepseek-v3"])
def test_post_processor_toggles_and_copies_write_no_json(data_dir: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> None:
    """A bug hunt (stop 70): ``add_eos_token`` or ``add_bos_token`` set at each batch, and each
    ``copy.copy`` of a tokenizer, made the next patched call write the backend's whole JSON to find
    its engine (0.3-3 s a call; unpatched under 1 ms). A new post-processor leaves the model as it
    was: the engine is made from the one before, and the states met before are kept by the backend."""
    folder = str(data_dir / "tokenizers" / model)
    texts = ["Hello world", ["a b", "<|im_start|>user\nhi<|im_end|>", ""]]
    states = [(True, False), (True, True), (False, True), (False, False), (True, False)]
    assert not transformers_patch.is_transformers_patched()
    reference = AutoTokenizer.from_pretrained(folder)
    expected = []
    for bos, eos in states:
        reference.add_bos_token, reference.add_eos_token = bos, eos
        expected.append([dict(reference(text)) for text in texts])
    assert expected[0] != expected[1] != expected[2] != expected[3]  # (the post-processors differ)
    written: list[int] = []
    real = transformers_patch._saved_form

    def counted(backend: Any) -> str:
        written.append(1)
        return real(backend)

    monkeypatch.setattr(transformers_patch, "_saved_form", counted)
    peek2.patch_transformers()
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        tok("warm up")
        for (bos, eos), want in zip(states, expected):
            tok.add_bos_token, tok.add_eos_token = bos, eos
            for other in (tok, copy.copy(tok)):
                got = [other(text) for text in texts]
                assert all(took_the_standalone_path(g) for g in got), (bos, eos)
                assert [dict(g) for g in got] == want, (bos, eos)
        assert written == [1]
    finally:
        peek2.unpatch_transformers()


def test_tokens_added_one_at_a_time_compile_no_search_until_a_text_needs_it(data_dir: Path) -> None:
    """A bug hunt (stop 70): each tokenizer made again after ``add_tokens`` compiled the patterns
    of all its added tokens' contents (six, in three searches), so a call after each addition
    cost time in proportion to the tokens added: 0.9-1.8 s each with 5,000 (unpatched 1.5 ms).
    The searches are compiled where a text needs them; a text without any token's first two
    characters needs none."""
    folder = str(data_dir / "tokenizers" / "llama3.1")
    assert not transformers_patch.is_transformers_patched()
    reference = AutoTokenizer.from_pretrained(folder)
    reference.add_tokens([f"<bulk{k}>" for k in range(2000)])
    texts = ["Hello world", "a <bulk7> b <more3><|eot_id|>", "<bulk1999><more0>"]
    expected = []
    for k in range(5):
        reference.add_tokens([f"<more{k}>"])
        expected.append([reference(text)["input_ids"] for text in texts])
    peek2.patch_transformers()
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        tok("warm up")
        tok.add_tokens([f"<bulk{k}>" for k in range(2000)])
        for k in range(5):
            tok.add_tokens([f"<more{k}>"])
            assert tok(texts[0])["input_ids"] == expected[k][0]
            engine = transformers_patch._STATE[tok][1]
            assert engine is not None
            assert not engine._raw_matcher._contents._ready and not engine._normalized_matcher._contents._ready
            assert [tok(text)["input_ids"] for text in texts] == expected[k]
    finally:
        peek2.unpatch_transformers()
