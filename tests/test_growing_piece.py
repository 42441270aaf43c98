"""Issue 23, items 2 and 4: a piece that keeps growing sends its final ids and stays bounded.

A stream or a prompt session fed one long run (spaces, "=", CJK without punctuation, combining
marks) held the whole run until it ended and re-encoded it at every append. Rule 3 of
``peek2.serving.streaming`` (``peek2.bpe.growing_piece``) sends the ids of a prefix that no continuation can
change. These tests check the ids against ``tokenizers`` for runs of every kind, in the four
families, cut every way and followed by every kind of text; that the pending text stays bounded;
and that a session's cost grows linearly (CPU time at n and 4n in one run, no wall-clock limit).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import tokenizers

from conftest import run_threads_switching_often
from peek2.bpe.merger import LONG_PIECE_BYTES
from peek2.pretokenize.scanner import category, piece_end
from peek2.serving import streaming
from peek2.serving.stream_engine import _end_before, _short_run
from peek2.tokenizer import Tokenizer
from tests.scaling import paired_ratio
from compliance.reference import reference_and_peek2
from tests.sessions import appended_in_parts, long_piece

MODELS = ["llama3.1", "qwen3", "gpt4o", "deepseek-v3"]
RUNS = {
    "spaces": " ",
    "equals": "=",
    "newlines": "\n",
    "tabs": "\t",
    "dashes": "-",
    "alternating": "=-",
    "arrows": "=>",
    "no-break spaces": "\xa0",
    "CJK": "你好世界中文字符测试我们",
    "kana": "ひらがなカタカナ",
    "marks": "\u0301\u0323",
    "cyrillic": "приветмир",
    "upper": "ABCDEFG",
    "thai": "สวัสดีครับ",
    "emoji": "😀🎉",
    "space-newline": " \n",  # a whitespace run whose \s*[\r\n]+ piece grows (StreamEngine._newline_cut)
    "mixed whitespace": "\t \n\xa0",
    "slash-newline": "/\n",  # o200k's [\r\n/]* after punctuation: two categories, one growing piece
}
HEADS = ["", "x", "Hi ", "\n", "1", "!"]
TAILS = ["", " x", "x", "\n", "!", "7", " \n", "'s", "<|eot|>", "/x", "/!!"]


@pytest.fixture(scope="module", params=MODELS)
def pair(
    request: pytest.FixtureRequest, data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Tokenizer, tokenizers.Tokenizer]:
    path = data_dir / "tokenizers" / request.param / "tokenizer.json"
    if request.param == "deepseek-v3":
        # The stream refuses DeepSeek-V3's added tokens matched after normalization (issue 24);
        # its scanner shape is what is tested here, so the copy matches them before.
        spec = json.loads(path.read_text(encoding="utf-8"))
        for token in spec["added_tokens"]:
            token["normalized"] = False
        path = tmp_path_factory.mktemp("deepseek") / "tokenizer.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
    return request.param, Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))


def stream(tok: Tokenizer, chunks: list[str]) -> tuple[list[int], int, int]:
    """The ids of streaming ``chunks``, the largest pending text, and the ids sent before finish."""
    encoder = tok.stream_encoder()
    ids: list[int] = []
    longest = 0
    for chunk in chunks:
        encoder.feed(chunk, ids)
        longest = max(longest, encoder.pending_chars)
    early = len(ids)
    encoder.finish(ids)
    return ids, longest, early


def cuts(rng: random.Random, text: str) -> list[str]:
    """``text`` in chunks of random sizes, from single characters to thousands."""
    chunks = []
    at = 0
    while at < len(text):
        size = rng.choice([1, 2, 3, 7, 64, 500, 3000])
        chunks.append(text[at : at + size])
        at += size
    return chunks


def test_long_runs_stream_to_the_ids_of_tokenizers(pair: tuple[str, Tokenizer, tokenizers.Tokenizer]) -> None:
    """Every kind of run, long enough for several rule-3 cuts, after and before every kind of text."""
    name, tok, ref = pair
    rng = random.Random(name)
    limit = tok.stream_encoder()._stream.plan.interior_min
    for kind, unit in RUNS.items():
        for _ in range(3):
            run = unit * (rng.randint(3 * limit, 5 * limit) // len(unit)) + unit[: rng.randint(0, len(unit))]
            text = rng.choice(HEADS) + run + rng.choice(TAILS)
            expected = ref.encode(text, add_special_tokens=False).ids
            assert tok.encode(text, False) == expected, (kind, ascii(text[:20]))
            ids, longest, early = stream(tok, cuts(rng, text))
            assert ids == expected, (name, kind, ascii(text[:10]), ascii(text[-10:]))


def test_newlines_after_punctuation_then_whitespace_and_a_newline(pair: tuple[str, Tokenizer, tokenizers.Tokenizer]) -> None:
    """A bug hunt found it with DeepSeek-V3: "!" + "\\r\\n" * 1500 + " \\n", streamed in 500-character
    chunks or appended to a session, gave other ids than one encode. Read from a cut in the
    newlines of the punctuation piece, the scanner is in ``\\s*[\\r\\n]+``, which goes on over the
    " \\n" after the run where the piece's ``[\\r\\n]*`` stops, and probes of one character after
    the run could not tell. Every run of newlines after punctuation, before whitespace and a
    newline, in chunks of 500 and of random sizes, and appended to a session."""
    name, tok, ref = pair
    rng = random.Random(1025)
    for head in ["!", "?!", " )"]:
        for unit in ["\r\n", "\n", "\r", "\n\r\n"]:
            for tail in [" \n", "\t\n", " \r\n", "  \t\n", " \n\n", "\xa0\n", " \nx", " \n !"]:
                text = head + unit * (1600 // len(unit) * 2) + tail
                expected = ref.encode(text, add_special_tokens=False).ids
                chunked = [text[at : at + 500] for at in range(0, len(text), 500)]
                assert stream(tok, chunked)[0] == expected, (name, ascii(head), ascii(unit), ascii(tail))
                assert stream(tok, cuts(rng, text))[0] == expected, (name, ascii(head), ascii(unit), ascii(tail))
                appended_in_parts(tok, ref, text, rng)


@pytest.mark.parametrize("kind", ["spaces", "equals", "newlines", "CJK", "alternating", "cyrillic", "space-newline"])
def test_pending_text_of_a_run_stays_bounded(pair: tuple[str, Tokenizer, tokenizers.Tokenizer], kind: str) -> None:
    """Item 4: the stream sends ids while the run goes on, and holds at most rule 3's threshold
    plus a chunk (it held the whole run: 2.7 GB for 50 MB of "=")."""
    name, tok, _ = pair
    unit = RUNS[kind]
    limit = tok.stream_encoder()._stream.plan.interior_min
    text = "Hi " + unit * (40 * limit // len(unit)) + " done"
    chunks = [text[k : k + 100] for k in range(0, len(text), 100)]
    ids, longest, early = stream(tok, chunks)
    assert ids == tok.encode(text, False)
    assert longest <= limit + 100 + 2 * len(unit), f"{name} {kind}: {longest} characters pending"
    assert early >= 0.9 * len(ids)


@pytest.mark.parametrize("kind", ["equals", "CJK", "cyrillic", "alternating"])
@pytest.mark.parametrize("whitespace", [" ", "\t \xa0", "\n  "], ids=["spaces", "mixed", "newline-spaces"])
def test_pending_text_of_a_run_after_a_long_whitespace_run_stays_bounded(
    pair: tuple[str, Tokenizer, tokenizers.Tokenizer], kind: str, whitespace: str
) -> None:
    """Rule 2 took no piece end between two whitespace characters, since such an end moves while
    the run grows; but it is final once something else follows the run. After 3,000 spaces, a run
    of "=" or CJK stayed pending whole behind the last piece end rule 2 would take (the stream's
    memory bound broken; a session merged it at every append: 14-18x the time for 4x the run)."""
    name, tok, ref = pair
    unit = RUNS[kind]
    limit = tok.stream_encoder()._stream.plan.interior_min
    text = "x" + (whitespace * 3000)[:3000] + unit * (40 * limit // len(unit)) + " done"
    chunks = [text[k : k + 100] for k in range(0, len(text), 100)]
    ids, longest, early = stream(tok, chunks)
    assert ids == tok.encode(text, False) == ref.encode(text, add_special_tokens=False).ids
    # (rule 3's threshold plus a chunk, and rule 2 waiting for a doubling: the whitespace run itself)
    assert longest <= 2 * limit, f"{name} {kind}: {longest} characters pending"
    assert early >= 0.9 * len(ids)
    if kind == "equals" and whitespace == " ":
        session = tok.prompt_session(add_special_tokens=False)
        for chunk in chunks:
            session.append(chunk)
        assert session.ids == ids
        assert session._encoder.pending_chars < 3 * limit


@pytest.mark.parametrize(("first", "then"), [("\t ", "\n    "), ("\t ", " \n"), (" \t\xa0", "\n\n  ")])
def test_newlines_after_a_whitespace_run_cut_behind_a_head(pair: tuple[str, Tokenizer, tokenizers.Tokenizer], first: str, then: str) -> None:
    """Rule 3 cuts a run of whitespace of several kinds as a piece of several categories, keeping
    a scalar in front of the rest for the scanner (``_loop_cut``'s head). The newline rule then
    refused to cut the run's \\s*[\\r\\n]+ piece while that head was kept, and the stream held every
    newline that followed: "\\t " * 1500 then "\\n    " repeated, 20,003 -> 80,003 characters
    pending for 4x the run (a bug hunt)."""
    name, tok, ref = pair
    limit = tok.stream_encoder()._stream.plan.interior_min
    text = "x" + first * (3000 // len(first)) + then * (40 * limit // len(then)) + "x"
    ids, longest, early = stream(tok, [text[k : k + 100] for k in range(0, len(text), 100)])
    assert ids == ref.encode(text, add_special_tokens=False).ids
    assert longest <= 2 * limit, f"{name}: {longest} characters pending"
    assert early >= 0.9 * len(ids)


SEVERAL_CATEGORIES = [
    ("gpt4o", "a\u0301"),  # o200k: letters and marks in turn (Y+)
    ("gpt4o", "\u0e01\u0e34\u0e19"),  # Thai without spaces (X*)
    ("gpt4o", "AB\u0301\u0327"),  # capitals and marks (X*)
    ("gpt4o", "!\u0301"),  # punctuation and marks
    ("gpt4o", " \t"),
    ("gpt4o", "A\u0301"),  # capitals and marks in turn: a cut after a mark, never after a capital
    ("gpt4o", "HELLO\u4e16\u754c"),  # capitals, then caseless letters
    ("gpt4o", "A\u02b0"),
    ("deepseek-v3", "\u00e9e"),  # Latin letters of two kinds
    ("deepseek-v3", "\u30a2\u3099"),  # kana and its mark (the CJK split)
    ("deepseek-v3", "!\u3002"),
    ("llama3.1", "!'"),
    ("qwen3", " \t\xa0"),
    ("gpt2", " \t"),
    ("gpt2", " \n\t"),
    ("gpt2", "!'"),
]


@pytest.mark.parametrize(("name", "unit"), SEVERAL_CATEGORIES, ids=[f"{name}-{ascii(unit)}" for name, unit in SEVERAL_CATEGORIES])
def test_pending_text_of_a_piece_of_several_categories_stays_bounded(data_dir: Path, name: str, unit: str) -> None:
    """Issue 23, item 4: a growing piece of several scanner categories was held whole until it
    ended (restarted inside it, the scanner may end it elsewhere). Rule 3 now cuts it too, the
    rest kept behind the scanner's ``resume_context`` (tests/test_resume_context.py): the ids
    come while it grows, the pending text stays under rule 3's threshold plus a chunk, and the
    ids equal tokenizers', streamed in chunks of every size and followed by every kind of text."""
    folder = data_dir / "tokenizers" / name
    ref, tok = reference_and_peek2(str(folder / ("encoder.json" if name == "gpt2" else "tokenizer.json")))
    limit = tok.stream_encoder()._stream.plan.interior_min
    text = "Hi " + unit * (40 * limit // len(unit)) + " done"
    for size in (100, 500, 333):  # (where the chunks end decides which boundary a cut finds)
        ids, longest, early = stream(tok, [text[k : k + size] for k in range(0, len(text), size)])
        assert ids == ref.encode(text, add_special_tokens=False).ids
        assert longest <= limit + size + 2 * len(unit), f"{name} {unit!r} in chunks of {size}: {longest} characters pending"
        assert early >= 0.9 * len(ids)
    rng = random.Random(unit)
    for tail in ["", " x", "x", "A", "a", "'s", "!", "\n", "7", "\u0301", "\u4e00", "  y"]:
        text = rng.choice(["", "x", "Hi ", "!"]) + "".join(rng.choice(unit) for _ in range(rng.randint(3000, 6000))) + tail
        assert stream(tok, cuts(rng, text))[0] == ref.encode(text, add_special_tokens=False).ids, (name, ascii(unit), ascii(tail))


def test_stream_of_megabytes_of_one_character(data_dir: Path) -> None:
    """Item 4: 4 MB of "=" in 1 MB chunks: the ids come chunk by chunk, the pending text stays
    small, and the ids equal encode's."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")
    encoder = tok.stream_encoder()
    ids: list[int] = []
    for _ in range(4):
        sent = len(ids)
        encoder.feed("=" * 1_000_000, ids)
        assert len(ids) > sent
        assert encoder.pending_chars <= encoder._stream.plan.interior_min
    encoder.feed(" end", ids)
    encoder.finish(ids)
    assert ids == tok.encode("=" * 4_000_000 + " end", False)


def session_ids(tok: Tokenizer, parts: list[str]) -> list[int]:
    session = tok.prompt_session(add_special_tokens=False)
    ids: list[int] = []
    for part in parts:
        keep, new = session.append(part)
        del ids[keep:]
        ids += new
    return ids


@pytest.mark.parametrize("unit", [" ", "\n", "=", "你好世界", "\u0301\u0323"], ids=["spaces", "newlines", "equals", "CJK", "marks"])
def test_session_growing_one_piece_is_linear(data_dir: Path, unit: str) -> None:
    """Item 2: appending 1,000 characters of one run 152 times took 17x the time of 38 times (the
    pending piece re-encoded at every append); now 4x the appends cost about 4x."""
    for name in ("llama3.1", "qwen3"):
        tok = Tokenizer.from_file(data_dir / "tokenizers" / name / "tokenizer.json")
        part = (unit * 1000)[:1000]
        assert session_ids(tok, ["x"] + [part] * 40 + ["!"]) == tok.encode("x" + part * 40 + "!", False)
        if name == "qwen3" and unit == "\u0301\u0323":
            # NFC puts every U+0323 before every U+0301, so each append changes the middle of the
            # run's ids: every answer's ``new`` holds the ids of the whole run (no ``(keep, new)``
            # can be shorter), and copying them grows with the square of the appends, at a few ns
            # an id. What must not come back is normalizing and merging the whole run at every
            # append (peek2.serving.marks_run): the session costs less than 4 encodes of the whole
            # text by tokenizers, measured in this run (1.7-2.4x; 46x at 80K characters before).
            ref = tokenizers.Tokenizer.from_file(str(data_dir / "tokenizers" / name / "tokenizer.json"))
            ratio = paired_ratio(lambda: ref.encode(part * 152, add_special_tokens=False), lambda: session_ids(tok, [part] * 152))
            assert ratio < 4, f"{name} {unit!r}: the session took {ratio:.1f}x one encode by tokenizers"
            continue
        ratio = paired_ratio(lambda: session_ids(tok, [part] * 38), lambda: session_ids(tok, [part] * 152))
        assert ratio < 6, f"{name} {unit!r}: 4x the appends took {ratio:.1f}x the time"


@pytest.mark.parametrize(("name", "unit"), [("gpt4o", "a\u0301"), ("gpt4o", "\u0e01\u0e34\u0e19"), ("deepseek-v3", "\u00e9e")], ids=["o200k-marks", "o200k-thai", "deepseek-latin"])
def test_session_growing_a_piece_of_several_categories_is_linear(data_dir: Path, name: str, unit: str) -> None:
    """Issue 23, what a stream holds whole: one piece of several scanner categories (o200k's
    letters and marks in turn, Thai without spaces, DeepSeek-V3's Latin letters of two kinds)
    stays pending, and a session's finish merged all of it again at every append: 4x the appends
    took 16x the time (100K characters in 100-character appends: 3.4-4.6 s, tokenizers' one encode
    0.04 s). finish() then kept a final prefix of the piece (``StreamEngine._finish_piece``), its
    claims checked on every later text, and now the stream cuts such a piece as it grows. Random such pieces with characters that end or change them
    now and then, in random parts, against tokenizers; then the cost against tokenizers'."""
    path = data_dir / "tokenizers" / name / "tokenizer.json"
    tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    rng = random.Random(2711)
    for _ in range(12):
        appended_in_parts(tok, ref, rng.choice(["", "x ", "Hi\n"]) + long_piece(rng, rng.randint(3000, 7000)) + rng.choice(["", " x", "!"]), rng)
    part = (unit * 1000)[:1000]
    for parts in (["x"] + [part] * 6 + ["!"], [part] * 4 + [" y"] + [part] * 4, [part] * 3 + ["'s"] + [part] * 3 + ["A"] + [part] * 3):
        session = tok.prompt_session(add_special_tokens=False)
        text = ""
        for k, piece in enumerate(parts):
            session.append(piece)
            text += piece
            assert session.ids == ref.encode(text, add_special_tokens=False).ids, (name, k)
        assert session_ids(tok, parts) == ref.encode(text, add_special_tokens=False).ids, name  # (keep, new) too
    # What must not come back is merging the whole piece at every append: the session costs less
    # than 4 encodes of the whole text by tokenizers, measured in this run (12-24x before; 0.5-0.9x
    # since rule 3 cuts such pieces too). And 4x the appends cost about 4x: the finish's list of
    # the piece's ids and the scanner reading it from its start grew with the square of the appends
    # until the stream could cut inside the piece (``StreamEngine._loop_cut``).
    ratio = paired_ratio(lambda: ref.encode("x" + part * 152, add_special_tokens=False), lambda: session_ids(tok, ["x"] + [part] * 152))
    assert ratio < 4, f"{name} {unit!r}: the session took {ratio:.1f}x one encode by tokenizers"
    small = (unit * 300)[:300]
    ratio = paired_ratio(lambda: session_ids(tok, ["x"] + [small] * 300), lambda: session_ids(tok, ["x"] + [small] * 1200))
    assert ratio < 6, f"{name} {unit!r}: 4x the appends took {ratio:.1f}x the time"


@pytest.mark.parametrize("name", ["llama3.1", "qwen3"])
def test_a_failed_memo_is_tried_again_soon(data_dir: Path, name: str) -> None:
    """A finish's memo that found no final prefix waited for the text to double: "\\n" then spaces
    appended one at a time, the first try (at 2,048 characters) found none, and every append up
    to 4,096 merged the whole run, 100-170 us each, where the memo answers in 5. It is now tried
    again when the text has grown by an eighth (``peek2.bpe.growing_piece.retry_after``)."""
    path = data_dir / "tokenizers" / name / "tokenizer.json"
    tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    session = tok.prompt_session(add_special_tokens=False)
    session.append("\n")
    for _ in range(2800):
        session.append(" ")
    assert session.ids == ref.encode("\n" + " " * 2800, add_special_tokens=False).ids
    assert session._encoder._stream.run_memo is not None


@pytest.mark.parametrize("name", ["llama3.1", "qwen3", "gpt4o"])
def test_session_of_a_newline_then_growing_spaces_is_linear(data_dir: Path, name: str) -> None:
    """Issue 23, item 2's last case: "\n" then a growing run of spaces stays pending (a later newline
    makes it all one piece), and each append re-encoded the run: 4x the appends took 16x the time.
    finish() now reuses the run's final prefix (``StreamEngine._finish_run``)."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / name / "tokenizer.json")
    spaces = " " * 1000
    for parts in (
        ["x\n"] + [spaces] * 12 + ["!"],
        ["x\n"] + [spaces] * 6 + ["\n"] + [spaces] * 6 + ["y"],  # a newline joins all of it into one piece
        ["\n"] + [spaces] * 5 + [" " * 7] * 300 + ["\t", spaces, spaces + "z"],
        ["\t\n"] + ["=" * 1000] * 8 + [spaces] * 8 + ["\n\n", spaces * 3],
    ):
        session = tok.prompt_session(add_special_tokens=False)
        text = ""
        for k, part in enumerate(parts):
            session.append(part)
            text += part
            if k % 3 == 0 or k == len(parts) - 1:
                assert session.ids == tok.encode(text, False), (name, k, ascii(part[:10]))
    ratio = paired_ratio(lambda: session_ids(tok, ["\n"] + [spaces] * 38), lambda: session_ids(tok, ["\n"] + [spaces] * 152))
    assert ratio < 6, f"{name}: 4x the appends took {ratio:.1f}x the time"



@pytest.mark.parametrize("name", ["llama3.1", "qwen3", "gpt4o"])
def test_session_of_a_held_run_fed_a_character_at_a_time_is_linear_below_rule_three(data_dir: Path, name: str) -> None:
    """The run above, appended one character at a time and shorter than rule 3's first threshold
    (16 of the longest token's bytes, 2,048 characters): a session's answer merged the whole
    pending run at every append, as its memo paths started at that threshold (Llama-3.1, 500 then
    2,000 characters: 16.8x the time, 45 us an append at the end). They start at the threshold a
    session's stream cuts at (``INTERIOR_MIN_TOKENS_FINISHED_AGAIN``)."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / name / "tokenizer.json")
    for head, size in (("\n", 2000), ("x\n", 700), ("\n\n", 300)):
        text = head + " " * size
        assert session_ids(tok, list(text)) == tok.encode(text, False), (name, ascii(head), size)
        assert session_ids(tok, list(text) + ["\n", "y"]) == tok.encode(text + "\ny", False), (name, ascii(head), size)
    ratio = paired_ratio(lambda: session_ids(tok, list("\n" + " " * 500)), lambda: session_ids(tok, list("\n" + " " * 2000)))
    assert ratio < 7, f"{name}: 4x the appends took {ratio:.1f}x the time"

def test_rule_three_keeps_its_promise_on_random_runs(data_dir: Path) -> None:
    """Random runs over small alphabets of one category (where merges interact the most), cut at
    random, against the whole encode."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")
    rng = random.Random(2311)
    alphabets = ["=-", "=-_", "ab", "aab", " ", "*#", "，。", "的一是"]
    limit = streaming.StreamEncoder(tok)._stream.plan.interior_min
    for _ in range(40):
        alphabet = rng.choice(alphabets)
        if rng.random() < 0.5:
            run = "".join(rng.choice(alphabet) for _ in range(rng.randint(limit, 4 * limit)))
        else:  # periodic runs with a random period: the hardest for a boundary to settle
            period = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
            run = (period * (4 * limit // len(period)))[: rng.randint(limit, 4 * limit)]
        text = rng.choice(HEADS) + run + rng.choice(TAILS)
        ids, _, _ = stream(tok, cuts(rng, text))
        assert ids == tok.encode(text, False), ascii(text[:30])


@pytest.mark.parametrize("model", MODELS)
def test_probes_read_in_a_shortened_run_end_the_piece_where_the_whole_run_does(data_dir: Path, model: str) -> None:
    """Rule 3's probes read a long run shortened to its first and last scalars (one scan of the
    whole pending text a probe made a stream of ``"<|" * 2000`` 4x slower than an encode of it):
    for every kind of run after every kind of head, and every probe (the two-scalar ones too),
    the end found in the short text is the one found in the whole text."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / model / "tokenizer.json")
    plan = tok.stream_encoder()._stream.plan
    plan.growing_piece()  # (makes the probes)
    stage2, rules = plan.stage2, plan.rules
    rng = random.Random(model)
    units = list(RUNS.values()) + ["<|", "\x00", "'", "1", "a1", "\u0301", "A", "Ab"]
    shortened = 0
    for unit in units:
        for head in HEADS + ["<", "'", "\u0301", "a\u0301", "Ab ", "x" * 40]:
            run = unit * (rng.randint(80, 300) // len(unit) + 1)
            text = head + run
            n = len(text)
            kind = category(ord(text[n - 1]), stage2)
            start = n - 1
            while start > 0 and category(ord(text[start - 1]), stage2) == kind:
                start -= 1
            whole = piece_end(text, 0, n, stage2, rules)
            short = _short_run(text, start, whole, stage2, rules)
            shortened += len(short) < n
            for probe in plan.rest_probes + ["'s", "<|", "1"]:
                expected = piece_end(text + probe, 0, n + len(probe), stage2, rules)
                assert _end_before(text, short, start, probe, stage2, rules) == expected, (model, ascii(head), ascii(unit), ascii(probe))
    assert shortened > len(units)  # (the short path was taken)


def test_stable_start_keeps_its_promise(data_dir: Path) -> None:
    """``GrowingPiece.stable_start`` (used where a token crosses from one class of marks to the next,
    peek2.serving.marks_run): the boundary it returns is one of the encoding of any text before the
    bytes and any after them. Random runs over small alphabets, random texts around them."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / "qwen3" / "tokenizer.json")
    growing = streaming.plan_of(tok).growing_piece()
    id_bytes = tok._id_bytes
    rng = random.Random(2325)
    alphabets = ["=-", "=-_", "ab", "aab", " ", "*#", "，。", "的一是", "\u0e39\u0e49", "\u0e38\u0e48\u0e21", "\u0301\u0323"]
    found = 0
    for _ in range(60):
        alphabet = rng.choice(alphabets)
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(20, 400)))
        data = run.encode("utf-8")
        j = growing.stable_start(data)
        if j < 0:
            continue
        found += 1
        for _ in range(6):
            before = "".join(rng.choice(alphabet + "x ") for _ in range(rng.randint(0, 12))).encode("utf-8")
            after = "".join(rng.choice(alphabet + "x ") for _ in range(rng.randint(0, 12))).encode("utf-8")
            ends, at = set(), 0
            for token_id in tok._engine.merge(before + data + after):
                at += len(id_bytes[token_id] or b"")
                ends.add(at)
            assert len(before) + j in ends, (ascii(run[:20]), j, before, after)
    assert found >= 30


WHITESPACE_RUNS = ["\n", " \t", " \n", "\n  ", "\xa0 ", "\t\t\n", "\r\n ", " \u3000", "\n\n", "  "]


def test_session_of_growing_mixed_whitespace(pair: tuple[str, Tokenizer, tokenizers.Tokenizer]) -> None:
    """Issue 23, item 2, found again: a whitespace run of several characters (" \\n", "\\xa0 ", "\\n"
    then spaces and tabs) stays pending in a prompt session, and each append merged all of it again:
    80K characters in 1K appends took 0.3-0.6 s, 15x the time of 20K, against 0.02-0.04 s for one
    encode by tokenizers. ``StreamEngine._finish_run`` now keeps the final prefix of the run's piece
    for any whitespace that follows. Random runs, appended in random parts, after and before every
    kind of text, against tokenizers; then 4x the appends in about 4x the time."""
    name, tok, ref = pair
    rng = random.Random(2326)
    for _ in range(16):
        units = rng.sample(WHITESPACE_RUNS, rng.randint(1, 3))
        run = "".join(rng.choice(units) for _ in range(rng.randint(2000, 5000)))
        appended_in_parts(tok, ref, rng.choice(HEADS) + run + rng.choice(TAILS), rng)
    part = (" \n" * 500)[:1000]
    ratio = paired_ratio(lambda: session_ids(tok, ["x"] + [part] * 38), lambda: session_ids(tok, ["x"] + [part] * 152))
    assert ratio < 6, f"{name}: 4x the appends took {ratio:.1f}x the time"


WHITESPACE_AFTER_WHITESPACE = [(" \n", " "), ("\t ", "\n    "), (" \n", "\t "), ("\t ", " \n")]


@pytest.mark.parametrize(("first", "second"), WHITESPACE_AFTER_WHITESPACE, ids=[ascii(f + "|" + s) for f, s in WHITESPACE_AFTER_WHITESPACE])
def test_session_of_one_whitespace_run_after_another(pair: tuple[str, Tokenizer, tokenizers.Tokenizer], first: str, second: str) -> None:
    """A prompt session cuts a long whitespace run by rule 3, and its stream keeps the rest as a
    piece that goes on from ids already sent (``cont``). The memos that keep a finish from merging
    a long run again (``_finish_run``, ``_finish_piece``) took only a pending text that starts a
    piece, so a run of other whitespace after it (``" \\n" * 1500`` then spaces) was merged whole
    at every append: 14-15x the time for 4x the appends, with every family (a bug hunt). They now
    count the first piece as the stream does."""
    name, tok, ref = pair
    rng = random.Random(2327)
    for tail in ("", "x", "\n", " x"):
        appended_in_parts(tok, ref, "x" + first * 1500 + second * rng.randint(1000, 3000) + tail, rng)
    part = (second * 100)[:100]
    ratio = paired_ratio(lambda: session_ids(tok, ["x", first * 1500] + [part] * 38), lambda: session_ids(tok, ["x", first * 1500] + [part] * 152))
    assert ratio < 6, f"{name}: 4x the appends took {ratio:.1f}x the time"


def test_newlines_after_punctuation_with_o200k(data_dir: Path) -> None:
    """o200k's ``[^\\s\\p{L}\\p{N}]+[\\r\\n/]*`` takes newlines after punctuation: "!" then a run of
    newlines is one growing piece, and rule 3 could not cut it (read from a newline, the scanner
    stops before a later "/"; the piece does not). The piece's head ("!") is now kept in front of
    the rest for the scanner. The stream held the whole run, and a session appending 1K newlines
    took 0.78 s for 80K (15.8x the time of 20K; tokenizers' one encode 0.03 s)."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / "gpt4o" / "tokenizer.json")
    ref = tokenizers.Tokenizer.from_file(str(data_dir / "tokenizers" / "gpt4o" / "tokenizer.json"))
    limit = streaming.plan_of(tok).interior_min
    # (A punctuation run longer than the scanner's window before the newlines: only its last
    # scalar can be kept in front of the rest. "<" * 3000 or U+200D * 3000 then newlines held all
    # the newlines; a bug hunt.)
    for head in ("Hi!", "<" * 3000, "\u200d" * 3000, "!" * 100):
        for tail in ("/x", "x", "\r\n/"):
            text = head + "\n" * (20 * limit) + tail
            ids, longest, early = stream(tok, [text[k : k + 100] for k in range(0, len(text), 100)])
            assert ids == tok.encode(text, False) == ref.encode(text, add_special_tokens=False).ids
            assert longest <= limit + 100 + 8, (ascii(head[:2]), longest)
            assert early >= 0.9 * len(ids)

    def session(n: int) -> list[int]:
        return session_ids(tok, ["!"] + ["\n" * 1000] * n)

    assert session(20) == tok.encode("!" + "\n" * 20_000, False)
    ratio = paired_ratio(lambda: session(38), lambda: session(152))
    assert ratio < 6, f"4x the appends took {ratio:.1f}x the time"


SLASH_UNITS = ["/", "\n", "\r\n", "//", "\n\n", "/\n", "\r", "\n/"]


def test_slash_and_newline_runs_after_punctuation_with_o200k(data_dir: Path) -> None:
    """Issue 23, item 2, found again: with o200k, punctuation then "/" and newlines mixed ("!" +
    "/\\n" * n) is one growing piece of two categories, which rule 3 left alone, and a prompt
    session re-encoded all of it at every append (80K characters in 1K appends: 0.51-0.72 s, 9-16x
    the time of 20K; tokenizers' one encode 0.03-0.05 s). Random runs of those units after and
    before every kind of text, streamed and appended in random parts, against tokenizers; then
    the pending text's bound, and 4x the appends in under 6x the time."""
    path = data_dir / "tokenizers" / "gpt4o" / "tokenizer.json"
    tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    limit = streaming.plan_of(tok).interior_min
    rng = random.Random(2411)
    heads = ["!", " !", "Hi!", "", "x", "/", ".", "\n", "?!", "a/"]
    tails = ["", "!!", "/!!", "x", "/x", "\n!", " ", "/", "\n", "'s", " x", "\r\n/."]
    for _ in range(40):
        units = rng.sample(SLASH_UNITS, rng.randint(1, 3))
        run = "".join(rng.choice(units) for _ in range(rng.randint(limit, 3 * limit)))
        text = rng.choice(heads) + run + rng.choice(tails)
        expected = ref.encode(text, add_special_tokens=False).ids
        ids, longest, early = stream(tok, cuts(rng, text))
        assert ids == expected, (ascii(text[:12]), ascii(text[-12:]))
        appended_in_parts(tok, ref, text, rng)
    text = "Hi!" + "/\n" * (10 * limit) + "/!!"
    ids, longest, early = stream(tok, [text[k : k + 100] for k in range(0, len(text), 100)])
    assert ids == ref.encode(text, add_special_tokens=False).ids
    assert longest <= limit + 100 + 8
    assert early >= 0.9 * len(ids)

    def session(n: int) -> list[int]:
        return session_ids(tok, ["!"] + [("/\n" * 500)[:1000]] * n)

    assert session(20) == ref.encode("!" + "/\n" * 10_000, add_special_tokens=False).ids
    ratio = paired_ratio(lambda: session(38), lambda: session(152))
    assert ratio < 6, f"4x the appends took {ratio:.1f}x the time"


# ==== One enormous piece, merged in blocks (peek2.bpe.growing_piece.LongPieces) ====

LONG_KINDS = ["spaces", "equals", "alternating", "CJK", "cyrillic", "upper", "space-newline"]


def long_texts(rng: random.Random) -> list[str]:
    """Texts holding a piece of more than LONG_PIECE_BYTES bytes: runs, random DNA and lowercase
    letters (one word), between other pieces."""
    size = LONG_PIECE_BYTES + 20_000
    texts = [f"{rng.choice(HEADS)}{(RUNS[k] * size)[: size // len(RUNS[k].encode('utf-8')) + 1]}{rng.choice(TAILS)}" for k in LONG_KINDS]
    texts.append("x " + "".join(rng.choice("ACGT") for _ in range(size)) + " y")
    texts.append("Hello, " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(size)) + "!")
    return texts


def test_long_pieces_merge_in_blocks_to_the_ids_of_tokenizers(pair: tuple[str, Tokenizer, tokenizers.Tokenizer]) -> None:
    """A piece of more than LONG_PIECE_BYTES bytes is merged a block at a time: the ids, counts
    and offsets stay those of tokenizers."""
    name, tok, reference = pair
    for k, text in enumerate(long_texts(random.Random(7))):
        expected = reference.encode(text, add_special_tokens=False)
        assert tok.encode(text, False) == expected.ids, (name, k)
        assert tok.count(text) == len(tok.encode(text)), (name, k)
        if k % 3 == 0:
            assert tok.encode_with_offsets(text, False).offsets == expected.offsets, (name, k)


def test_a_long_piece_merges_in_bounded_memory(data_dir: Path) -> None:
    """4 MB of "=" (one piece) took about 190 MB more memory to encode, ~48 bytes a byte in one
    heap; merged in blocks it takes the text's bytes, the vocabulary sorted once, and the ids."""
    code = (
        "import resource, sys\n"
        "from peek2.tokenizer import Tokenizer\n"
        "tok = Tokenizer.from_file(sys.argv[1])\n"
        "text = '=' * 4_000_000\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "ids = tok.encode(text, False)\n"
        "print(len(ids), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    path = str(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")
    result = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True)
    count, grown_mb = map(int, result.stdout.split())
    assert count == 62_500  # (64 "=" a token)
    assert grown_mb < 80, f"{grown_mb} MB more to encode 4 MB of '='"


# The peak memory of one call in a new process, in MB above the memory before it. Linux resets
# the peak (VmHWM) on request, so that the load's own peak hides nothing; elsewhere ru_maxrss,
# which then only counts what goes over it (the bounds below hold either way).
PEAK_OF_CALL = """
import os, resource, sys
from peek2.tokenizer import Tokenizer

def status(key):
    with open('/proc/self/status') as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(key + ':'))

def peak_mb(call, *args):
    try:
        with open('/proc/self/clear_refs', 'w') as clear:
            clear.write('5')
        before = status('VmRSS')
        result = call(*args)
        return result, (status('VmHWM') - before) // 1024
    except OSError:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = call(*args)
        return result, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024

def stream(text):
    encoder = tok.stream_encoder(add_special_tokens=False)
    ids = []
    encoder.feed(text, ids)
    return encoder.finish(ids)

def session(text):
    return tok.prompt_session(add_special_tokens=False).append(text)[1]

tok = Tokenizer.from_file(sys.argv[1])
counted = sys.argv[2] == 'count'
call = {'stream': stream, 'session': session, 'count': lambda text: tok.count(text, False)}[sys.argv[2]]
unit = sys.argv[3]
call(unit * (300_000 // len(unit)))  # (what a first long piece builds once: the sorted vocabulary, the stream's plan)
peaks = []
for size in (1_000_000, 4_000_000):
    text = unit * (size // len(unit))
    result, grown = peak_mb(call, text)
    expected = tok.encode(text, False)
    assert result == (len(expected) if counted else expected), size
    peaks.append(grown)
    del text, result, expected
print(*peaks)
"""


@pytest.mark.parametrize(
    "call, unit", [("stream", "="), ("session", " "), ("count", "ab"), ("count", "\u0301")], ids=["stream", "session", "count", "count-marks"]
)
def test_one_enormous_chunk_takes_the_memory_of_a_block(data_dir: Path, call: str, unit: str) -> None:
    """A stream or a session fed one 4 MB chunk of one piece merged the piece in one heap (~48
    bytes a byte: 4 MB of "=" +190 MB at peak, 1 MB +46 MB), and ``count`` of a long piece of
    many ids gathered them all in a list (``"ab" * 2_000_000``: +98 MB, ~47 bytes an id). Both
    go a block at a time now: 4x the text takes about the memory of the text, not 4x the peak."""
    path = str(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")
    result = subprocess.run([sys.executable, "-c", PEAK_OF_CALL, path, call, unit], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    small_mb, large_mb = map(int, result.stdout.split())
    assert large_mb < small_mb + 40, f"{call} of {unit!r}: 1M characters +{small_mb} MB, 4M characters +{large_mb} MB"


def test_threads_encode_while_a_long_piece_merges(data_dir: Path) -> None:
    """The blocks are merged by Python code called from the engine, where another thread may
    encode with the same tokenizer: each call keeps its own ids."""
    tok = Tokenizer.from_file(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")
    rng = random.Random(3)
    long_text = "Before it, " + "=" * (LONG_PIECE_BYTES * 3) + " and after it, more words."
    short_texts = [" ".join(rng.choice(["word", "42", "日本", "=>", "Привет", "\n"]) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    expected_long = tok.encode(long_text)
    expected_short = [tok.encode(text) for text in short_texts]
    problems: list[str] = []

    def long_calls() -> None:
        for _ in range(4):
            if tok.encode(long_text) != expected_long:
                problems.append("long text")

    def short_calls() -> None:
        for _ in range(10):
            for text, ids in zip(short_texts, expected_short):
                if tok.encode(text) != ids:
                    problems.append(text)

    run_threads_switching_often([long_calls, short_calls, short_calls], 1e-5)
    assert not problems, problems[:5]


@pytest.mark.parametrize("model", ["llama3.2", "deepseek-v3", "gpt4o", "qwen3"])
def test_a_session_keeps_little_of_a_long_piece_pending(data_dir: Path, model: str) -> None:
    """A prompt session's answer after each append merges its pending text: rule 3 cut a long
    piece at 16 of the longest token's bytes (2,048 characters), so a session appended 4
    characters at a time on a run of CJK letters or spaces merged about 1,000 characters an append
    (60-100 us: 0.02-0.05x one encode by tokenizers; a bug hunt). A stream finished again cuts at
    2 (``INTERIOR_MIN_TOKENS_FINISHED_AGAIN``): its pending text stays within a few hundred
    characters, and the ids are the reference's. With an NFC normalizer (Qwen3) too, since a run
    of marks after such a cut takes the kept path (tests/test_marks_run.py): it kept 2,048, and
    spaces appended one at a time cost 55 us an append."""
    from peek2.serving.stream_engine import INTERIOR_MIN_TOKENS_FINISHED_AGAIN

    path = str(data_dir / "tokenizers" / model / "tokenizer.json")
    tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    bound = 3 * INTERIOR_MIN_TOKENS_FINISHED_AGAIN * tok._longest_token
    for text in ("".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(6000)), " " * 6000 + "x" + " " * 3000, "=" * 6000):
        session, ids, most = tok.prompt_session(add_special_tokens=False), [], 0
        for k in range(0, len(text), 4):
            keep, new = session.append(text[k : k + 4])
            del ids[keep:]
            ids += new
            most = max(most, session._encoder.pending_chars)
        assert ids == ref.encode(text, add_special_tokens=False).ids
        assert most <= bound, f"{ascii(text[:2])}: {most} characters pending, more than {bound}"


@pytest.mark.parametrize("model", ["llama3.1", "qwen3"])
def test_a_session_merges_each_rest_of_a_run_of_one_character_once(data_dir: Path, model: str) -> None:
    """A session appended a character at a time on a run of one character merged the run's
    unfinished rest (a few hundred characters) at every append: spaces, 18 us an append with
    Llama-3.1 (64x one encode of the whole by tokenizers). The same rests come back from cut to cut,
    and their merges depend on nothing else: the plan remembers them (``StreamPlan.merged``), and
    a second session on the same run merges no rest it has not seen."""
    from peek2.serving.stream_engine import plan_of

    path = str(data_dir / "tokenizers" / model / "tokenizer.json")
    tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    merges = plan_of(tok).run_merges
    for text in ("x" + " " * 3000, "=" * 3000, "e" + "\u0301" * 3000):
        expected = ref.encode(text, add_special_tokens=False).ids
        for second in (False, True):
            known = len(merges)
            session, ids = tok.prompt_session(add_special_tokens=False), []
            for char in text:
                keep, new = session.append(char)
                del ids[keep:]
                ids += new
            assert ids == expected
            if second:
                assert len(merges) == known, f"{ascii(text[:2])}: {len(merges) - known} rests merged again"
            else:
                assert len(merges) > known


@pytest.mark.parametrize("model", ["llama3.2", "gpt4o"])
def test_token_prefixes_answer_as_the_sorted_vocabulary(data_dir: Path, model: str) -> None:
    """``TokenPrefixes`` (grouped by two bytes, each group sorted at its first question) answers
    whether bytes start, or end, a longer token exactly as a search of the whole vocabulary
    does, for every proper prefix and suffix of sampled tokens, for whole tokens, and for random
    and edited bytes."""
    from bisect import bisect_left

    from peek2.bpe.token_prefixes import TokenPrefixes

    tok = Tokenizer.from_file(data_dir / "tokenizers" / model / "tokenizer.json")
    vocab = list(tok._long_pieces.vocab)
    for reverse in (False, True):
        keys = sorted(token[::-1] if reverse else token for token in vocab)

        def expected(key: bytes) -> bool:
            k = bisect_left(keys, key)
            if k < len(keys) and keys[k] == key:
                k += 1
            return k < len(keys) and keys[k].startswith(key)

        index = TokenPrefixes(tok._long_pieces.vocab, tok._id_bytes, reverse=reverse)
        rng = random.Random(len(vocab) + reverse)
        questions = [b"", b"\x00", b"\xff", b"=", b" ", b"\xe4"]
        for token in rng.sample(vocab, 4000):
            key = token[::-1] if reverse else token
            questions += [key[:k] for k in range(1, len(key) + 1)]
            questions.append(key + bytes([rng.randrange(256)]))
            questions.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))))
        for key in questions:
            assert index.is_proper_prefix(key) == expected(key), (reverse, key)
        assert index.longest == max(len(token) for token in vocab)
    # A token whose id names other bytes (a file's duplicate id) is kept aside, and still counts.
    duplicate = {b"ab": 0, b"abc": 1, b"xyz": 1, b"q": 2}
    forward, backward = TokenPrefixes(duplicate, (b"ab", b"abc", b"q")), TokenPrefixes(duplicate, (b"ab", b"abc", b"q"), reverse=True)
    assert [forward.is_proper_prefix(key) for key in (b"x", b"xy", b"xyz", b"ab", b"abc", b"q", b"")] == [True, True, False, True, False, False, True]
    assert [backward.is_proper_prefix(key) for key in (b"z", b"zy", b"zyx", b"c", b"cb", b"b", b"a", b"q")] == [True, True, False, True, True, True, False, False]


def test_a_long_piece_sorts_a_few_groups_of_tokens(data_dir: Path) -> None:
    """The first long piece of a process sorted the whole vocabulary (30-75 ms: GPT-4o's file on
    140,000 "=" took 84.5 ms in a new process, 8.3 ms the second time, 51 ms in tokenizers). Now
    the tokens are grouped by their first two bytes and a growing piece sorts the groups it asks
    about: a run of "=" or of spaces, a few hundred tokens."""
    path = data_dir / "tokenizers" / "gpt4o" / "tokenizer.json"
    tok, reference = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    for text in ("=" * (LONG_PIECE_BYTES + 9000), " " * (LONG_PIECE_BYTES + 9000) + "x"):
        assert tok.encode(text, add_special_tokens=False) == reference.encode(text, add_special_tokens=False).ids
    sorted_tokens = tok._long_pieces.growing_piece().starts.sorted_tokens()
    assert 0 < sorted_tokens < len(reference.get_vocab()) // 50, sorted_tokens
