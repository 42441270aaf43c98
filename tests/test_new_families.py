"""Every capability on the families of issue 24 (o200k, tekken, deepseek-v3, starcoder2), against tokenizers.

Files: GPT-4o's (o200k) and DeepSeek-V3's as shipped; tekken as GPT-4o's file with its Split
pattern replaced by Mistral's Tekken pattern; starcoder2 as GPT-2's vocabulary with StarCoder2's
pre-tokenizer. (cl100k is tiktoken's: tests/test_tiktoken_encodings.py.) What users send: chat transcripts in each model's
own format, HTML and code, runs of one character, growing prompts; then streaming at random
cuts, incremental prompts, asyncio, the CLI, and linear time (n and 4n in one run).
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as Reference

import peek2
from conftest import fuzz_examples
from peek2.tokenizer import Tokenizer
from fuzzing import ATOMS

# family -> (the file it is read from, the Split pattern put in it or None, chat turn format)
FILES = {
    "o200k": ("gpt4o", None, "<|im_start|>{role}<|im_sep|>{text}<|im_end|>"),
    "tekken": ("gpt4o", "tekken", "[INST] {text} [/INST]{text}</s>"),
    "deepseek-v3": ("deepseek-v3", None, "<｜User｜>{text}<｜Assistant｜>{text}<｜end▁of▁sentence｜>"),
    # StarCoder2's and SmolLM's pipeline on GPT-2's vocabulary (no such file in shared/data).
    "starcoder2": ("gpt2", None, "<file_sep>{role}\n{text}<|endoftext|>"),
}
TEXTS = [
    "Hello World's ABC'S don'T McDonald's iPHONE ÉCOLE'S l'été HELLOworld",
    "<html><body><table><tr><td class=\"x\">1,234.5</td></tr></table>\n</body></html>",
    "def f(x):\n    return {'a': [1, 2, 3]}  # ok\r\n\t\tpass\n\n\n",
    "https://example.com/a/b?q=1\n//c\n/* x */ std::vector<std::pair<int,int>> v;",
    "日本語のテキスト、カタカナ・ひらがなー。中文文本123四五六 한국어 텍스트 العربية हिन्दी",
    "e\u0301\u0301A\u0301BC!x \u0301AB'S ʰʰA ǅungla \x00\x01abc \u200bx \ufeff",
    "  1 2  3   \n  \u3000 \xa0 end  \n ",
]
RUNS = ["=", "a", "A", "aB", "漢", "か", "7", " ", "\n", "'s", "\u0301", "!?", "\x00"]


def starcoder2_json(data_dir: Path) -> str:
    """GPT-2's vocabulary with StarCoder2's pre-tokenizer (Digits apart, then ByteLevel's regex),
    its special tokens added, and ByteLevel trimming the offsets."""
    from tokenizers import decoders, models, pre_tokenizers, processors

    folder = data_dir / "tokenizers" / "gpt2"
    reference = Reference(models.BPE.from_file(str(folder / "encoder.json"), str(folder / "vocab.bpe")))
    reference.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    reference.decoder = decoders.ByteLevel()
    reference.post_processor = processors.ByteLevel(trim_offsets=True)
    reference.add_special_tokens(["<|endoftext|>", "<fim_prefix>", "<file_sep>"])
    return str(reference.to_str())


def tokenizer_json(data_dir: Path, family: str) -> str:
    if family == "starcoder2":
        return starcoder2_json(data_dir)
    model, pattern, _ = FILES[family]
    data = json.loads((data_dir / "tokenizers" / model / "tokenizer.json").read_text("utf-8"))
    if pattern is not None:
        data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = peek2.PATTERNS[pattern]
    return json.dumps(data)


@pytest.fixture(scope="module", params=list(FILES))
def pair(request: pytest.FixtureRequest, data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    family = request.param
    path = tmp_path_factory.mktemp(family) / "tokenizer.json"
    path.write_text(tokenizer_json(data_dir, family), encoding="utf-8")
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    assert ours.family == family
    return family, ours, reference


def chat(family: str, rng: random.Random, turns: int) -> str:
    template = FILES[family][2]
    return "".join(
        template.format(role=("user", "assistant")[k % 2], text=rng.choice(TEXTS)) for k in range(turns)
    )


def assert_same(ours: Tokenizer, reference: Reference, text: str) -> None:
    for add in (True, False):
        expected = reference.encode(text, add_special_tokens=add)
        assert ours.encode(text, add) == expected.ids, (add, text[:60])
        assert ours.count(text, add) == len(expected.ids)
    expected = reference.encode(text, add_special_tokens=False)
    assert ours.encode_with_offsets(text, False).offsets == expected.offsets, text[:60]
    assert ours.decode(expected.ids, skip_special_tokens=False) == reference.decode(expected.ids, skip_special_tokens=False)


def test_what_users_send(pair: tuple) -> None:
    family, ours, reference = pair
    rng = random.Random(24)
    for text in [*TEXTS, chat(family, rng, 40), *(run * 3000 for run in RUNS)]:
        assert_same(ours, reference, text)
    batch = [rng.choice(TEXTS) for _ in range(50)]
    assert ours.encode_batch(batch) == [e.ids for e in reference.encode_batch(batch)]


POOL = ATOMS + TEXTS + ["'s", "'LL", "a'", "A'", "Ab'S", "\n/", "/\n", "1234", "漢か", "カ・ー", ".abc", "\u0301",
                        "<｜User｜>", "<｜Us", "<|EOT|>", "<|EO", "<｜tool▁sep｜>", "<｜end▁of▁sentence｜>", "<file_sep>"]  # fmt: skip
seeds = st.integers(min_value=0, max_value=2**64 - 1)


@settings(max_examples=fuzz_examples(300), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=seeds)
def test_streaming_random_cuts(pair: tuple, seed: int) -> None:
    _, ours, _ = pair
    rng = random.Random(seed)
    text = "".join(rng.choice(POOL) for _ in range(rng.randint(0, 16)))
    expected = ours.encode(text, False)
    data: str | bytes = text.encode("utf-8") if rng.random() < 0.5 else text
    points = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 10)))
    encoder = ours.stream_encoder()
    ids: list[int] = []
    for a, b in zip([0, *points], [*points, len(data)]):
        ids += encoder.feed(data[a:b])
    assert ids + encoder.finish() == expected, ascii(text)


def test_every_single_cut(pair: tuple) -> None:
    _, ours, _ = pair
    chats = [FILES[family][2].format(role="user", text="Hi 12") for family in FILES]  # each family's added tokens
    for text in ["McDonald's ABC'S it's\n/x", "漢字かな123四 ab", "aB'll \u0301A\u0301 .abc", "  \n\n  1  x", *chats]:
        expected = ours.encode(text, False)
        for k in range(len(text) + 1):
            encoder = ours.stream_encoder()
            assert encoder.feed(text[:k]) + encoder.feed(text[k:]) + encoder.finish() == expected, (text, k)


def test_prompt_session_and_async(pair: tuple) -> None:
    family, ours, reference = pair
    text = chat(family, random.Random(5), 12)
    session = ours.prompt_session()  # (DeepSeek-V3's normalized=true tokens included)
    for k in range(0, len(text), 37):
        session.append(text[k : k + 37])
    assert session.ids == reference.encode(text).ids
    assert asyncio.run(ours.async_encode(text)) == reference.encode(text).ids


def test_cli_encode(pair: tuple) -> None:
    family, ours, _ = pair
    done = subprocess.run(
        [sys.executable, "-m", "peek2", "encode", "--tokenizer", ours.spec.source, "--no-special", "--json"],
        input="Hello WORLD's 漢字 123", capture_output=True, text=True, check=True,
    )
    assert json.loads(done.stdout) == ours.encode("Hello WORLD's 漢字 123", False)


@pytest.mark.parametrize("run", ["aB", "漢か", "\u0301", " \n", "'s"])
def test_linear(pair: tuple, run: str) -> None:
    _, ours, _ = pair
    ours.encode(run * (200_000 // len(run)))  # (untimed: what a first long piece builds once, LongPieces' sorted vocabulary)
    costs = []
    for size in (50_000, 200_000):
        text = run * (size // len(run))
        start = time.process_time()
        ours.encode(text)
        costs.append((time.process_time() - start) / size)
    assert costs[1] < 3 * costs[0] + 1e-7, costs


def test_plugin_patch(pair: tuple) -> None:
    """tokenizers with Peek2 installed by ``peek2.patch``: the ids and offsets of the unpatched file."""
    family, _, reference = pair
    patched = peek2.patch(Reference.from_str(reference.to_str()))
    assert peek2.plugin.patched_family(patched) == family
    rng = random.Random(9)
    for text in [*TEXTS, chat(family, rng, 8), "x 1  2   3\n 4"]:
        expected, got = reference.encode(text), patched.encode(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), text[:60]
