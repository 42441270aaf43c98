"""The byte-level alphabet in bulk, compiled: a tokenizer file's vocabulary and merges to bytes,
and the merges to the engine's pair keys, at load time.

``peek2.formats.byte_level`` states the alphabet (each byte written as one printable
character); these loops apply it to every token and merge of a file at once and give None (or
name the tokens outside the alphabet) where the caller's checks must speak, so the messages
stay those of ``peek2.formats.hf_json`` and ``peek2.tokenizer``.

Performance notes (Llama-3.2's tokenizer.json, 128K tokens and 280K merges, a load without the
load cache): the interpreted conversions (a list of bytes per token, ``str.split`` and two
conversions per merge, three dict lookups per merge) took about 0.85 s of the 1.2 s load; these
loops brought the load from 1.20 s to 0.66 s (GPT-4o 1.10 -> 0.66, Qwen3 0.82 -> 0.58;
``python scripts/bench_load.py --runs 3``, "no cache"), pair_table 0.18 s and merge_bytes 0.13 s
of it (profile): the pair keys and the bytes of each merge are new objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from librt.strings import BytesWriter, read_i32_le, write_i32_le
from librt.vecs import vec
from mypy_extensions import i64

from peek2.formats.byte_level import CHAR_TO_BYTE
from peek2.pretokenize.scanner import first_surrogate, surrogate_error
from peek2.spec import RankedMerges


def _alphabet() -> vec[i64]:
    size = max(ord(char) for char in CHAR_TO_BYTE) + 1
    table = vec[i64]([-1] * size)
    for char, byte in CHAR_TO_BYTE.items():
        table[ord(char)] = byte
    return table


_ALPHABET: Final = _alphabet()


def alphabet_bytes(token: str) -> bytes | None:
    """The bytes a byte-level token stands for; None if a character is outside the alphabet."""
    table = _ALPHABET
    size: i64 = len(table)
    out = BytesWriter()
    for k in range(len(token)):
        code: i64 = ord(token[k])
        if code >= size:
            return None
        byte = table[code]
        if byte < 0:
            return None
        out.append(byte)
    return out.getvalue()


def find_token_id(token: object, added: dict[str, int], vocab: dict[bytes, int]) -> int | None:
    """``Tokenizer.token_to_id``: the id of an added token's content (``added``), else of the
    vocabulary token the byte-level ``token`` spells, else None. Raises TypeError for what is not
    a str, and ValueError for a lone surrogate (as encode does; tokenizers raises
    UnicodeEncodeError, a ValueError). (Interpreted, 0.6-0.9 us a call: 0.28-0.37x tokenizers'
    token_to_id in a loop; a bug hunt.)"""
    if not isinstance(token, str):
        raise TypeError(f"token must be str, not {type(token).__name__}")
    found = added.get(token)
    if found is not None:
        return found
    data = alphabet_bytes(token)
    if data is None:
        if first_surrogate(token) >= 0:
            raise surrogate_error(token, ValueError("lone surrogate"))
        return None
    return vocab.get(data)


MEMO_SIZE: Final = 1 << 16  # tokens remembered by ``TokenToId`` beyond the added ones (then forgotten at once)


class TokenToId:
    """``Tokenizer.token_to_id`` as a compiled callable, installed as the instance's own (as
    ``PlainEncode`` is its ``encode``): the interpreted method cost 0.08 us a call of a special
    token against 0.056 us for ``tokenizers``' ``token_to_id``. The added tokens' dict is made at
    the first call (the first token of a content wins).

    Performance notes: a vocabulary token's id needs its bytes (``alphabet_bytes``, a new object
    and its hash) and a second lookup: 0.14-0.33 us a call, 0.2-0.45x ``tokenizers``' 0.08 us
    (whose map is keyed by the token's text), where a loop asks for the same tokens again and
    again (a list of tokens to ids). The answers are remembered, the added tokens' with them: one
    dict lookup of the str for any token asked before. At most ``MEMO_SIZE`` of them (a few MB);
    a dict of every token by text, made at the first call, cost 40 ms and 11 MB with
    Llama-3's 128K tokens for a call most programs make a few times."""

    def __init__(self, added: list[tuple[str, int]], vocab: dict[bytes, int], owner: object) -> None:
        self.added_tokens: Final = added  # (content, id), in the file's order
        self.added: dict[str, int] | None = None
        self.memo: dict[str, int] = {}  # the added tokens, then each token asked: its id, or -1 for None
        self.vocab: Final = vocab
        self.owner: Final = owner  # the tokenizer, for pickling

    def __reduce__(self) -> tuple[object, tuple[object, str]]:
        # Pickled as the tokenizer's attribute, like a bound method (the tokenizer pickles by its source).
        return (getattr, (self.owner, "token_to_id"))

    def __call__(self, token: object) -> int | None:
        """The id of an added token's content or of a byte-level vocabulary token, else None.
        Raises TypeError for what is not a str, ValueError for a lone surrogate (as ``encode``)."""
        if not isinstance(token, str):
            return find_token_id(token, {}, self.vocab)  # (raises its TypeError)
        known: i64 = self.memo.get(token, -2)
        if known >= 0:
            return known
        if known == -1:
            return None
        added = self.added
        if added is None:
            added = {}
            for content, token_id in self.added_tokens:
                if content not in added:
                    added[content] = token_id
            self.added = added
            self.memo = dict(added)
        found = find_token_id(token, added, self.vocab)
        memo = self.memo
        if len(memo) >= len(added) + MEMO_SIZE:
            memo = self.memo = dict(added)
        memo[token] = -1 if found is None else found
        return found


def vocab_bytes(raw: dict[str, object]) -> tuple[dict[bytes, int], list[str]] | None:
    """The vocabulary in bytes, and the tokens outside the alphabet (left out); None if an id is
    not a non-negative int."""
    vocab: dict[bytes, int] = {}
    outside: list[str] = []
    for token, token_id in raw.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            return None
        data = alphabet_bytes(token)
        if data is None:
            outside.append(token)
        else:
            vocab[data] = token_id
    return vocab, outside


def _merge_parts(merge: object) -> tuple[bool, str, str]:
    """A merge's two tokens, from ``"left right"`` or ``[left, right]``; first False if malformed
    (a tuple of three, which mypyc returns without making an object)."""
    if isinstance(merge, str):
        space = merge.find(" ")
        if space < 0 or merge.find(" ", space + 1) >= 0:
            return False, "", ""
        return True, merge[:space], merge[space + 1 :]
    if isinstance(merge, list):
        if len(merge) != 2:
            return False, "", ""
        first, second = merge[0], merge[1]
        if not isinstance(first, str) or not isinstance(second, str):
            return False, "", ""
        return True, first, second
    return False, "", ""


def is_header(merge: object) -> bool:
    """Whether a merge of a list of strings is one tokenizers skips, wherever it is: a line of
    ``merges.txt`` that starts with ``#version``, its header. (Applied here, such a merge gave
    other ids, and ``"#version: 0.2"`` refused a file tokenizers loads; a bug hunt.)"""
    return isinstance(merge, str) and merge.startswith("#version")


def merge_bytes(raw: list[object]) -> list[tuple[bytes, bytes]] | None:
    """The merges (``"left right"`` strings or ``[left, right]`` pairs) in bytes, headers of
    strings left out (``is_header``); None if one is malformed or outside the alphabet, or the
    list holds both forms."""
    merges: list[tuple[bytes, bytes]] = []
    strings = bool(raw) and isinstance(raw[0], str)
    for merge in raw:
        if strings and is_header(merge):
            continue
        well_formed, first, second = _merge_parts(merge)
        if not well_formed or isinstance(merge, str) != strings:
            return None
        left = alphabet_bytes(first)
        right = alphabet_bytes(second)
        if left is None or right is None:
            return None
        merges.append((left, right))
    return merges


def merge_ids(raw: list[object], ids: dict[str, int]) -> bytes | None:
    """The merges (``"left right"`` strings or ``[left, right]`` pairs) as the ids of their two
    tokens, two little-endian int32 a merge (``peek2.spec.RankedMerges``; headers left out, as
    ``merge_bytes`` leaves them), looked up by the tokens'
    text in ``ids`` (the file's vocabulary, every token in the byte-level alphabet); None if one is
    malformed or names a token not in ``ids``, or the list holds both forms (``merge_bytes`` then
    finds what to report).

    No bytes object or tuple per merge, and ``pair_table`` then looks up only the merged token
    (``_ranked_pair_table``): the merges of a file to the pair table, best of 7 (``merge_bytes`` and
    ``pair_table`` of the pairs of bytes against this and ``pair_table`` of the ids), Llama-3.2 0.36
    -> 0.24 s, Qwen3 0.19 -> 0.12 s, GPT-4o 0.30 -> 0.21 s. (This function alone costs what
    ``merge_bytes`` costs: a lookup of a new slice's text is no cheaper than its conversion.)"""
    pairs = BytesWriter()
    strings = bool(raw) and isinstance(raw[0], str)
    for merge in raw:
        if strings and is_header(merge):
            continue
        well_formed, first, second = _merge_parts(merge)
        if not well_formed or isinstance(merge, str) != strings:  # (both forms in one list: refused, as tokenizers does)
            return None
        left = ids.get(first, -1)
        right = ids.get(second, -1)
        if left < 0 or right < 0:
            return None
        write_i32_le(pairs, left)
        write_i32_le(pairs, right)
    return pairs.getvalue()


def pair_table(
    merges: Sequence[tuple[bytes, bytes]], vocab: dict[bytes, int], id_bits: i64, pair_stride: i64
) -> tuple[list[int], list[int], bytes] | None:
    """The merges as pair keys (``left * pair_stride + right``) and values (``rank << id_bits |
    merged``) in rank order, and as the ids of their two tokens (two little-endian int32 a merge:
    ``peek2.spec.RankedMerges``); None if a merge uses a token that is not in the vocabulary.

    A pair listed twice is in the keys twice: ``MergeTable`` keeps the later value, as
    ``tokenizers`` does (a dict here, which did the same, cost a third of the function's time)."""
    if isinstance(merges, RankedMerges):
        return _ranked_pair_table(merges.pairs, vocab, id_bits, pair_stride)
    keys: list[int] = []
    values: list[int] = []
    pairs = BytesWriter()
    rank: i64 = 0
    for left, right in merges:
        left_id = vocab.get(left, -1)
        right_id = vocab.get(right, -1)
        merged_id = vocab.get(left + right, -1)
        if left_id < 0 or right_id < 0 or merged_id < 0:
            return None
        keys.append(left_id * pair_stride + right_id)
        values.append((rank << id_bits) | merged_id)
        write_i32_le(pairs, left_id)
        write_i32_le(pairs, right_id)
        rank += 1
    return keys, values, pairs.getvalue()


def _ranked_pair_table(pairs: bytes, vocab: dict[bytes, int], id_bits: i64, pair_stride: i64) -> tuple[list[int], list[int], bytes] | None:
    """``pair_table`` of merges given as their tokens' ids (each id one token of ``vocab``).

    The merged token is first tried as the previous merge's, then the next id, compared in place
    (no concatenation, no hash): the files list the merges by the rank of the token they make
    (every merge of shared/data's files but one in 30K), as tiktoken's ranks convert to merges.
    The others are looked up (GPT-2's merges, which are not in that order). Best of 7: Llama-3.2
    148 -> 68-98 ms, GPT-4o 110 -> 47-58 ms, Qwen3 64 -> 30-43 ms."""
    size: i64 = max(vocab.values(), default=-1) + 1
    tokens: list[bytes | None] = [None] * size
    for token, token_id in vocab.items():
        tokens[token_id] = token
    keys: list[int] = []
    values: list[int] = []
    guess: i64 = 0
    for rank in range(len(pairs) // 8):
        left_id = i64(read_i32_le(pairs, 8 * rank))
        right_id = i64(read_i32_le(pairs, 8 * rank + 4))
        left = tokens[left_id]
        right = tokens[right_id]
        assert left is not None and right is not None  # (merge_ids found both in the vocabulary)
        merged_id: i64 = -1
        if guess < size and _joins(tokens[guess], left, right):
            merged_id = guess
        elif guess + 1 < size and _joins(tokens[guess + 1], left, right):
            merged_id = guess + 1
        else:
            merged_id = vocab.get(left + right, -1)
            if merged_id < 0:
                return None
        guess = merged_id
        keys.append(left_id * pair_stride + right_id)
        values.append((rank << id_bits) | merged_id)
    return keys, values, pairs


def _joins(token: bytes | None, left: bytes, right: bytes) -> bool:
    """Whether ``token`` is ``left + right``."""
    return token is not None and len(token) == len(left) + len(right) and token.startswith(left) and token.endswith(right)


def utf8_tokens(vocab: dict[bytes, int]) -> dict[str, int]:
    """The tokens whose bytes are UTF-8, by their text, in the vocabulary's order (a token that is
    not UTF-8 is never a piece of text).

    One decode a token: the comprehension it replaces, filtered by a decoding test, decoded each
    twice (best of 5, the same dict: Llama-3.2 105 -> 73 ms, Qwen3 82 -> 52, GPT-4o 105 -> 91,
    DeepSeek-V3 119 -> 60)."""
    texts: dict[str, int] = {}
    for token, token_id in vocab.items():
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            continue
        texts[text] = token_id
    return texts


def id_table(vocab: dict[bytes, int], size: int) -> tuple[list[bytes | None], int]:
    """Each id's token in a list of ``size`` (None where no token has the id; the caller checks
    that ``size`` is above every id), and the longest token's length in bytes (0 for none).
    Compiled: the interpreted loop took 25 ms of Qwen3's load.

    (The length is read here, where every token is reached anyway: a pass of its own at a
    tokenizer's first stream, ``peek2.serving.stream_engine.StreamPlan``, took 4-6 ms of the
    128-200K tokens' first reach since the load.)"""
    table: list[bytes | None] = [None] * size
    longest: i64 = 0
    for token, token_id in vocab.items():
        table[token_id] = token
        if len(token) > longest:
            longest = len(token)
    return table, longest

