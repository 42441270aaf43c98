"""What a loader hands the engine: a byte-level BPE tokenizer as plain data.

Loaders (``peek2.formats``) read files and validate them; the engine
(``peek2.tokenizer``) builds from a ``TokenizerSpec`` and never reads files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


class TokenizerFormatError(ValueError):
    """A tokenizer file that is malformed, truncated, or missing a field (the message names it)."""


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

    ``merges`` are in rank order (rank = index), kept as a tuple whatever the loader passed: a
    tokenizer holds its spec, and the garbage collector walks a list of 280K merges at every full
    collection, where it stops tracking a tuple of them at its first pass. ``prefix_ids``/``suffix_ids``
    are what the post-processor adds around a single sequence when ``add_special_tokens`` is true.
    ``trim_offsets`` is a ``ByteLevel`` post-processor's ``(trim_offsets, add_prefix_space)``: whether
    the offsets of a token leave out its leading and trailing spaces, and whether a first token's
    one leading space is kept (``Tokenizer.encode_with_offsets``). ``prefix_space`` is a ``ByteLevel``
    pre-tokenizer's ``add_prefix_space``: a space goes before each text segment (the normalized
    text between two added tokens) that does not start with one, where it spans the segment's
    first character.
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
    prefix_space: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.merges, tuple):
            object.__setattr__(self, "merges", tuple(self.merges))  # (frozen: set once, here)
