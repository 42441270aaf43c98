"""Issue 23, item 3: a prompt session appending a long NFC run of combining marks of several classes.

With Qwen's NFC normalizer, ``"e" + "\\u0301\\u0323" * n`` normalizes to every U+0323 before every
U+0301, so each append changes the middle of the normalized run, and the stream holds it raw. A
session's ``finish`` normalized and merged the whole run again at every append (20K characters
in 1K appends: 0.16 s, 80K: 1.97 s). ``peek2.serving.marks_run`` keeps each class's marks and the
final prefix of their ids from one append to the next. These tests check the ids against
``tokenizers`` on random runs (several classes, composing starters, Hebrew and Arabic points,
marks that decompose, cut anywhere), that the kept path is the one taken where it applies and
that the others (a mark the reference's Unicode 9 does not know, a class-0 scalar that may
compose) still give the reference's ids.
"""

from __future__ import annotations

import copy
import random
import tracemalloc
from pathlib import Path

import pytest
import tokenizers
import unicodedata2

from peek2.serving import marks_run
from peek2.tokenizer import Tokenizer
from tests.scaling import growth
from tests.sessions import appended_in_parts, streamed_in_chunks

LATIN = [chr(cp) for cp in range(0x300, 0x370)]
OTHER = ["\u0e38", "\u0e39", "\u0e48", "\u0e49", "\u05b0", "\u05bc", "\u05b4", "\u064e", "\u0651", "\u0650", "\u0327", "\u0328", "\u031b", "\u0345", "\u0344", "\u0f73", "\u093c"]
STARTERS = ["e", "u", "a", "A", "ü", "é", "ε", "ω", "ב", "ع", "!", " ", "\n", "1", "x", ""]
HEADS = ["", "x", "Hi ", "\n", "1", "!", "<|im_start|>user\n", "ab "]
TAILS = ["", "x", " x", "\n", "!", "7", "<|im_end|>"]


@pytest.fixture(scope="module", params=["qwen2", "qwen3"])
def pair(request: pytest.FixtureRequest, data_dir: Path) -> tuple[Tokenizer, tokenizers.Tokenizer]:
    path = data_dir / "tokenizers" / request.param / "tokenizer.json"
    return Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))


def session_check(tok: Tokenizer, ref: tokenizers.Tokenizer, text: str, rng: random.Random) -> bool:
    """Appends ``text`` in random parts, checking the ids now and then; True if the kept path ran."""
    kept = appended_in_parts(tok, ref, text, rng)._encoder._stream.marks_run
    return kept is not None and kept.answered > 0


def test_no_composite_holds_as_many_marks_as_heads() -> None:
    """Fact 1: a composite absorbs fewer than HEADS marks (its decomposition is at most 4 scalars)."""
    longest = max(len(unicodedata2.normalize("NFD", chr(cp))) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    assert longest - 1 < marks_run.HEADS


def test_random_runs_of_marks_in_a_session(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    tok, ref = pair
    rng = random.Random(2323)
    kept = 0
    for _ in range(24):
        alphabet = rng.sample(LATIN + OTHER, rng.randint(1, 4))
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(3000, 7000)))
        kept += session_check(tok, ref, rng.choice(HEADS) + rng.choice(STARTERS) + run + rng.choice(TAILS), rng)
    assert kept >= 16  # most runs take the kept path (the rest: too short, or no stable start found)


@pytest.mark.parametrize(
    "text",
    [
        "u" + "\u0308\u0301\u0323" * 2000,  # the starter composes with the first two marks (U+01D8), then a dot below
        "e" + "\u0301\u0323" * 2000 + "\u0327" * 5 + "\u0301" * 500,  # a lower class appears late
        "\u0301\u0323" * 2500,  # no starter: nothing composes
        "!" * 3 + "\u05b0\u05bc" * 2000,  # Hebrew points after punctuation: one piece with it
        "\u1100" + "\u1161\u11a8" * 10 + "\u0301\u0323" * 2000,  # after jamo (the last one starts the run)
        "\u0e01" + "\u0e39\u0e49" * 2000,  # Thai: "\u0e39\u0e49" is a token, across the two classes
        "\u0e01" + "\u0e38\u0e48\u0e39\u0e49" * 1000 + "\u0e21",  # ... and "\u0e38\u0e48\u0e21"
        "e" + "\u0301\u0323" * 1000 + "\u0bbe" + "\u0301\u0323" * 2000,  # Tamil U+0BBE after a mark starts a run
    ],
    ids=["composing", "new-class", "no-starter", "hebrew", "jamo", "thai", "thai-2", "tamil"],
)
def test_the_kept_path(pair: tuple[Tokenizer, tokenizers.Tokenizer], text: str) -> None:
    tok, ref = pair
    assert session_check(tok, ref, text, random.Random(7))


def test_a_stream_finished_once_keeps_no_memo(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    """The memos serve a stream finished again after a restore (a prompt session's, a prompt
    cache's); a stream finished once (async_encode's) encodes the run as encode does: its memo
    had cost it 1.7x the time of encode (a bug hunt)."""
    tok, ref = pair
    text = "e" + "\u0301\u0323" * 3000
    encoder = tok.stream_encoder(add_special_tokens=False)
    ids = [token_id for start in range(0, len(text), 1000) for token_id in encoder.feed(text[start : start + 1000])]
    ids += encoder.finish()
    assert ids == ref.encode(text, add_special_tokens=False).ids
    assert encoder._stream.marks_run is None and encoder._stream.run_memo is None and encoder._stream.piece_memo is None


@pytest.mark.parametrize(
    ("text", "odd", "kept_before"),
    [
        ("e" + "\u0301\u0323" * 1000 + "\u1acf" + "\u0301" * 2000, "\u1acf", True),  # U+1ACF (Unicode 14): a starter to the reference
        ("\u0cbf\u0cd5" + "\u0301\u0323" * 1000 + "\u0cd5" + "\u0301" * 2000, "\u0cd5", False),  # U+0CD5 may join a composite
    ],
    ids=["late-mark", "class-0"],
)
def test_other_runs_are_encoded_whole(pair: tuple[Tokenizer, tokenizers.Tokenizer], text: str, odd: str, kept_before: bool) -> None:
    """A run that holds the scalar that breaks the form (``odd``) after its first character is
    never answered by the kept path, and the ids stay the reference's. (From 256 characters, a
    session's rule 3 threshold, the Latin marks before U+1ACF are a run the kept path answers; the
    Kannada run holds U+0CD5 from its start. U+1ACF ends the NFC run before it, and starts one that
    the kept path may answer.)"""
    tok, ref = pair
    rng = random.Random(8)
    at_odd = text.rindex(odd)
    session = tok.prompt_session(add_special_tokens=False)
    answered = 0
    at = 0
    while at < len(text):
        step = rng.randint(1, 1500)
        if at < at_odd < at + step:
            step = at_odd - at  # (the append before the scalar ends just before it)
        session.append(text[at : at + step])
        at += step
        run = session._encoder._stream.marks_run
        if run is not None and run.answered > answered:
            answered = run.answered
            assert odd not in run.raw[1:], f"the kept path answered a run holding {odd!a} ({at} characters)"
        if at == at_odd:
            assert (answered > 0) == kept_before
        if rng.random() < 0.3 or at >= len(text):
            assert session.ids == ref.encode(text[:at], add_special_tokens=False).ids, at


LONG_HEADS = [" " * 3000, "a" * 3000, "\u4e00\u4e8c" * 1500, "\n" + "    " * 750, "=" * 3000, "\u0e01\u0e34" * 1500]


@pytest.mark.parametrize("head", LONG_HEADS, ids=["spaces", "letters", "cjk", "indent", "equals", "thai"])
def test_a_run_of_marks_after_a_long_piece(pair: tuple[Tokenizer, tokenizers.Tokenizer], head: str) -> None:
    """A session cuts a long growing piece by rule 3, and the stream then holds the rest of that
    piece as a continuation of ids it sent (``cont``). A run of marks after it missed the kept path,
    which took only a pending text starting at a piece boundary, and was normalized and merged
    whole at every append: Qwen3, 3,000 spaces then ``"e" + "\u0301\u0323" * 80,000`` appended 100
    characters at a time, 31.5 s, 4x the marks 16x the time (tokenizers' one encode: 0.14 s). The
    kept path now merges that piece's rest from its bytes, as the stream does."""
    tok, ref = pair
    rng = random.Random(len(head))
    for marks in ("\u0301\u0323", "\u0301", "\u0e39\u0e49"):
        for starter in ("e", " ", ""):
            assert session_check(tok, ref, "x" + head + starter + marks * 2500 + " x", rng), (ascii(head[:4]), ascii(marks), ascii(starter))

    def session(text: str) -> list[int]:
        prompt = tok.prompt_session(add_special_tokens=False)
        for at in range(0, len(text), 100):
            prompt.append(text[at : at + 100])
        return prompt.ids

    def zalgo(n: int) -> str:
        return "x" + head + "e" + "\u0301\u0323" * (n // 2)

    assert session(zalgo(8_000)) == ref.encode(zalgo(8_000), add_special_tokens=False).ids
    assert growth(zalgo, session, 8_000) < 6


def test_stream_fed_one_mark_at_a_time_is_linear(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    """The stream holds the run raw until it ends, and searched all of it for added tokens at every
    feed: 320K marks fed one by one took 3.3 s (7.8 s when the issue was filed), 4x the marks 7.6x
    the time. Now only what follows the text already searched is."""
    tok, ref = pair

    def streamed(text: str) -> list[int]:
        encoder = tok.stream_encoder()
        ids: list[int] = []
        for char in text:
            encoder.feed(char, ids)
        return encoder.finish(ids)

    def zalgo(marks: int) -> str:
        return "e" + "\u0301\u0323" * (marks // 2)

    assert streamed(zalgo(20_000) + "<|im_end|>x") == ref.encode(zalgo(20_000) + "<|im_end|>x", add_special_tokens=False).ids
    assert growth(zalgo, streamed, 20_000) < 6


def test_a_session_answers_a_run_of_one_class_with_what_changed(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    """Issue 23, item 2: a session's answers to ``"e" + "\\u0301" * n`` appended 100 characters at a
    time held the ids of the whole run at every append (``new`` of 8,000 marks: 331,920 ids in all;
    of 32,000: 5,167,680, 15.6x for 4x the marks), since the stream's finish said nothing of which
    of its first ids the last finish gave too. The run's answers now keep the ids of the pieces
    before the marks and the run's final prefix: 86,340 and 348,780 ids (4.04x)."""
    tok, ref = pair

    def sent(marks: int) -> int:
        text = "e" + "\u0301" * marks + " x"
        session = tok.prompt_session()
        ids: list[int] = []
        count = 0
        for at in range(0, len(text), 100):
            keep, new = session.append(text[at : at + 100])
            del ids[keep:]
            ids += new
            count += len(new)
        assert ids == session.ids == ref.encode(text, add_special_tokens=False).ids
        assert session._encoder._stream.marks_run.answered > 0  # (the kept path)
        return count

    assert sent(32_000) <= 5 * sent(8_000)


def test_a_session_grows_its_answer_to_a_run_in_place(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    """Each answer of a session to a long run of marks of one class was a new list of the whole
    run's ids, and the last one was freed: copies quadratic in the appends (``"e" + "\u0301" *
    256_000`` appended 100 characters at a time, two thirds of the session's 0.79 s; tokenizers
    encodes the whole text in 0.21 s). The answer is now the session's last one, grown in place
    from the ids both share. Checked here with the hazards of sharing: a branch taken in the middle
    of the run (``copy.copy``) and appended to in turn with the original, each going its own way,
    every answer applied to a copy of the ids as a caller does."""
    tok, ref = pair
    head = "Hi e" + "\u0301" * 6_000
    rest = {"original": "\u0301" * 6_000 + " x", "branch": "\u0301" * 3_000 + "\u0323" * 40 + "\u0301" * 500 + "!"}
    session = tok.prompt_session()
    ids: list[int] = []
    tails: set[int] = set()
    for at in range(0, len(head), 100):
        keep, new = session.append(head[at : at + 100])
        del ids[keep:]
        ids += new
        if at >= 3_000:
            tails.add(id(session._tail))
    assert len(tails) == 1  # (one list for the whole run: before, one per append)
    sessions = {"original": (session, ids), "branch": (copy.copy(session), list(ids))}
    for at in range(0, max(map(len, rest.values())), 100):
        for name, (each, got) in sessions.items():
            part = rest[name][at : at + 100]
            if part:
                keep, new = each.append(part)
                del got[keep:]
                got += new
    for name, (each, got) in sessions.items():
        expected = ref.encode(head + rest[name], add_special_tokens=False).ids
        assert got == each.ids == expected, name
    assert session._encoder._stream.marks_run.answered > 0  # (the kept path)


def test_an_append_to_a_long_run_allocates_what_it_adds_not_the_run(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    """The memory an append of 100 marks allocates, in the middle of a run of 100,000 marks of
    one class (a string of 200 KB): each append copied the run's strings (the stream's raw text,
    which the run's memo held too, each class's marks, the run's part) and its ids, 390 KB an
    append at 200,000 marks and quadratic time in all (the session 0.79 s of CPU at 256K marks,
    where tokenizers encodes the whole text in 0.21 s; now 0.17 s). The memo keeps its own copy of
    the raw run, grown in place, and a run of one class keeps only the rest of its part that is
    not final. A deterministic measure of the work (``tracemalloc``), where a timing would be noisy."""
    tok, ref = pair
    marks = 100_000
    text = "e" + "\u0301" * (marks - 1)  # (marks characters in all)
    session = tok.prompt_session()
    for at in range(0, marks - 1_000, 100):
        session.append(text[at : at + 100])
    peaks = []
    tracemalloc.start()
    try:
        for at in range(marks - 1_000, marks, 100):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            session.append(text[at : at + 100])
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()
    assert max(peaks[2:]) < 64 * 1024, peaks  # (the first ones: tracing starts on blocks made before)
    assert session.ids == ref.encode(text, add_special_tokens=False).ids


# Scalars that compose with the one before them (Hangul vowel and trailing jamo, class-0 second
# halves of Indic compositions), their first halves, syllables, marks and plain text.
JOINING = [
    "\u1100", "\u1112", "\u1161", "\u1175", "\u11a8", "\u11c2", "\uac00", "\uac01", "\ud7a3", "\u0301",
    "\u0bc6", "\u0bbe", "\u0bd7", "\u09c7", "\u09be", "\u09d7", "\u0cbf", "\u0cd5", "\u0cc6", "\u0cc2",
    "\u0d46", "\u0d3e", "\u0dd9", "\u0dcf", "\u0dca", "\u0b47", "\u0b3e", "\u0b56", "\u0b57", "\u1025",
    "\u102e", "\u1b05", "\u1b35", "a", " ", "\n", "!",
    "\u212b", "\u01d5", "\u1e17", "\u0390", "\u0ccb", "\u0cca", "\u0958",  # decompositions that start with a starter
]


def test_stream_cuts_nfc_runs_where_the_scalar_before_allows(pair: tuple[Tokenizer, tokenizers.Tokenizer]) -> None:
    """A vowel jamo after a trailing jamo (or any scalar but a leading jamo), a class-0 second half
    after a scalar it does not compose with, and a scalar whose full decomposition starts with a
    starter that joins nothing (U+212B ANGSTROM SIGN, U+01D5) start a new NFC run. Alternating
    jamo, or U+212B repeated, were held raw whole, and a prompt session fed them re-encoded the run
    at every append (80K characters in 1K appends: 2.5 s and 0.29 s, against 0.07 and 0.05 s for
    one encode by tokenizers). Random runs of such scalars, streamed in random chunks, against
    tokenizers; then the session's cost at n and 4n."""
    tok, ref = pair
    rng = random.Random(2324)
    for _ in range(300):
        text = "".join(rng.choice(JOINING) for _ in range(rng.randint(1, 60)))
        assert streamed_in_chunks(tok, text, rng, 4) == ref.encode(text, add_special_tokens=False).ids, ascii(text)

    def jamo(n: int) -> str:
        return "\u1100" + "\u1161\u11a8" * (n // 2)

    def angstroms(n: int) -> str:  # U+212B was held as if it could join what precedes it
        return "\u212b" * n

    def session(text: str) -> list[int]:
        prompt = tok.prompt_session(add_special_tokens=False)
        for at in range(0, len(text), 1000):
            prompt.append(text[at : at + 1000])
        return prompt.ids

    assert session(jamo(20_000)) == ref.encode(jamo(20_000), add_special_tokens=False).ids
    assert growth(jamo, session, 20_000) < 6
    assert session(angstroms(20_000)) == ref.encode(angstroms(20_000), add_special_tokens=False).ids
    assert growth(angstroms, session, 20_000) < 6

    # A class-0 second half after another (a bug hunt: "x" + U+0BBE * 80K in 100-character appends
    # took 3.4 s, "\u0bc6" + U+0BD7 * 80K 22.9 s): the cut is safe when neither it nor a composite
    # NFC makes of it joins the next. Runs of them and of their first halves, against tokenizers.
    seconds = ["\u0bbe", "\u0bd7", "\u09be", "\u09d7", "\u0b3e", "\u0b56", "\u0b57", "\u0cd5", "\u0cc2", "\u0d3e", "\u0d57", "\u0dcf", "\u102e"]
    firsts = ["\u0bc6", "\u0bc7", "\u0bd2", "\u09c7", "\u0b47", "\u0cc6", "\u0cca", "\u0cbf", "\u0d46", "\u0dd9", "\u1025", "x"]
    for _ in range(300):
        text = "".join(rng.choice(seconds if rng.random() < 0.7 else firsts) for _ in range(rng.randint(2, 80)))
        assert streamed_in_chunks(tok, text, rng, 4) == ref.encode(text, add_special_tokens=False).ids, ascii(text)

    def tamil_aa(n: int) -> str:
        return "x" + "\u0bbe" * n

    def tamil_au(n: int) -> str:
        return "\u0bc6" + "\u0bd7" * n

    for make in (tamil_aa, tamil_au):
        assert session(make(20_000)) == ref.encode(make(20_000), add_special_tokens=False).ids
        assert growth(make, session, 20_000) < 6
