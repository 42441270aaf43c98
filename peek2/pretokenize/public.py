"""The pre-tokenizer's public functions, ``peek2.split`` and ``peek2.split_offsets``.

Plain Python around the compiled ``Peek2Pattern`` (``peek2.pretokenize.pattern``): mypyc keeps
no docstrings, and ``help(peek2.split)`` showed a bare signature (a bug hunt). The call costs
about 45 ns more than a compiled one (``peek2.split("Hello world")``, 0.20 -> 0.24 us), nothing
beside a text of a sentence. This module also gives the compiled class its docstring back.
"""

from __future__ import annotations

from peek2.pretokenize.pattern import Peek2Pattern, resolve

PEEK2_PATTERN_DOC = """A pattern family ready to split text: build it from a family name or a pattern string.

    >>> p = Peek2Pattern("llama3")
    >>> p.split("Hello world's 12345!")
    ['Hello', ' world', "'s", ' ', '123', '45', '!']
    >>> p.split_offsets("Hi  there")
    [(0, 2), (2, 3), (3, 9)]
    >>> p.split_ends("Hi  there")
    [2, 3, 9]

    ``split_ends`` is the compact form of the offsets: each piece starts where the one before ends.
    A pattern pickles by its family's name, and two of one family are equal.

    Raises:
        TypeError: the argument is not a str (``split`` and the others: the text is not a str).
        UnsupportedPatternError (a ValueError): not a supported family or pattern.
    """

Peek2Pattern.__doc__ = PEEK2_PATTERN_DOC  # (compiled, the class has an empty one; pure, a pointer here)


def split(text: object, pattern: object = "llama3") -> list[str]:
    """Split ``text`` into pieces exactly like ``Split(Regex(pattern), "isolated")`` of tokenizers.

    ``pattern`` is a family name (``"llama3"``, ``"qwen2"``, ``"o200k"``, ...: ``peek2.FAMILIES``),
    the exact pattern string of a ``tokenizer.json``, or a ``Peek2Pattern``.

    >>> split("I've 1234 apples\\n\\n")
    ['I', "'ve", ' ', '123', '4', ' apples', '\\n\\n']
    >>> split("I've 1234", pattern="qwen2")
    ['I', "'ve", ' ', '1', '2', '3', '4']

    Raises:
        TypeError: ``text`` is not a str.
        ValueError: ``text`` holds a lone surrogate, or ``pattern`` is not supported.
    """
    return resolve(pattern).split(text)


def split_offsets(text: object, pattern: object = "llama3") -> list[tuple[int, int]]:
    """The ``(start, end)`` character offsets of ``split(text, pattern)``, as tokenizers reports them.

    >>> split_offsets("Hi there")
    [(0, 2), (2, 8)]
    """
    return resolve(pattern).split_offsets(text)
