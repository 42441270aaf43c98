"""What a loader hands the engine: a byte-level BPE tokenizer as plain data.

Loaders (``peek2.formats``) read files and validate them; the engine
(``peek2.tokenizer``) builds from a ``TokenizerSpec`` and never reads files.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload


class TokenizerFormatError(ValueError):
    """A tokenizer file that is malformed, truncated, or missing a field (the message names it)."""


class RankedMerges(Sequence[tuple[bytes, bytes]]):
    """Merges in rank order, each as the ids of its two tokens in ``vocab`` (two little-endian int32
    a merge, ``pairs``), read as the tuple of ``(left, right)`` pairs of bytes they stand for.

    What a loaded tokenizer keeps in ``TokenizerSpec.merges`` (``peek2.formats.load_cache``): 280K
    tuples of two new bytes objects each took about 36 MB per Llama-3 tokenizer, 0.44 s to pickle
    into the load cache and 0.12 s of a cached load's 0.27 s to unpickle; these take 2.2 MB and one
    copy. A pair is made when it is read (``merges[k]``, iteration), from the vocabulary's tokens.
    """

    __slots__ = ("pairs", "vocab", "_tokens")

    def __init__(self, pairs: bytes, vocab: dict[bytes, int]) -> None:
        if len(pairs) % 8:
            raise ValueError(f"pairs must hold two int32 per merge, not {len(pairs)} bytes")
        self.pairs = pairs
        self.vocab = vocab
        self._tokens: list[bytes] | None = None  # id -> token, made at the first read

    def _by_id(self) -> list[bytes]:
        tokens = self._tokens
        if tokens is None:
            tokens = [b""] * (max(self.vocab.values(), default=-1) + 1)
            for token, token_id in self.vocab.items():
                tokens[token_id] = token
            self._tokens = tokens
        return tokens

    def __len__(self) -> int:
        return len(self.pairs) // 8

    @overload
    def __getitem__(self, index: int) -> tuple[bytes, bytes]: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[bytes, bytes], ...]: ...
    def __getitem__(self, index: int | slice) -> tuple[bytes, bytes] | tuple[tuple[bytes, bytes], ...]:
        if isinstance(index, slice):
            return tuple(self[k] for k in range(*index.indices(len(self))))
        k = operator.index(index)
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError("merge index out of range")
        left, right = struct.unpack_from("<ii", self.pairs, 8 * k)
        tokens = self._by_id()
        return tokens[left], tokens[right]

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        tokens = self._by_id()
        for left, right in struct.iter_unpack("<ii", self.pairs):
            yield tokens[left], tokens[right]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RankedMerges) and other.pairs == self.pairs and other.vocab is self.vocab:
            return True
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(mine == theirs for mine, theirs in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # (a sequence compared by content, as a list)

    def __reduce__(self) -> tuple[type[RankedMerges], tuple[bytes, dict[bytes, int]]]:
        return (RankedMerges, (self.pairs, self.vocab))

    def __repr__(self) -> str:
        return f"RankedMerges(<{len(self)} merges>)"


@dataclass(frozen=True)
class AddedToken:
    """A token matched in the raw text before pre-tokenization (``added_tokens`` of tokenizer.json)."""

    id: int
    content: str
    special: bool = True
    normalized: bool = False
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False


@dataclass(frozen=True)
class TokenizerSpec:
    """A byte-level BPE tokenizer: vocabulary and merges in raw bytes, and the pipeline around them.

    ``merges`` are in rank order (rank = index), kept as a tuple whatever the loader passed (a
    tokenizer holds its spec, and the garbage collector walks a list of 280K merges at every full
    collection, where it stops tracking a tuple of them at its first pass), or a ``RankedMerges``,
    which is what ``peek2.formats.load_cache.load`` gives every loaded tokenizer. ``prefix_ids``/``suffix_ids``
    are what the post-processor adds around a single sequence when ``add_special_tokens`` is true.
    ``trim_offsets`` is a ``ByteLevel`` post-processor's ``(trim_offsets, add_prefix_space)``: whether
    the offsets of a token leave out its leading and trailing spaces, and whether a first token's
    one leading space is kept (``Tokenizer.encode_with_offsets``); ``trim_again``, each later step of a
    post-processor ``Sequence`` that trims them again, from the spans the one before left, as
    ``(add_prefix_space, whether a RobertaProcessing before it put its cls token first)``. ``prefix_space`` is a ``ByteLevel``
    pre-tokenizer's ``add_prefix_space``: a space goes before each text segment (the normalized
    text between two added tokens) that does not start with one, where it spans the segment's
    first character. ``added_as_utf8``: an added token's bytes are its text's UTF-8, as tiktoken
    decodes a special token, not its characters read through the byte-level alphabet, as tokenizers
    decodes one ("‹|\xe9|>" is "<|\ufffd|>" there). ``notices``: what the loader found that
    the user should hear of (the file's ids of its added tokens are not the ones tokenizers gives),
    without the source: a ``Tokenizer`` gives each as a warning when it is made, so that a load
    from the cache warns as the first load did.
    """

    family: str
    vocab: dict[bytes, int]
    merges: Sequence[tuple[bytes, bytes]]
    ignore_merges: bool = False
    added_tokens: list[AddedToken] = field(default_factory=list)
    normalizer: str | None = None
    prefix_ids: list[int] = field(default_factory=list)
    suffix_ids: list[int] = field(default_factory=list)
    byte_fallback: bool = False
    unk_token: str | None = None
    fuse_unk: bool = False
    source: str = ""
    trim_offsets: tuple[bool, bool] = (False, False)
    trim_again: tuple[tuple[bool, bool], ...] = ()
    prefix_space: bool = False
    added_as_utf8: bool = False
    notices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.merges, (tuple, RankedMerges)):
            object.__setattr__(self, "merges", tuple(self.merges))  # (frozen: set once, here)
