"""Read GPT-2's original files: ``encoder.json`` (token -> id) and ``vocab.bpe`` (the merges).

HuggingFace's ``vocab.json`` and ``merges.txt`` (GPT-2, RoBERTa, BART, and every
``GPT2Tokenizer`` folder) are the same two formats. Both name tokens in the byte-level
alphabet; the pre-tokenizer they imply is GPT-2's pattern (the ``gpt2`` family: what
``tokenizers``' ``ByteLevel(add_prefix_space=False)`` and tiktoken's ``gpt2``/``r50k_base``
split with). ``<|endoftext|>`` is a special token when the vocabulary has it, as in HuggingFace's
gpt2 ``tokenizer.json`` and in tiktoken.
"""

from __future__ import annotations

import os
from typing import Any

from collections.abc import Sequence

from peek2.bpe.vocab import merge_ids, vocab_bytes
from peek2.formats.byte_level import to_bytes
from peek2.formats.hf_json import read_json
from peek2.formats.tiktoken_file import special_added_tokens
from peek2.spec import RankedMerges, TokenizerFormatError, TokenizerSpec

END_OF_TEXT = "<|endoftext|>"


def load_files(
    encoder_path: str | os.PathLike[str], merges_path: str | os.PathLike[str], special_tokens: dict[str, int] | None = None
) -> TokenizerSpec:
    """The spec of ``encoder.json`` + ``vocab.bpe`` (or ``vocab.json`` + ``merges.txt``).

    ``special_tokens`` (content -> id) defaults to ``<|endoftext|>`` with its id in the vocabulary.

    Raises:
        FileNotFoundError: a file is missing.
        TokenizerFormatError (ValueError): malformed content (the message names the file, and the
            line of a merge).
    """
    encoder_source, merges_source = os.fspath(encoder_path), os.fspath(merges_path)
    raw = read_json(_text(encoder_path, encoder_source), encoder_source)
    vocab = _vocab(raw, encoder_source)
    merges, made = _merges(_text(merges_path, merges_source), merges_source, raw, vocab, encoder_source)
    if special_tokens is None:
        special_tokens = {END_OF_TEXT: raw[END_OF_TEXT]} if END_OF_TEXT in raw else {}
    for content, token_id in special_tokens.items():
        if not isinstance(content, str) or not isinstance(token_id, int) or isinstance(token_id, bool):
            raise TypeError(f"special_tokens must map str to int, not {content!r}: {token_id!r}")
    # (as from_tiktoken takes them: two names of one id decode as the first; the last did here, a bug hunt)
    added = special_added_tokens(special_tokens)
    notices = _unmade_tokens(vocab, made, special_tokens, merges_source)
    return TokenizerSpec(family="gpt2", vocab=vocab, merges=merges, added_tokens=added, source=encoder_source, notices=notices)


def _unmade_tokens(vocab: dict[bytes, int], made: set[int], special_tokens: dict[str, int], merges_source: str) -> tuple[str, ...]:
    """A notice (the tokenizer warns it, loaded from the cache too) where ``vocab.bpe`` makes none
    of some tokens of ``encoder.json`` (special tokens and single bytes aside): a merges file cut
    short loaded silently and gave other ids, where tiktoken refuses such a pair (it checks that
    the merges make exactly the encoder's tokens; a bug hunt). ``tokenizers`` loads them as peek2
    does, so it is a warning, not a refusal."""
    # (the two names tiktoken leaves out of its check too, special or not)
    specials = {content.encode("utf-8") for content in special_tokens} | {END_OF_TEXT.encode(), b"<|startoftext|>"}
    unmade = [token for token, token_id in vocab.items() if len(token) > 1 and token_id not in made and token not in specials]
    if not unmade:
        return ()
    first = min(unmade, key=vocab.__getitem__)
    return (
        f"no merge of {merges_source} makes {len(unmade):,} of its {len(vocab):,} tokens (the first, id {vocab[first]}: "
        f"{first!r}): cut short, or not this vocabulary's merges? tiktoken refuses such a pair; pass special tokens in special_tokens",
    )


def _vocab(raw: Any, source: str) -> dict[bytes, int]:
    if not isinstance(raw, dict):
        raise TokenizerFormatError(f"{source}: must be a JSON object of token -> id, not {type(raw).__name__}")
    fast = vocab_bytes(raw)  # (compiled, as tokenizer.json's; None, or tokens outside the alphabet: named below)
    if fast is not None and not fast[1] and len(set(fast[0].values())) == len(fast[0]):
        return fast[0]
    vocab: dict[bytes, int] = {}
    for token, token_id in raw.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise TokenizerFormatError(f"{source}: token {token!r} has id {token_id!r}, not an int >= 0")
        data = to_bytes(token)
        if data is None:
            raise TokenizerFormatError(f"{source}: token {token!r} is not in the byte-level alphabet")
        if data in vocab:
            raise TokenizerFormatError(f"{source}: token {token!r} is listed twice")
        vocab[data] = token_id
    if len(set(vocab.values())) != len(vocab):  # (accepted, and decoded as either token; a bug hunt)
        owners: dict[int, bytes] = {}
        for data, token_id in vocab.items():
            if token_id in owners:
                raise TokenizerFormatError(f"{source}: id {token_id} is given to two tokens, {owners[token_id]!r} and {data!r}")
            owners[token_id] = data
    return vocab


def _text(path: str | os.PathLike[str], source: str) -> str:
    """A file's UTF-8 text, its line ends as they are (a text-mode read took a lone CR for one)."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TokenizerFormatError(f"{source}: not UTF-8 (byte 0x{data[error.start]:02X} at offset {error.start})") from None


def _merges(
    text: str, source: str, raw: dict[str, int], vocab: dict[bytes, int], vocab_source: str
) -> tuple[Sequence[tuple[bytes, bytes]], set[int]]:
    """The merges of ``vocab.bpe`` as tokenizers' ``BPE.from_file`` reads them: lines ended by
    LF or CR LF (a lone CR ends none), ``#version`` lines skipped, any other line two tokens of
    the vocabulary, which holds their join too. (A bug hunt: empty lines were skipped, lone CRs
    ended lines, and a merge of unknown tokens was reported against encoder.json.) Beside them,
    the ids of the tokens they make.

    As their tokens' ids (``RankedMerges``, looked up by text in ``raw``, compiled), as
    tokenizer.json's merges are read: bytes per merge made in Python took 0.39 s of GPT-2's 0.79
    s load. A line that is not such a merge is found and named by the loop below."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # (the newline that ends the last line)
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    merge_lines = [line for line in lines if not line.startswith("#version")]  # (any such line is a header)
    if len(raw) == len(vocab) and "" not in raw:  # (ids unique, every token in the alphabet: ``_vocab``; an empty part is named below)
        pairs = merge_ids(list(merge_lines), raw)  # (None: a line to name below)
        made = {raw.get(line.replace(" ", ""), -1) for line in merge_lines}
        if pairs is not None and -1 not in made:
            return RankedMerges(pairs, vocab), made
    merges: list[tuple[bytes, bytes]] = []
    for number, line in enumerate(lines, 1):
        line = line[:-1] if line.endswith("\r") else line
        if line.startswith("#version"):  # (any such line is a header, as tokenizers reads them)
            continue
        parts = line.split(" ")
        left = to_bytes(parts[0]) if len(parts) == 2 and parts[0] else None
        right = to_bytes(parts[1]) if len(parts) == 2 and parts[1] else None
        if left is None or right is None:
            raise TokenizerFormatError(
                f"{source}, line {number}: a merge must be two byte-level tokens separated by one space, not {line[:60]!r}"
            )
        for token in (left, right, left + right):
            if token not in vocab:
                raise TokenizerFormatError(f"{source}, line {number}: the merge {line[:60]!r} makes or uses {token!r}, not a token of {vocab_source}")
        merges.append((left, right))
    return merges, {vocab[left + right] for left, right in merges}
