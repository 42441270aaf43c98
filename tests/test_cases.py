"""Table-driven cases: the splits that explain the algorithm, each checked against the reference.

Expected pieces below were taken from the reference,
``tokenizers.pre_tokenizers.Split(Regex(PATTERNS[family]), behavior="isolated").pre_tokenize_str``
(tokenizers 0.23.3); the test asserts both that peek2 gives them and that the reference still does.
"""

from __future__ import annotations

import pytest

from conftest import ours, reference_split

CASES: list[tuple[str, str, list[str]]] = [
    # contractions: case-insensitive; long s folds to s; the "'D" of the paper
    ("llama3", "I'm he'LL they'Re we've 'D", ["I", "'m", " he", "'LL", " they", "'Re", " we", "'ve", " '", "D"]),
    ("llama3", "x'ſ 'sun", ["x", "'ſ", " '", "sun"]),
    ("llama3", "'hello '", ["'hello", " '"]),
    # late fallback: an apostrophe before a non-contraction letter prefixes the word
    ("llama3", "rock'n'roll", ["rock", "'n", "'roll"]),
    # numbers: groups of three (llama3), one by one (qwen2)
    ("llama3", "12345678", ["123", "456", "78"]),
    ("qwen2", "1234", ["1", "2", "3", "4"]),
    ("llama3", "٣٤٥٦ ²³", ["٣٤٥", "٦", " ", "²³"]),
    # punctuation takes one leading space and trailing CR/LF
    ("llama3", "a ...\r\n\nb", ["a", " ...\r\n\n", "b"]),
    # whitespace: up to the last newline; before a word, the last space is left to prefix it
    ("llama3", "a  \n  b", ["a", "  \n", " ", " b"]),
    ("llama3", "a   b", ["a", "  ", " b"]),
    ("llama3", "a\t\t.", ["a", "\t", "\t", "."]),
    ("llama3", "end   ", ["end", "   "]),
    ("llama3", "\u3000漢字\u00a0x", ["\u3000漢字", "\u00a0x"]),
    # marks: punctuation for llama3/qwen2, letters for qwen3.5
    ("llama3", "e\u0301te", ["e", "\u0301te"]),
    ("qwen3.5", "e\u0301te", ["e\u0301te"]),
    ("qwen3.5", " \u0301\u0301", [" \u0301\u0301"]),
]


@pytest.mark.parametrize(("family", "text", "expected"), CASES, ids=[repr(c[1])[:30] for c in CASES])
def test_case(family: str, text: str, expected: list[str]) -> None:
    reference = [piece for piece, _ in reference_split(family)(text)]
    assert reference == expected, "the reference changed: re-derive this case"
    assert ours(family)(text) == reference_split(family)(text)
