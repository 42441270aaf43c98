"""The public API: types, errors and their messages, empty input, pickling, docstring examples."""

from __future__ import annotations

import doctest
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Regex, pre_tokenizers

import peek2
import peek2.pretokenize.families
import peek2.pretokenize.pattern
from conftest import FAMILIES


def test_split_and_offsets_agree() -> None:
    text = "Hello world's 12345!\r\n\tok"
    pieces = peek2.split(text)
    offsets = peek2.split_offsets(text)
    assert [text[a:b] for a, b in offsets] == pieces
    assert "".join(pieces) == text


def test_split_offsets_share_each_boundary() -> None:
    """A piece's start is the int object of the piece before it's end: one int a piece, not two
    (1 MB of English, 22.8 -> 18.6 ms)."""
    text = "Hello world's 12345!\r\n\tok " * 100
    offsets = peek2.split_offsets(text)
    assert [text[a:b] for a, b in offsets] == peek2.split(text)
    assert all(offsets[k][0] is offsets[k - 1][1] for k in range(1, len(offsets)) if offsets[k][0] > 256)
    assert offsets[-1][1] == len(text) > 256


@pytest.mark.parametrize("family", FAMILIES)
def test_empty_text(family: str) -> None:
    assert peek2.split("", family) == []
    assert peek2.split_offsets("", family) == []


@pytest.mark.parametrize("bad", [b"bytes", 5, None, ["a"]])
def test_non_str_text_is_type_error(bad: object) -> None:
    # The same message compiled or not, naming the parameter (mypyc's own check of a str
    # annotation said "str object expected; got NoneType"; a bug hunt).
    got = type(bad).__name__
    with pytest.raises(TypeError, match=f"^text must be str, not {got}"):
        peek2.split(bad)
    with pytest.raises(TypeError, match=f"^text must be str, not {got}"):
        peek2.split_offsets(bad)
    with pytest.raises(TypeError, match=f"^text must be str, not {got}"):
        peek2.Peek2Pattern("qwen2").split(bad)
    if not isinstance(bad, bytes):
        message = f"^pattern must be a family name or pattern string \\(str\\) or a Peek2Pattern, not {got}$"
        with pytest.raises(TypeError, match=message):
            peek2.split("x", bad)
        with pytest.raises(TypeError, match=message):
            peek2.Peek2Pattern(bad)
        with pytest.raises(TypeError, match=message):
            peek2.Peek2(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["\ud83d", "ok \udc00 ok", "abc\ud800", "'\ud800s", "12\udfff3"])
def test_lone_surrogate_is_value_error_like_reference(text: str) -> None:
    reference = pre_tokenizers.Split(Regex(peek2.PATTERNS["llama3"]), behavior="isolated")
    with pytest.raises(Exception):
        reference.pre_tokenize_str(text)  # the reference refuses it too
    index = next(k for k, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF)
    with pytest.raises(ValueError, match=f"lone surrogate U\\+{ord(text[index]):04X} at index {index}"):
        peek2.split(text)
    with pytest.raises(ValueError, match="lone surrogate"):
        peek2.split_offsets(text)


def test_pattern_from_name_and_from_string() -> None:
    for name, pattern in peek2.PATTERNS.items():
        assert peek2.Peek2Pattern(name) == peek2.Peek2Pattern(pattern)
        assert peek2.Peek2Pattern(pattern).family == name
        assert peek2.Peek2Pattern(name).pattern == pattern
    assert peek2.split("a 1234", peek2.PATTERNS["qwen2"]) == ["a", " ", "1", "2", "3", "4"]


def test_unknown_family_lists_families() -> None:
    with pytest.raises(peek2.UnsupportedPatternError, match="llama3, qwen2, qwen3.5") as info:
        peek2.split("x", "gpt5")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("encoding", "family"), [("o200k_base", "o200k"), ("o200k_harmony", "o200k"), ("cl100k_base", "cl100k"), ("r50k_base", "gpt2")])
def test_tiktoken_encoding_name_as_pattern_names_its_family(encoding: str, family: str) -> None:
    # (it was "unknown pattern family 'o200k_base'", the family it means left for the user to guess)
    with pytest.raises(peek2.UnsupportedPatternError, match=f"'{encoding}' is a tiktoken encoding, not a pattern family: its pattern is the family '{family}'"):
        peek2.split("x", encoding)
    peek2.split("x", family)


def test_unsupported_pattern_names_the_difference() -> None:
    # tiktoken's own cl100k string splits "  \n  " differently from the HF form: refused, not approximated.
    tiktoken_cl100k = (
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
        r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
    )
    # (it said that peek2 implements cl100k's pattern "(see peek2.PATTERNS)", which has none; a bug hunt)
    with pytest.raises(peek2.UnsupportedPatternError, match=r"is tiktoken's pat_str of 'cl100k', which tokenizers' regex \(Oniguruma\) reads otherwise .* pass the family name 'cl100k'"):
        peek2.Peek2Pattern(tiktoken_cl100k)
    assert peek2.split("a 12345 \n ", "cl100k") == ["a", " ", "123", "45", " \n "]
    almost = peek2.PATTERNS["llama3"].replace("{1,3}", "{1,4}")
    with pytest.raises(peek2.UnsupportedPatternError, match="nearest family 'llama3' differs at character"):
        peek2.Peek2Pattern(almost)


@pytest.mark.parametrize("bad", [None, 3, b"llama3"])
def test_non_str_pattern_is_type_error(bad: object) -> None:
    got = "None" if bad is None else type(bad).__name__
    with pytest.raises(TypeError, match=f"str.*{got}"):
        peek2.Peek2Pattern(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=f"str.*{got}"):
        peek2.split("text", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("family", FAMILIES)
def test_pattern_pickles_by_family(family: str) -> None:
    pattern = peek2.Peek2Pattern(family)
    data = pickle.dumps(pattern)
    assert len(data) < 200  # by name, not by table
    again = pickle.loads(data)
    assert again == pattern and again.split("Don't 1234") == pattern.split("Don't 1234")


def test_docstring_examples() -> None:
    # doctest cannot see into compiled functions, so the examples run on the pure path.
    script = (
        "import doctest, peek2, peek2.pretokenize.families, peek2.pretokenize.public, peek2.normalize.scalar_set\n"
        "for m in (peek2, peek2.pretokenize.families, peek2.pretokenize.public, peek2.normalize.scalar_set):\n"
        "    r = doctest.testmod(m)\n"
        "    print(m.__name__, r.attempted, r.failed)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "PEEK2_PURE": "1"}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        name, attempted, failed = line.split()
        assert int(attempted) > 0 and int(failed) == 0, out.stdout


def test_readme_examples() -> None:
    readme = Path(__file__).resolve().parent.parent / "README.md"
    failures, attempted = doctest.testfile(str(readme), module_relative=False)
    assert attempted > 0 and failures == 0


def test_help_shows_the_public_docstrings() -> None:
    """A bug hunt (stop 70): in the compiled build, ``help(peek2.split)``, ``split_offsets`` and
    ``Peek2Pattern`` showed no docstring (mypyc keeps none), though the README shows them first."""
    import pydoc

    for obj in (peek2.split, peek2.split_offsets, peek2.Peek2Pattern, peek2.Tokenizer, peek2.Tokenizer.encode, peek2.encode, peek2.patch):
        assert obj.__doc__ and obj.__doc__.strip(), obj
        assert obj.__doc__.split("\n")[0].strip() in pydoc.render_doc(obj), obj
    assert ">>>" in peek2.split.__doc__ and ">>>" in (peek2.Peek2Pattern.__doc__ or "")
