"""Incremental prompt encoding (peek2.serving.incremental) against the full encode.

Random prompt histories: appends, edits inside the tail, prompts that share a prefix with an
older one and then diverge, evictions. Checkpoints are made dense (every few characters) so that
short prompts exercise resuming from every kind of position: between CR and LF, inside special
tokens, digit groups, contractions and NFC runs.
"""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compliance.xnli import iter_xnli_tsv
from conftest import fuzz_examples
from peek2.serving import incremental
from peek2.serving.incremental import PromptSession, common_prefix
from peek2.tokenizer import Tokenizer
from test_streaming import build_text

MODELS = ["llama3.1", "qwen2"]


@pytest.fixture(scope="module", params=MODELS)
def tok(request: pytest.FixtureRequest, data_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(data_dir / "tokenizers" / request.param / "tokenizer.json")


@pytest.fixture()
def dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(incremental, "CHECKPOINT_CHARS", 7)
    monkeypatch.setattr(incremental, "TAIL_CHECKPOINTS", (1, 2, 3, 5, 11))


def edit(rng: random.Random, history: list[str]) -> str:
    """The next prompt of a random history."""
    last = history[-1]
    kind = rng.random()
    if kind < 0.45:  # append a turn
        return last + build_text(rng, 12)
    if kind < 0.75:  # edit inside the tail: replace a span of the last 40 characters
        start = rng.randint(max(0, len(last) - 40), len(last))
        stop = rng.randint(start, len(last))
        return last[:start] + build_text(rng, 4) + last[stop:]
    older = rng.choice(history)  # share a prefix of an older prompt, then diverge
    return older[: rng.randint(0, len(older))] + build_text(rng, 8)


seeds = st.integers(min_value=0, max_value=2**64 - 1)


@settings(max_examples=fuzz_examples(150), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=seeds)
def test_random_histories_give_the_ids_of_encode(tok: Tokenizer, dense: None, seed: int) -> None:
    rng = random.Random(seed)
    add, split = rng.random() < 0.5, rng.random() < 0.2
    cache = tok.prompt_cache(max_prompts=rng.randint(1, 4), add_special_tokens=add, split_special_tokens=split)
    history = [build_text(rng, 30)]
    for _ in range(12):
        prompt = history[-1] if rng.random() < 0.1 else edit(rng, history)
        history.append(prompt)
        assert cache.encode(prompt) == tok.encode(prompt, add, split_special_tokens=split), ascii(prompt)
        assert len(cache) <= cache.max_prompts


def test_whitespace_then_a_long_run(tok: Tokenizer) -> None:
    # The streaming case of test_streaming.py::test_whitespace_then_a_long_run_stays_exact, through
    # the prompt cache and a session (both encode with a streaming encoder's state).
    for head in (" \xa0", "\t\t", "x \xa0"):
        for tail in ("!" * 1100, "=>" * 600):
            text = "Hi." + head + tail
            cache = tok.prompt_cache()
            assert cache.encode(text) == tok.encode(text), ascii(head + tail[:4])
            assert cache.encode(text + " more") == tok.encode(text + " more"), ascii(head + tail[:4])
            session = tok.prompt_session()
            ids: list[int] = []
            for part in (text[:3], text[3:800], text[800:]):
                keep, new = session.append(part)
                ids = ids[:keep] + new
            assert ids == tok.encode(text), ascii(head + tail[:4])


def test_long_conversation_reuses_almost_everything(tok: Tokenizer, data_dir: Path) -> None:
    # A chat that grows turn by turn (real sentences, chat-template special tokens): each
    # prompt is encoded exactly, and only about the new turn is re-encoded.
    sentences = [row.premise for row, _ in zip(iter_xnli_tsv(data_dir / "xnli", ("test",)), range(3000))]
    start, stop = ("<|start_header_id|>", "<|eot_id|>") if tok.family == "llama3" else ("<|im_start|>", "<|im_end|>")
    cache = tok.prompt_cache(max_prompts=4)
    prompt = start + "system\n\nYou are helpful." + stop
    for turn in range(0, 3000, 300):
        prompt += start + "user\n\n" + " ".join(sentences[turn : turn + 300]) + stop + "\n"
        encoded_before = cache.encoded_chars
        assert cache.encode(prompt) == tok.encode(prompt)
        if turn:
            new_chars = len(start + "user\n\n" + " ".join(sentences[turn : turn + 300]) + stop + "\n")
            assert cache.encoded_chars - encoded_before <= new_chars + max(incremental.TAIL_CHECKPOINTS)
    assert cache.reused_chars > 0.8 * cache.encoded_chars


def test_lru_evicts_and_extension_replaces(tok: Tokenizer) -> None:
    cache = tok.prompt_cache(max_prompts=2)
    cache.encode("alpha beta")
    cache.encode("alpha beta gamma")  # extends the first: replaces it
    assert len(cache) == 1
    cache.encode("zeta")
    cache.encode("omega")
    assert len(cache) == 2
    assert cache.encode("alpha beta gamma delta") == tok.encode("alpha beta gamma delta")
    cache.clear()
    assert len(cache) == 0


def test_common_prefix() -> None:
    rng = random.Random(3)
    for _ in range(500):
        a = "".join(rng.choice("ab") for _ in range(rng.randint(0, 3000)))
        b = a[: rng.randint(0, len(a))] + "".join(rng.choice("abc") for _ in range(rng.randint(0, 40)))
        assert common_prefix(a, b) == common_prefix(b, a) == len(os.path.commonprefix([a, b]))


def test_bad_input(tok: Tokenizer) -> None:
    with pytest.raises(ValueError, match="^max_prompts must be an int >= 1, not 0$"):
        tok.prompt_cache(max_prompts=0)
    for wrong in (None, 1.5, True):  # (a wrong type was a ValueError; a bug hunt)
        with pytest.raises(TypeError, match=f"^max_prompts must be an int >= 1, not {type(wrong).__name__}$"):
            tok.prompt_cache(max_prompts=wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be str, not bytes"):
        tok.prompt_cache().encode(b"x")  # type: ignore[arg-type]


# ==== PromptSession: appends only ====


@settings(max_examples=fuzz_examples(150), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=seeds)
def test_session_appends_give_the_ids_of_encode(tok: Tokenizer, seed: int) -> None:
    """Random texts appended in random cuts (inside CR LF, special tokens, digit groups,
    contractions, NFC runs): after each append, previous[:keep] + new is encode(all so far)."""
    rng = random.Random(seed)
    add = rng.random() < 0.5
    session = tok.prompt_session(add_special_tokens=add)
    text, ids = "", []
    for _ in range(rng.randint(1, 12)):
        part = build_text(rng, rng.randint(0, 6))[: rng.randint(0, 30)]
        keep, new = session.append(part)
        text += part
        assert 0 <= keep <= len(ids)
        ids = ids[:keep] + new
        assert ids == tok.encode(text, add_special_tokens=add), (text, part)
        assert session.ids == ids
    assert session.text_chars == len(text)


@settings(max_examples=fuzz_examples(150), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=seeds)
def test_a_copied_session_is_a_branch(tok: Tokenizer, seed: int) -> None:
    """``copy.copy`` of a session (a conversation branched: two candidate replies): each is
    appended to on its own and gives the ids of its own text. (copy.copy shared the stream and
    the ids: an append to either changed both.)"""
    rng = random.Random(seed)
    add = rng.random() < 0.5
    session = tok.prompt_session(add_special_tokens=add)
    text = ""
    for _ in range(rng.randint(0, 5)):
        part = build_text(rng, rng.randint(0, 6))[: rng.randint(0, 30)]
        session.append(part)
        text += part
    branch = (copy.deepcopy if rng.random() < 0.5 else copy.copy)(session)
    texts = {id(session): text, id(branch): text}
    for _ in range(rng.randint(1, 8)):
        which = rng.choice([session, branch])
        before = which.ids
        part = build_text(rng, rng.randint(0, 6))[: rng.randint(0, 30)]
        keep, new = which.append(part)
        texts[id(which)] += part
        assert before[:keep] + new == which.ids == tok.encode(texts[id(which)], add_special_tokens=add)
    for which in (session, branch):
        assert which.ids == tok.encode(texts[id(which)], add_special_tokens=add)
        assert which.text_chars == len(texts[id(which)])


def test_a_copied_prompt_cache_keeps_its_prompts_apart(tok: Tokenizer) -> None:
    """A copy holds the same prompts and reuses them, and the two caches then change apart.
    (copy.copy shared the prompts and their lock; copy.deepcopy failed on the lock.)"""
    cache = tok.prompt_cache(max_prompts=2)
    prompt = "You are a helpful assistant. " * 40
    cache.encode(prompt)
    for make in (copy.copy, copy.deepcopy):
        other = make(cache)
        assert len(other) == len(cache) == 1
        reused = other.reused_chars
        assert other.encode(prompt + "Hi!") == tok.encode(prompt + "Hi!")  # takes over the copy's entry
        assert other.reused_chars > reused
        other.clear()
        assert len(cache) == 1 and len(other) == 0
        assert cache.encode(prompt) == tok.encode(prompt)


def test_session_re_encodes_only_the_pending_tail(tok: Tokenizer, data_dir: Path) -> None:
    """After a long prompt, appending a few characters keeps all but the last few ids: the work
    of an append does not grow with the prompt."""
    rows = list(iter_xnli_tsv(data_dir / "xnli", ("dev",)))[:2000]
    prompt = "\n".join(row.premise for row in rows)
    session = tok.prompt_session()
    keep, new = session.append(prompt)
    assert keep == 0 and new == tok.encode(prompt)
    ids = new
    for turn in (" And then", " what?", "\n\nUser: 12", "345 ok"):
        keep, new = session.append(turn)
        prompt += turn
        assert keep >= len(ids) - 10 and len(new) <= 20, (keep, len(ids), new)  # the last piece or so
        ids = ids[:keep] + new
        assert ids == tok.encode(prompt)


def test_session_bad_input(tok: Tokenizer) -> None:
    session = tok.prompt_session()
    with pytest.raises(TypeError, match="text must be str, not bytes"):
        session.append(b"abc")  # type: ignore[arg-type]
    assert isinstance(session, PromptSession) and session.ids == tok.encode("")


@pytest.mark.parametrize("model, make", [("llama3.1", lambda n: "\n" + " " * n), ("qwen3", lambda n: "e" + "\u0301\u0323" * (n // 2))])
def test_a_long_run_held_whole_keeps_one_copy(data_dir: Path, model: str, make: object) -> None:
    """A bug hunt: each checkpoint inside a run the stream holds whole (spaces after the last
    newline, NFC's marks) kept its own copy of the run so far: 1M spaces kept 19 MB, 4M 249 MB.
    What the cache keeps is now the text, its ids and checkpoints of short pending text."""
    import sys
    import tracemalloc

    tok = Tokenizer.from_file(data_dir / "tokenizers" / model / "tokenizer.json")
    text = make(1_000_000)  # type: ignore[operator]
    tracemalloc.start()
    try:
        cache = tok.prompt_cache()
        ids = cache.encode(text)
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert ids == tok.encode(text)
    assert kept < sys.getsizeof(ids) + (4 << 20), kept
