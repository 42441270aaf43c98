"""The reference: HuggingFace tokenizers' ``Split(Regex(pattern), behavior="isolated")``.

Pieces come with character offsets, as ``pre_tokenize_str`` reports them.
"""

from __future__ import annotations

from typing import Any, Callable

Pieces = list[tuple[str, tuple[int, int]]]


def reference_split(family_or_pattern: str) -> Callable[[str], Pieces]:
    """The reference splitter for a peek2 family name (one Split, or the family's Sequence) or a pattern string."""
    from tokenizers import Regex, pre_tokenizers

    import peek2

    family = peek2.FAMILIES.get(family_or_pattern)
    if family is not None and family.name == "starcoder2":  # no regex: the files' own pipeline
        pipeline = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        )

        def split_text(text: str) -> Pieces:  # ByteLevel's pieces are in its byte alphabet: the text's own
            return [(text[start:end], (start, end)) for _, (start, end) in pipeline.pre_tokenize_str(text)]

        return split_text
    patterns = family.patterns if family is not None else (family_or_pattern,)
    splits = [pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in patterns]
    splitter: Callable[[str], Pieces] = (
        splits[0] if len(splits) == 1 else pre_tokenizers.Sequence(splits)
    ).pre_tokenize_str
    return splitter


def reference_and_peek2(path: str) -> tuple[Any, Any]:
    """``tokenizers.Tokenizer`` and ``peek2.Tokenizer`` of one file: a tokenizer.json, or GPT-2's
    ``encoder.json`` (its ``vocab.bpe`` beside it) set up as HuggingFace's gpt2 tokenizer.json is:
    ``ByteLevel(add_prefix_space=False)`` and ``<|endoftext|>`` a special token."""
    from pathlib import Path

    from tokenizers import Tokenizer as Reference
    from tokenizers import decoders, models, pre_tokenizers

    from peek2.tokenizer import Tokenizer

    if Path(path).name != "encoder.json":
        return Reference.from_file(path), Tokenizer.from_file(path)
    merges = str(Path(path).with_name("vocab.bpe"))
    reference = Reference(models.BPE.from_file(path, merges))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    reference.decoder = decoders.ByteLevel()
    reference.add_special_tokens(["<|endoftext|>"])
    return reference, Tokenizer.from_gpt2_files(path, merges)


def peek2_split(family: str) -> Callable[[str], Pieces]:
    """peek2's pieces and offsets in the reference's shape."""
    import peek2

    pattern = peek2.Peek2Pattern(family)

    def run(text: str) -> Pieces:
        return list(zip(pattern.split(text), pattern.split_offsets(text)))

    return run


def first_mismatch(expected: list, got: list, context: int = 2) -> str:  # type: ignore[type-arg]
    """A readable account of where two lists of pieces (or ids) first differ."""
    k = next((k for k, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
    lo = max(0, k - context)
    return (
        f"first difference at item {k} (reference {len(expected)} items, peek2 {len(got)}):\n"
        f"  reference {expected[lo:k + context + 1]!r}\n"
        f"  peek2     {got[lo:k + context + 1]!r}"
    )
