"""``Tokenizer``: the whole pipeline of a byte-level BPE tokenizer.json, bit-exact with HuggingFace tokenizers.

Pipeline of ``encode`` (the reference's order):
1. added tokens are found in the raw text (leftmost-longest; ``lstrip``/``rstrip``/
   ``single_word`` as the reference applies them) and become their ids;
2. the rest is normalized (NFC for Qwen, with the Unicode version the reference uses);
3. Peek2 pre-tokenization and byte-pair merges (``peek2.bpe.merger``);
4. the post-processor's ids (Llama-3.1's ``<|begin_of_text|>``) when ``add_special_tokens``.

``decode`` maps ids back to bytes (the byte-level decoder) and decodes UTF-8 with
U+FFFD for invalid sequences, like the reference.

Memory and the garbage collector: every full collection of the process walks each container
the collector tracks, item by item. A tokenizer's large tables are therefore tuples of atomic
objects (the ids' bytes here, the merges in ``TokenizerSpec``, the shared ints of
``peek2.bpe.merger.shared_ints``), which the collector stops tracking at its first pass, or native
arrays it never sees. Measured: a full ``gc.collect()`` took 1.0 ms, and 9.6 ms with a Llama-3.1
and a Qwen3 tokenizer loaded when those three were lists; 1.0 ms now (an event loop stalls for a
full collection, whatever triggered it). ``tests/test_tokenizer.py`` checks that a tokenizer
holds no tracked container of more than 10,000 items.
"""

from __future__ import annotations

import errno
import importlib
import operator
import os
import pickle
import sys
import threading
import types
import warnings
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NamedTuple, Sequence, SupportsIndex, cast


from librt.strings import BytesWriter, write_i16_le, write_i32_le
from librt.vecs import vec
from mypy_extensions import i64

from peek2.bpe import huge_pages
from peek2.extras import import_optional
from peek2.bpe.decode import NO_WORDS, PlainDecode, ids_bytes, ids_texts, total_ids
from peek2.bpe.engine_tables import engine_tables, largest_spec_id
from peek2.bpe.growing_piece import LongPieces
from peek2.bpe.locked_engine import LockedEngine, engine_is_compiled
from peek2.bpe.merge_table import ID_BITS, MergeTable
from peek2.bpe.merger import BytePairEncoder, OrdinaryEncode, PlainEncode, WholeChars
from peek2.bpe.piece_cache import MAX_CACHE_SIZE
from peek2.bpe.merger import as_flag as _flag
from peek2.bpe.offsets import char_spans, token_lengths, trim_spans
from peek2.bpe.vocab import TokenToId, id_table
from peek2.formats import hf_json
from peek2.formats.load_cache import Loaded, file_stamp, same_content
from peek2.formats.byte_level import to_bytes
from peek2.argument_checks import check_count, check_ids, check_texts, is_array, plain_int, text_error
from peek2.normalize.added_tokens import WHITESPACE, AddedTokenMatcher, ContentSearch
from peek2.normalize.aligned import nfc_aligned
from peek2.normalize.nfc import nfc
from peek2.pretokenize.families import FAMILIES
from peek2.pretokenize.pattern import Peek2Pattern
from peek2.pretokenize.scanner import first_surrogate, surrogate_error
from peek2.spec import AddedToken, TokenizerFormatError, TokenizerSpec

if TYPE_CHECKING:  # the serving modules are imported when first used
    from peek2.corpus.batches import BatchFunction
    from peek2.serving.incremental import PromptCache, PromptSession
    from peek2.serving.streaming import StreamDecoder, StreamEncoder

DEFAULT_CACHE_SIZE = 1 << 20
"""Pieces kept in the piece cache (each at most 128 characters): 1,048,576.

The slots grow with the pieces kept (16 bytes a slot, twice as many slots as pieces) and the ids
and packed characters take 64 words a piece on average and 64 MB at most: at most 96 MB for the
default, 0.8-2.9 MB on a megabyte of ordinary text, 35 MB after 100 MB of mixed documents of 15
languages (300K distinct pieces). Large, because most pieces of a corpus or a stream of prompts
come back, but not within a few thousand pieces: encode_batch on new documents was 1.5x faster
than with 16,384 pieces (``scripts/bench_mixed.py``'s sets, after two sets seen), and one
megabyte at a time the same within the noise. Besides the cache, an engine keeps the ids buffer
of its largest text so far, up to 8 MB, and a process keeps one int object per vocabulary id (4 MB
for Llama-3), shared by every tokenizer.
"""

_NO_IDS: list[int] = []  # an empty head for encode_list, which does not change it



@dataclass(frozen=True)
class Encoding:
    """Token ids and the ``(start, end)`` character span of each in the original text."""

    ids: list[int]
    offsets: list[tuple[int, int]]


class FlatBatch(NamedTuple):
    """``Tokenizer.encode_batch_flat``'s result: text ``k`` is ``ids[offsets[k]:offsets[k + 1]]``."""

    ids: Any  # numpy.ndarray of the dtype asked for
    offsets: Any  # numpy.ndarray of int64, one more than the texts


def _write_id(out: BytesWriter, token_id: int, wide: bool) -> None:
    if wide:
        write_i32_le(out, token_id)
    else:
        write_i16_le(out, token_id - 65536 if token_id >= 32768 else token_id)


PATH_ENDINGS = (".json", ".model", ".tiktoken", ".bpe", ".txt")  # from_pretrained: a name ending so is a file's


class Tokenizer:
    """A byte-level BPE tokenizer (Llama-3, Qwen2/2.5/3 style) built from a ``TokenizerSpec``.

    >>> tok = Tokenizer.from_file(DATA + "/tokenizers/llama3.1/tokenizer.json")  # doctest: +SKIP
    >>> tok.encode("Hello world")  # doctest: +SKIP
    [128000, 9906, 1917]
    """

    # (declared: ``__init__`` may take them from another tokenizer before setting its own)
    _engine: BytePairEncoder
    _long_pieces: LongPieces
    _bytes_are_text: bool
    _symbol_sizes: list[int]
    _vocab_bytes: tuple[bytes | None, ...]
    _vocab_top: int
    _longest_token: int

    def __init__(
        self,
        spec: TokenizerSpec,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        _source: tuple[object, ...] = (),
        _loaded: Loaded | None = None,
        _engine_of: Tokenizer | None = None,
    ) -> None:
        if not isinstance(spec, TokenizerSpec):
            raise TypeError(f"spec must be a TokenizerSpec, not {type(spec).__name__}")
        check_count(cache_size, "cache_size", 0, MAX_CACHE_SIZE, "pieces")
        self.spec = spec
        self.family = spec.family
        self.pattern = Peek2Pattern(spec.family)
        self._source = _source
        # What pickling names (the files, their stamps before the read, the digest of what was read).
        self._files: tuple[str, ...] = _loaded.files if _loaded is not None else ()
        self._stamps: tuple[tuple[int, int], ...] = _loaded.stamps if _loaded is not None else ()
        self._digest = _loaded.digest if _loaded is not None else ""
        self._options = _loaded.options if _loaded is not None else ""
        _tables = _loaded.tables if _loaded is not None else None
        vocab = spec.vocab
        # (the same vocabulary as _engine_of's: its largest id is known)
        self._vocab_top = _engine_of._vocab_top if _engine_of is not None else max(vocab.values(), default=-1)
        max_id = largest_spec_id(spec, self._vocab_top)  # (raises where an id is too large)
        if _engine_of is not None:  # (its vocabulary's bytes by id: 8 ms of Llama-3's 15 here)
            id_bytes = list(_engine_of._vocab_bytes[: max_id + 1])
            id_bytes += [None] * (max_id + 1 - len(id_bytes))
            self._longest_token = _engine_of._longest_token
        else:
            id_bytes, self._longest_token = id_table(vocab, max_id + 1)
        vocab_bytes = tuple(id_bytes)  # (the vocabulary's alone, before the added tokens)
        self._vocab_bytes = vocab_bytes
        self._added: list[AddedToken] = list(spec.added_tokens)
        # Added tokens whose id is also a vocabulary token's: their contents by id (trim_offsets
        # tells a match of the added token from the vocabulary token by the text it spans).
        self._shared_ids: dict[int, list[str]] = {}
        normalize = _normalizer(spec.normalizer)
        for added in self._added:
            # The byte-level decoder maps a token's characters back to bytes when it can, else its
            # UTF-8; a normalized token's characters after normalization, as tokenizers decodes it
            # (Qwen's NFC and a token "e\u0301": "\xe9", the byte 0xE9; a bug hunt).
            content = normalize(added.content) if added.normalized else added.content
            data = None if spec.added_as_utf8 else to_bytes(content)
            if data is None:
                try:
                    data = content.encode("utf-8")
                except UnicodeEncodeError as error:  # (tokenizers refuses the file's JSON: a lone surrogate escape)
                    raise TokenizerFormatError(
                        f"{spec.source}: added token {added.content!r} (id {added.id}) holds a lone surrogate"
                        f" at index {error.start}: not a Unicode scalar, so not text"
                    ) from None
            held = vocab_bytes[added.id] if added.id < len(vocab_bytes) else None
            if held is not None and held != data:
                # (a tiktoken special token given a rank's id decoded that rank as itself; a bug
                # hunt. Two added tokens may share an id: o200k_harmony's reserved and named ones.)
                raise TokenizerFormatError(f"{spec.source}: added token {added.content!r} has id {added.id}, the id of the token {held!r}")
            if held is not None:
                self._shared_ids.setdefault(added.id, []).append(added.content)
            id_bytes[added.id] = data
        for token_id in (*spec.prefix_ids, *spec.suffix_ids):
            if id_bytes[token_id] is None:  # (a post-processor's id of no token: decoded as nothing, as tokenizers does)
                id_bytes[token_id] = b""
        # A tuple: the garbage collector stops tracking it at its first pass (module notes).
        self._id_bytes: tuple[bytes | None, ...] = tuple(id_bytes)
        self._skipping: tuple[int, bytes] | None = None  # made by the first decode that skips (``_skip_mask``)
        self._normalize: Callable[[str], str] = normalize
        self._normalize_aligned: Callable[[str], tuple[str, list[int]]] = (
            nfc_aligned if spec.normalizer == "NFC" else lambda text: (text, list(range(len(text))))
        )
        self._token_lengths: vec[i64] | None = None
        if _engine_of is not None:
            # The same model with other added tokens (``with_added_tokens``): the engine and what
            # is made from the vocabulary are its, shared. The engine knows nothing of added
            # tokens, and an added token with a vocabulary token's id has that token's bytes
            # (checked above), so the bytes of the byte tokens are the same too.
            self._bytes_are_text = _engine_of._bytes_are_text
            self._symbol_sizes = _engine_of._symbol_sizes
            self._engine = _engine_of._engine
            self._long_pieces = _engine_of._long_pieces
        else:
            family = FAMILIES[spec.family]
            tables = _tables if _tables is not None else engine_tables(spec)
            merges = tables.merge_table or MergeTable(tables.pair_keys, tables.pair_values)
            # Whether the bytes of a text's ids are its UTF-8 (every byte is its own token): spans then
            # follow from the tokens' lengths (``_segment_offsets``; lengths made at its first call).
            self._bytes_are_text = all(self._id_bytes[token_id] == bytes([byte]) for byte, token_id in enumerate(tables.byte_ids))
            # How many bytes of the merged symbols each byte of a text starts as: 1, or the length of
            # the unk token standing for a byte with no token of its own (offsets: ``_piece_offsets``).
            self._symbol_sizes = [len(self._id_bytes[token_id] or b"") for token_id in tables.byte_ids]
            self._engine = BytePairEncoder(
                vec[i64](tables.byte_ids),
                merges,
                tables.text_vocab,
                spec.ignore_merges,
                family.stage2,
                family.rules,
                cache_size,
                WholeChars(*tables.whole_chars),
                tables.not_self_merging,
            )
            huge_pages.advise(self._engine.tables())
            if not engine_is_compiled():  # (threads sharing a plain-Python engine: see locked_engine)
                self._engine = cast(BytePairEncoder, LockedEngine(self._engine))
            self._long_pieces = LongPieces(self._engine, vocab, self._id_bytes)
            self._engine.long_pieces = self._long_pieces.block
        self._raw_matcher = AddedTokenMatcher([t for t in self._added if not t.normalized])
        self._normalized_matcher = AddedTokenMatcher([t for t in self._added if t.normalized], self._normalize)
        for notice in spec.notices:  # (here, not in the loader: a load from the cache warns too)
            warnings.warn(f"{spec.source}: {notice}", stacklevel=3)
        _warn_of_tokens_alike(self._added, self._normalize, spec.source)
        # One of these occurs wherever an added token starts, raw or normalized (a superset is
        # safe): "<|", not "<", for Llama-3 and Qwen, so source code's "<" costs no matcher call.
        needles = self._raw_matcher.needles | self._normalized_matcher.needles | {t.content[:2] for t in self._added if t.content}
        self._needles = [(needle[0], needle) for needle in sorted(needles)]
        # Whether a whole added token occurs, asked in C when a needle does (text that only starts
        # like one, "<|im_start|" or "<think", then takes the plain path): every content, raw and
        # normalized, in one trie (the long ones alone: see ContentSearch).
        occurs = ContentSearch(set(self._raw_matcher.by_content) | set(self._normalized_matcher.by_content))
        self._any_token = None if occurs.empty else occurs.occurs
        # A normalizer may turn non-ASCII text into a normalized token's characters (NFC: U+212A
        # KELVIN SIGN -> "K"), so the raw text's needles do not rule those tokens out.
        self._normalized_tokens = bool(self._normalized_matcher.by_content) and spec.normalizer is not None
        self._ascii_is_normal = spec.normalizer in (None, "NFC")  # NFC leaves ASCII unchanged
        self._normalizes = spec.normalizer is not None
        # Whether the raw matcher's segments are all an encode needs (no normalizer, no normalized
        # token, no space put before each segment): they then go to the engine as spans, in one
        # compiled loop (``BytePairEncoder.encode_spans``).
        self._raw_segments = not self._normalizes and not self._normalized_matcher.by_content and not spec.prefix_space
        self._prefix_ids = list(spec.prefix_ids)
        self._prefix_space = spec.prefix_space
        self._suffix_ids = list(spec.suffix_ids)
        # (A subclass's own encode, or a patch of the class made before this tokenizer, stays in
        # charge: compared with the class's own function, _OWN_ENCODE, not with Tokenizer.encode,
        # which a patch replaces too; a bug hunt.)
        if type(self).encode is _OWN_ENCODE:
            # The usual call runs compiled (PlainEncode, in place of this instance's method); text
            # where an added token may occur comes back to the method below.
            self.__dict__["encode"] = PlainEncode(
                self._engine,
                self._needles,
                self._normalized_tokens,
                self._normalize if self._normalizes else None,
                self._ascii_is_normal,
                self._prefix_ids,
                self._suffix_ids,
                types.MethodType(_OWN_ENCODE, self),
                self._any_token,
                self._prefix_space,
            )
        # (A subclass's own decode_bytes stays in charge: the method path.)
        plain_decode = type(self).decode_bytes is _OWN_DECODE_BYTES
        self._plain_decode = PlainDecode(self._id_bytes, self) if plain_decode else None
        self._token_to_id = TokenToId([(t.content, t.id) for t in self._added], spec.vocab, self)
        if type(self).token_to_id is _OWN_TOKEN_TO_ID:  # (compiled, as encode: a subclass's own stays in charge)
            self.__dict__["token_to_id"] = self._token_to_id
        if type(self).encode_ordinary is _OWN_ENCODE_ORDINARY:
            ordinary_normalize = self._normalize if self._normalizes else None
            self.__dict__["encode_ordinary"] = OrdinaryEncode(self._engine, ordinary_normalize, self._ascii_is_normal, self._prefix_space, self)

    # ==== Loading ====

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE) -> Tokenizer:
        """Load a HuggingFace ``tokenizer.json``.

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: a folder (``Tokenizer.from_pretrained`` takes one).
            TokenizerFormatError (ValueError): malformed or truncated file, or a missing field.
            NotImplementedError: a model or pipeline step peek2 does not implement (named).
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        from peek2.formats import load_cache

        loaded = load_cache.load([path], "tokenizer.json", lambda: hf_json.load_file(path))
        return cls(loaded.spec, cache_size=cache_size, _source=("file", os.path.abspath(path)), _loaded=loaded)

    @classmethod
    def from_pretrained(cls, name_or_dir: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE) -> Tokenizer:
        """Load a named model (``"llama3"``, ``"qwen2.5"``, ... see ``peek2.models``), a local folder
        holding a tokenizer.json, or a HuggingFace hub repository through ``huggingface_hub``
        (its cache, or the network) when that package is installed. A folder holding a
        tokenizer.json wins over a model of the same name, as in transformers.

        Raises:
            peek2.models.ModelNotFoundError (LookupError): a named model with no files on this machine.
            FileNotFoundError: a missing path (a name that starts with "/", "." or "~", holds a
                backslash, or ends like a tokenizer file: never a hub repository id).
            ValueError: not a named model, a local path, or a hub repository id ("org/name").
            OSError: a hub repository whose tokenizer.json could not be fetched (huggingface_hub's
                own errors, such as ``RepositoryNotFoundError``, or ``LocalEntryNotFoundError``
                offline when its cache does not hold the file).
        """
        from peek2 import models

        if not isinstance(name_or_dir, (str, os.PathLike)):
            raise TypeError(f"name_or_dir must be a str or os.PathLike, not {type(name_or_dir).__name__}")
        name = os.fspath(name_or_dir)
        if name in models.MODELS and os.path.isfile(os.path.join(name, "tokenizer.json")):
            # A folder of a model's name holding a tokenizer.json (``save_pretrained("qwen3")``) is
            # what transformers loads, and what a path option means: it wins over the named model
            # (Qwen3's file in ./llama3 gave Llama-3's ids, silently; a bug hunt).
            name = os.path.join(os.curdir, name)
        return cls._load_pretrained(name, cache_size)

    @classmethod
    def _load_pretrained(cls, name: str, cache_size: int = DEFAULT_CACHE_SIZE) -> Tokenizer:
        """``from_pretrained`` where ``name`` is a model's name if it is one (``--model``, an unpickled named model)."""
        from peek2 import models

        if name in models.MODELS or os.path.exists(name):
            source = models.resolve_model(name)
            # A path is kept absolute; a model's name stays a name (resolved again where unpickled).
            kept = name if name in models.MODELS else os.path.abspath(name)
            from peek2.formats import load_cache

            # (whether a rank file is gunzipped follows its name, not its bytes: part of the key, as
            # in from_tiktoken; a copy of a .gz file under another name loaded from the cache only)
            gunzipped = [os.fspath(f).endswith(".gz") for f in source.files]
            options = f"{source.kind} {source.rank_file!r} {source.replaced_tokens!r} gz={gunzipped}"
            if source.kind == "tokenizer.json" and source.rank_file is None and not source.replaced_tokens and not any(gunzipped):
                # Read as from_file reads it, so named as it names it: one cache entry, and one
                # digest for a resume (a corpus run begun with the file and resumed with its
                # folder was refused, "the tokenizer differs"; a bug hunt).
                options = "tokenizer.json"
            loaded = load_cache.load(source.files, options, source.load)
            if source.kind == "tokenizer.json":
                from peek2.formats.hf_config import warn_of_differences

                warn_of_differences(source.path, loaded.spec)
            return cls(loaded.spec, cache_size=cache_size, _source=("pretrained", kept), _loaded=loaded)
        if name.startswith(("/", ".", "~")) or "\\" in name or name.endswith(PATH_ENDINGS):
            # (a path that is missing, not a hub repository: "./tokenizer.json" went to the hub as
            # an invalid id, "data/tokenizer.json" retried the hub offline for 26 s; a bug hunt)
            raise FileNotFoundError(errno.ENOENT, f"no such file or folder (and not a named model: {', '.join(models.MODELS)})", name)
        if name.count("/") != 1:
            raise ValueError(
                f"{name!r} is not a named model ({', '.join(models.MODELS)}), an existing path, "
                "nor a hub repository id of the form 'org/name'"
            )
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise ValueError(
                f"{name!r} is not a named model ({', '.join(models.MODELS)}) nor a local path; "
                "to load a hub repository install huggingface_hub"
            ) from None
        return cls.from_file(hf_hub_download(repo_id=name, filename="tokenizer.json"), cache_size=cache_size)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike[str],
        *,
        pattern: str = "llama3",
        special_tokens: dict[str, int] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> Tokenizer:
        """Load a tiktoken rank file (``.tiktoken``, Llama-3's ``tokenizer.model``), tiktoken's way.

        The merges are rebuilt from the ranks (every split of each token into two tokens, by rank),
        and a piece that is a whole token is that token, as in tiktoken; ``special_tokens`` maps
        content -> id. For Meta's Llama-3 ``tokenizer.model`` with its special tokens, the ids equal
        those of a Llama-3 tokenizer.json whose model has ``ignore_merges: true``, as tiktoken takes
        a piece that is a whole token whole (Llama-3's and 3.1's files; the Llama-3.2 tokenizer.json
        beside this project's ``tokenizer.model`` has ``false``, and gives other ids for some pieces).

        ``pattern`` is a family name, a tiktoken encoding's name (``"cl100k_base"``, ``"o200k_base"``,
        ``"o200k_harmony"``, ``"r50k_base"``, ``"p50k_base"``) or its own ``pat_str``: cl100k_base's
        (family ``cl100k``: tiktoken's ``\\s++$`` keeps a whitespace run that ends the text as one
        piece, where tokenizers' files of cl100k split it after its last newline; with cl100k_base's
        ranks the ids agree anyway, no whitespace token going on past a newline without ending in
        one), o200k_base's and
        o200k_harmony's (family ``o200k``), or r50k_base's, p50k_base's and gpt2's (family ``gpt2``:
        GPT-2's pattern in tiktoken's spelling, the same pieces).
        """
        from peek2.formats.tiktoken_file import converter_merges, load_ranks, special_added_tokens

        if not isinstance(path, (str, os.PathLike)):  # (an int was opened as a file descriptor, and closed)
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        from peek2.pretokenize.families import find_tiktoken_family

        if not isinstance(pattern, str):  # (the compiled lookup's own message named no parameter: "str object expected")
            raise TypeError(f"pattern must be a family name, a tiktoken encoding's name or its pat_str (str), not {type(pattern).__name__}")
        family = find_tiktoken_family(pattern).name
        specials = _special_tokens(special_tokens) or {}
        from peek2.formats import load_cache

        def build() -> TokenizerSpec:
            ranks = load_ranks(path)
            return TokenizerSpec(
                family=family,
                vocab=ranks,
                merges=converter_merges(ranks),
                ignore_merges=True,
                added_tokens=special_added_tokens(specials),
                source=os.fspath(path),
                added_as_utf8=True,
            )

        # (whether the file is gunzipped follows its name, not its bytes: part of the entry's key)
        gunzipped = os.fspath(path).endswith(".gz")
        loaded = load_cache.load([path], f"tiktoken {family} {list(specials.items())!r} gz={gunzipped}", build)
        # (The special tokens in their order, which decides the text of an id two of them share, as
        # in tiktoken: a pickle rebuilt them sorted, and its digest differed: refused. A bug hunt.)
        source = ("tiktoken", os.path.abspath(path), family, tuple(specials.items()))
        return cls(loaded.spec, cache_size=cache_size, _source=source, _loaded=loaded)

    @classmethod
    def from_gpt2_files(
        cls,
        encoder_json: str | os.PathLike[str],
        vocab_bpe: str | os.PathLike[str],
        *,
        special_tokens: dict[str, int] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> Tokenizer:
        """Load GPT-2's original ``encoder.json`` + ``vocab.bpe`` (or a HuggingFace folder's
        ``vocab.json`` + ``merges.txt``: the same formats), split with GPT-2's pattern.

        The ids are those of ``tokenizers`` with ``models.BPE.from_file(vocab, merges)`` and
        ``ByteLevel(add_prefix_space=False)``, and of tiktoken's ``gpt2``/``r50k_base``.
        ``special_tokens`` (content -> id) defaults to ``<|endoftext|>`` and its id.

        Raises:
            FileNotFoundError: a file is missing.
            TokenizerFormatError (ValueError): malformed content (the file, and the line of a merge).
        """
        from peek2.formats.gpt2_files import load_files

        for path in (encoder_json, vocab_bpe):
            if not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"paths must be str or os.PathLike, not {type(path).__name__}")
        # (a list was a bare AttributeError, and a negative id said it was another token's; a bug hunt)
        checked = _special_tokens(special_tokens)
        from peek2.formats import load_cache

        options = f"gpt2 {list(checked.items()) if checked is not None else None!r}"
        loaded = load_cache.load([encoder_json, vocab_bpe], options, lambda: load_files(encoder_json, vocab_bpe, checked))
        specials = tuple(checked.items()) if checked is not None else None
        source = ("gpt2", os.path.abspath(encoder_json), os.path.abspath(vocab_bpe), specials)
        return cls(loaded.spec, cache_size=cache_size, _source=source, _loaded=loaded)

    @classmethod
    def from_str(cls, json_text: str, *, cache_size: int = DEFAULT_CACHE_SIZE) -> Tokenizer:
        """Build from the text of a ``tokenizer.json``."""
        if not isinstance(json_text, str):
            raise TypeError(f"json_text must be str, not {type(json_text).__name__}")
        from peek2.formats import load_cache

        # (kept in the load cache as a file's load is: the transformers patch makes its engine
        # from the backend's JSON in every process, 1.0 s of its 1.25 s first call)
        loaded = load_cache.load_text(json_text, "tokenizer.json text", lambda: hf_json.load_str(json_text))
        return cls(loaded.spec, cache_size=cache_size, _loaded=loaded)

    # ==== Encoding ====

    def encode(self, text: str, add_special_tokens: bool = True, *, split_special_tokens: bool = False) -> list[int]:
        """The ids of ``text``, exactly as ``tokenizers.Tokenizer.encode(text, add_special_tokens).ids``.

        ``split_special_tokens=True`` treats special-token strings in ``text`` as plain text
        (for untrusted input: "<|eot_id|>" typed by a user is not the end-of-turn token);
        non-special added tokens are still matched, as in the reference's ``encode_special_tokens``.

        Raises:
            TypeError: ``text`` is not a str.
            ValueError: ``text`` holds a lone surrogate.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        # (Checked here too: a subclass's super().encode comes here without PlainEncode's checks;
        # "no" added the special tokens and a NumPy bool raised mypyc's error; a bug hunt.)
        if add_special_tokens is not True and add_special_tokens is not False:
            add_special_tokens = _flag(add_special_tokens, "add_special_tokens")  # type: ignore[unreachable]  # (typed bool, passed anything)
        if split_special_tokens is not True and split_special_tokens is not False:
            split_special_tokens = _flag(split_special_tokens, "split_special_tokens")  # type: ignore[unreachable]
        try:
            if self._plain(text):
                # No added token can occur: skip the segment lists (most calls, and all short texts).
                normal = self._normalize(text) if self._normalizes and not (self._ascii_is_normal and text.isascii()) else text
                if self._prefix_space:
                    normal = _spaced(normal)
                out = self._engine.encode_list(normal, self._prefix_ids if add_special_tokens else _NO_IDS)
            elif self._raw_segments:
                out = list(self._prefix_ids) if add_special_tokens else []
                cut = self._raw_matcher.cut(text, split_special_tokens)
                if cut is not None:
                    self._engine.encode_cut(cut, self._raw_matcher.ids, out)
                else:
                    self._engine.encode_spans(text, self._raw_matcher.spans(text, split_special_tokens), out)
            else:
                out = list(self._prefix_ids) if add_special_tokens else []
                for segment, token_id in self._segments(text, split_special_tokens):
                    if token_id >= 0:
                        out.append(token_id)
                    else:
                        self._engine.encode(segment, out)
        except ValueError as error:  # a lone surrogate, at its index in a segment: give it in text
            raise surrogate_error(text, error) from None
        if add_special_tokens and self._suffix_ids:
            out.extend(self._suffix_ids)
        return out

    def encode_with_offsets(
        self, text: str, add_special_tokens: bool = True, *, split_special_tokens: bool = False
    ) -> Encoding:
        """The ids of ``text`` with the character span of each, as the reference's ``Encoding.offsets``.

        Spans are in ``text`` as given, through the normalizer (Qwen's NFC) the way the reference
        aligns them. A token that holds part of a character's bytes spans that whole character;
        the tokens added by the post-processor span ``(0, 0)``. A separate call, so that
        ``encode`` stays cheap.

        >>> tok.encode_with_offsets("Hi there", add_special_tokens=False)  # doctest: +SKIP
        Encoding(ids=[13347, 1070], offsets=[(0, 2), (2, 8)])
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        add_special_tokens = _flag(add_special_tokens, "add_special_tokens")
        split_special_tokens = _flag(split_special_tokens, "split_special_tokens")
        try:
            return self._encode_with_offsets(text, add_special_tokens, split_special_tokens)
        except ValueError as error:  # (see encode)
            raise surrogate_error(text, error) from None

    def _encode_with_offsets(self, text: str, add_special_tokens: bool, split_special_tokens: bool) -> Encoding:
        ids: list[int] = list(self._prefix_ids) if add_special_tokens else []
        offsets: list[tuple[int, int]] = [(0, 0)] * len(ids)
        # (Spans, not lengths: after an rstrip token the next span may start inside it.)
        for position, stop, token_id in self._raw_matcher.spans(text, split_special_tokens):
            if token_id >= 0:
                ids.append(token_id)
                offsets.append((position, stop))
                continue
            raw = text[position:stop]
            # source[k]: index in ``raw`` of normalized character k (None: the same character).
            normalized, source = self._normalize_aligned(raw) if self._normalizes else (raw, None)
            if source is not None and normalized == raw:
                source = None
            for at, end, added_id in self._normalized_matcher.spans(normalized, split_special_tokens):
                segment = normalized[at:end]
                if added_id >= 0:
                    ids.append(added_id)
                    if source is None:
                        offsets.append((position + at, position + at + len(segment)))
                    else:
                        offsets.append((position + source[at], position + source[at + len(segment) - 1] + 1))
                elif self._prefix_space and segment and segment[0] != " ":
                    # The space put before the segment spans its first character, as in tokenizers.
                    where = list(range(at, at + len(segment))) if source is None else source[at : at + len(segment)]
                    self._segment_offsets(" " + segment, [where[0], *where], position, ids, offsets)
                elif source is None:
                    self._segment_offsets(segment, None, position + at, ids, offsets)
                else:
                    self._segment_offsets(segment, source[at : at + len(segment)], position, ids, offsets)
        if self.spec.trim_offsets[0]:
            first = len(self._prefix_ids) if add_special_tokens else 0
            self._trim_offsets(text, ids, offsets, first)
        if add_special_tokens:
            ids.extend(self._suffix_ids)
            offsets.extend([(0, 0)] * len(self._suffix_ids))
        return Encoding(ids, offsets)

    def _trim_offsets(self, text: str, ids: list[int], offsets: list[tuple[int, int]], first: int) -> None:
        """A ``ByteLevel`` post-processor's ``trim_offsets``, as tokenizers applies it to the tokens of
        the text (``ids[first:]``): a token's span leaves out its leading and trailing spaces (``Ġ``
        in the vocabulary's alphabet, and whitespace in the text an added token matched, which
        holds what its lstrip or rstrip took in), except the one leading space of a first token
        when the processor has ``add_prefix_space``. Each step of ``trim_again`` trims again, by the
        token's spaces from the span the step before left, as tokenizers' steps do: a first token is
        the encoding's first (the text's, or cls where a RobertaProcessing came before the step) or
        one starting at 0."""
        steps = ((self.spec.trim_offsets[1], False), *self.spec.trim_again)
        added = {token.id for token in self._added}
        # A normalized token's spaces are counted in the text it matched after normalization (the
        # whitespace its lstrip or rstrip took, then its content), as tokenizers counts them, and
        # taken off its span in the raw text: NFC makes "G" + U+0307 the byte-level space "Ġ", and
        # the raw span of "<t>Ġ" in "a<t>G\u0307" is "<t>G" (a bug hunt).
        normalized: dict[int, str] = {}
        if self._normalizes:
            for token in self._added:
                if token.normalized:
                    normalized.setdefault(token.id, token.content)
        shared = self._shared_ids
        for k in trim_spans(ids, offsets, first, self._id_bytes, added, list(steps)):  # (the added tokens' left here)
            # (An id an added token shares with a vocabulary token is the vocabulary token where
            # the merger made it: GPT-2's "\t" is token 197, "ĉ", which a file may also add; its
            # tab was trimmed as an added token's whitespace. A bug hunt.)
            if ids[k] in added and (ids[k] not in shared or any(c in text[offsets[k][0] : offsets[k][1]] for c in shared[ids[k]])):
                content = text[offsets[k][0] : offsets[k][1]]
                token_content = normalized.get(ids[k])
                if token_content is not None:
                    content = _as_matched(content, token_content)
                leading = len(content) - len(content.lstrip(_TRIMMED))
                trailing = len(content) - len(content.rstrip(_TRIMMED))
            else:
                data = self._id_bytes[ids[k]] or b""
                leading = len(data) - len(data.lstrip(b" "))
                trailing = len(data) - len(data.rstrip(b" "))
            if leading == 0 and trailing == 0:
                continue
            start, end = offsets[k]
            for keep_prefix_space, after_cls in steps:
                if leading > 0:
                    is_first = k == (0 if after_cls else first) or start == 0
                    start = min(start + (0 if is_first and keep_prefix_space and leading == 1 else leading), end)
                if trailing > 0 and end >= trailing:
                    end = max(end - trailing, start)
            offsets[k] = (start, end)

    def _segment_offsets(
        self, segment: str, source: list[int] | None, base: int, ids: list[int], offsets: list[tuple[int, int]]
    ) -> None:
        """Append the ids of ``segment`` (text as the merger sees it) and their spans: character ``c``
        of it is ``base + c`` of the caller's text, or ``base + source[c]`` (see ``char_spans``)."""
        if self._bytes_are_text:
            if self._token_lengths is None:
                self._token_lengths = token_lengths(len(self._id_bytes))
            first, spans_before = len(ids), len(offsets)
            self._engine.encode(segment, ids)
            if char_spans(self._token_lengths, self._id_bytes, ids, first, segment, source, base, offsets):
                return
            del ids[first:], offsets[spans_before:]  # (never, for these vocabularies)
        where = source if source is not None else range(len(segment))
        spans = [(base + k, base + k + 1) for k in where]
        for piece_start, piece_end in self.pattern.split_offsets(segment):
            self._piece_offsets(segment[piece_start:piece_end], piece_start, spans, ids, offsets)

    def _piece_offsets(
        self, piece: str, at: int, spans: list[tuple[int, int]], ids: list[int], offsets: list[tuple[int, int]]
    ) -> None:
        """Append the ids of one piece and the span of each (``at``: the piece's index in ``spans``)."""
        char_of_byte: list[int] = []
        for k, char in enumerate(piece):
            char_of_byte.extend([at + k] * len(char.encode("utf-8")))
        data = piece.encode("utf-8")
        sizes = self._symbol_sizes
        byte = 0
        for token_id in self._engine.piece_ids(piece):
            # A token is the bytes of the symbols it merged, each byte of the text one symbol: it
            # spans the text's bytes whose symbols add up to its length. (An unk token counted as
            # one byte wherever its id came, as a real token or merged with a neighbour: wrong spans
            # or an IndexError; a bug hunt.)
            first = byte
            length = len(self._id_bytes[token_id] or b"")
            while length > 0:
                length -= sizes[data[byte]]
                byte += 1
            ids.append(token_id)
            offsets.append((spans[char_of_byte[first]][0], spans[char_of_byte[byte - 1]][1]))

    def _plain(self, text: str) -> bool:
        """True when no added token can occur in ``text`` (none of their first two characters occur)."""
        if self._normalized_tokens and not text.isascii():
            return False
        for first, needle in self._needles:
            # CPython finds one character with memchr, two 30x slower (0.9 us for 1 KB): first one.
            if first in text and needle in text:
                # Raw text is the normalized text here (ASCII, or no normalized tokens): no whole
                # content in it means no match for either matcher.
                return self._any_token is None or not self._any_token(text)
        return True

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of ``text`` with every added-token string treated as text and nothing added around it."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        out: list[int] = []
        try:
            normal = self._normalize(text)
            self._engine.encode(_spaced(normal) if self._prefix_space else normal, out)
        except ValueError as error:  # (see encode)
            raise surrogate_error(text, error) from None
        return out

    def encode_batch(
        self, texts: Iterable[str], add_special_tokens: bool = True, *, split_special_tokens: bool = False
    ) -> list[list[int]]:
        """``[encode(text) for text in texts]``."""
        if type(texts) is list and not texts and type(add_special_tokens) is bool and type(split_special_tokens) is bool:
            return []  # (the checks below cost 1.3 us, 2.1x tokenizers' empty call; a bug hunt)
        check_texts(texts, "encode_batch")
        # (checked here: a bad flag was blamed on texts[0], and not seen at all in an empty batch)
        add_special_tokens = _flag(add_special_tokens, "add_special_tokens")
        split_special_tokens = _flag(split_special_tokens, "split_special_tokens")
        encode = self.encode
        out: list[list[int]] = []
        for k, text in enumerate(texts):
            try:
                out.append(encode(text, add_special_tokens, split_special_tokens=split_special_tokens))
            except (TypeError, ValueError) as error:  # (which text: encode_batch_flat names it too)
                raise text_error(k, error) from None
        return out

    def encode_batch_flat(
        self,
        texts: Iterable[str],
        add_special_tokens: bool = True,
        *,
        split_special_tokens: bool = False,
        dtype: str = "int32",
    ) -> FlatBatch:
        """The ids of all ``texts`` in one NumPy array, with each text's span in it.

        For data pipelines: ids are written as machine integers (``dtype``: ``"uint16"``,
        ``"int32"``, ``"uint32"`` or ``"int64"``), with no Python int or list a id.

        >>> batch = tok.encode_batch_flat(["Hello world", "", "Hi"], add_special_tokens=False)  # doctest: +SKIP
        >>> batch.ids, batch.offsets  # doctest: +SKIP
        (array([9906, 1917, 13347], dtype=int32), array([0, 2, 2, 3]))

        Text ``k`` is ``ids[offsets[k]:offsets[k + 1]]``, equal to ``encode(texts[k], ...)``. Both
        arrays are the caller's own (writable).

        Raises:
            TypeError: an item of ``texts`` is not a str (its index is named).
            ValueError: a text holds a lone surrogate, or ``dtype`` is not one of the above
                (``"uint16"`` also when the vocabulary has ids of 65,536 and above).
        """
        numpy = import_optional("numpy", "encode_batch_flat")

        check_texts(texts, "encode_batch_flat")
        add_special_tokens = _flag(add_special_tokens, "add_special_tokens")
        split_special_tokens = _flag(split_special_tokens, "split_special_tokens")
        if dtype not in ("uint16", "int32", "uint32", "int64"):
            raise ValueError(f"dtype must be 'uint16', 'int32', 'uint32' or 'int64', not {dtype!r}")
        wide = dtype != "uint16"
        if not wide and self.vocab_size > 1 << 16:
            raise ValueError(f"dtype 'uint16' cannot hold this vocabulary's ids (vocab_size {self.vocab_size:,})")
        out = BytesWriter()
        lengths = self._write_flat(texts, out, wide, add_special_tokens, split_special_tokens)
        ids = numpy.frombuffer(out.getvalue(), dtype="<i4" if wide else "<u2")
        if dtype != ("int32" if wide else "uint16"):
            ids = ids.astype(dtype)
        else:
            # (a view of bytes is read-only, where the other dtypes' copies were writable: one
            # memcpy, about 1% of the encode, for an array a pipeline may change in place; a bug hunt)
            ids = ids.copy()
        offsets = numpy.zeros(len(lengths) + 1, dtype=numpy.int64)
        numpy.cumsum(lengths, out=offsets[1:])
        return FlatBatch(ids, offsets)

    def batch_function(self, text_key: str = "text", output_key: str = "input_ids", *, add_special_tokens: bool = False) -> BatchFunction:
        """A function for ``datasets``: ``ds.map(tok.batch_function(), batched=True, num_proc=N)``.

        It adds ``output_key``: each row's ids as an Arrow list of uint32, made from one flat array
        (no Python int or list a id). It pickles by this tokenizer's source, so ``num_proc``
        workers each load the file once. Needs pyarrow (peek2's ``corpus`` extra).
        """
        from peek2.corpus.batches import BatchFunction

        return BatchFunction(self, text_key, output_key, add_special_tokens=add_special_tokens)

    def _write_flat(
        self,
        texts: Iterable[str],
        out: BytesWriter,
        wide: bool,
        add_special_tokens: bool,
        split_special_tokens: bool,
        first_id: int = -1,
        last_id: int = -1,
    ) -> list[int]:
        """Write the ids of each text to ``out`` (int32 if ``wide``, else uint16); returns each text's number of ids.

        ``first_id`` (if not -1) goes before every text's ids, ``last_id`` after those of every text
        that has ids: the document delimiters of llm.c's shards and of Megatron's ``--append-eod``.
        """
        lengths: list[int] = []
        prefix = self._prefix_ids if add_special_tokens else _NO_IDS
        suffix = self._suffix_ids if add_special_tokens else _NO_IDS
        engine = self._engine
        for k, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{k}] must be str, not {type(text).__name__}")
            count = len(prefix) + len(suffix)
            if first_id >= 0:
                _write_id(out, first_id, wide)
            for token_id in prefix:
                _write_id(out, token_id, wide)
            try:
                if self._plain(text):
                    normal = text if not self._normalizes or (self._ascii_is_normal and text.isascii()) else self._normalize(text)
                    if self._prefix_space:
                        normal = _spaced(normal)
                    count += engine.write_ids(normal, out, wide)
                else:
                    for segment, token_id in self._segments(text, split_special_tokens):
                        if token_id >= 0:
                            _write_id(out, token_id, wide)
                            count += 1
                        else:
                            count += engine.write_ids(segment, out, wide)
            except ValueError as error:
                raise ValueError(f"texts[{k}]: {surrogate_error(text, error)}") from None
            for token_id in suffix:
                _write_id(out, token_id, wide)
            if last_id >= 0 and count:
                _write_id(out, last_id, wide)
                count += 1
            if first_id >= 0:
                count += 1
            lengths.append(count)
        return lengths

    def count(self, text: str, add_special_tokens: bool = True, *, split_special_tokens: bool = False) -> int:
        """``len(encode(text, ...))`` without building the list of ids (for token budgets)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if add_special_tokens is not True and add_special_tokens is not False:  # (no call in the usual case)
            add_special_tokens = _flag(add_special_tokens, "add_special_tokens")  # type: ignore[unreachable]
        if split_special_tokens is not False:
            split_special_tokens = _flag(split_special_tokens, "split_special_tokens")
        total = len(self._prefix_ids) + len(self._suffix_ids) if add_special_tokens else 0
        try:
            if self._plain(text):  # as in encode: most calls
                normal = self._normalize(text) if self._normalizes and not (self._ascii_is_normal and text.isascii()) else text
                return total + self._engine.count(_spaced(normal) if self._prefix_space else normal)
            if self._raw_segments:  # as in encode (it went segment by segment: 1.6-7x encode's time on "<|eot_id|>x" * n; a bug hunt)
                cut = self._raw_matcher.cut(text, split_special_tokens)
                if cut is not None:
                    return total + self._engine.count_cut(cut)
            for segment, token_id in self._segments(text, split_special_tokens):
                total += 1 if token_id >= 0 else self._engine.count(segment)
        except ValueError as error:  # (see encode)
            raise surrogate_error(text, error) from None
        return total

    def _segments(self, text: str, split_special_tokens: bool) -> list[tuple[str, int]]:
        """``text`` cut into normalized text segments (id -1) and added tokens (their id); a text
        segment has the space ``prefix_space`` puts before it."""
        out = self._raw_matcher.split(text, split_special_tokens)
        if self._normalizes or self._normalized_matcher.by_content:
            # (Without a normalizer or normalized tokens the raw split is the answer: a tiktoken
            # rank file's "<|endoftext|>x" * 50,000 took 5.2x tiktoken's time, a third of it in
            # this loop and the second matcher's splits of each text segment; a bug hunt.)
            raw, out = out, []
            for segment, token_id in raw:
                if token_id >= 0:
                    out.append((segment, token_id))
                    continue
                normalized = self._normalize(segment)
                out.extend(self._normalized_matcher.split(normalized, split_special_tokens))
        if self._prefix_space:
            return [(_spaced(segment) if token_id < 0 else segment, token_id) for segment, token_id in out]
        return out

    def normalize(self, text: str) -> str:
        """``text`` as the model's normalizer leaves it (NFC for Qwen; unchanged for Llama-3).

        Raises ValueError for a lone surrogate, as ``encode`` does (it was returned as it was; a bug hunt)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if not text.isascii() and first_surrogate(text) >= 0:
            raise surrogate_error(text, ValueError("lone surrogate"))
        return self._normalize(text)

    # ==== Decoding ====

    def decode(self, ids: Iterable[SupportsIndex], skip_special_tokens: bool = True) -> str:
        """The text of ``ids``, as ``tokenizers.Tokenizer.decode``; invalid UTF-8 becomes U+FFFD.

        Special tokens are left out unless ``skip_special_tokens=False`` (the reference's default).
        Ids may be any integers with ``__index__``: Python ints, NumPy integers and arrays.

        >>> tok.decode([128000, 9906, 1917])  # doctest: +SKIP
        'Hello world'

        Raises:
            TypeError: ``ids`` is not a sequence of integers.
            ValueError: an id is negative or not in the vocabulary.
        """
        # (Compiled, ``PlainDecode``, for the usual ids: a list or tuple of ints, a 1-d array of
        # integers. This method stays in front of it for its signature, docstring and argument
        # errors, at about 0.1 us a call.)
        if self._plain_decode is not None:
            return self._plain_decode(ids, skip_special_tokens)
        return self._decode(ids, skip_special_tokens)

    def _decode_words(self, count: int) -> Any:
        """The tokens' short words for ``ids_bytes`` decoding ``count`` ids (see
        ``PlainDecode.words_for``), kept by the compiled decode."""
        plain = self._plain_decode
        return plain.words_for(count) if plain is not None else NO_WORDS

    def _decode(self, ids: Iterable[SupportsIndex], skip_special_tokens: bool) -> str:
        return self.decode_bytes(ids, skip_special_tokens).decode("utf-8", errors="replace")

    def decode_bytes(self, ids: Iterable[SupportsIndex], skip_special_tokens: bool = True) -> bytes:
        """The bytes of ``ids`` (no UTF-8 decoding)."""
        check_ids(ids)
        values: list[Any] = getattr(ids, "tolist")() if is_array(ids) else ids if type(ids) is list else list(ids)
        if not isinstance(values, list):  # (an array-like without ndim, whose tolist gave one value)
            raise TypeError(f"ids must be a sequence of int, not a 0-d {type(ids).__name__}")
        table = self._id_bytes
        first, mask = self._skip_mask() if _flag(skip_special_tokens, "skip_special_tokens") else (len(table), b"")
        try:
            data = ids_bytes(table, values, first, mask, self._decode_words(len(values)))  # the usual case: Python ints, every one a token
        except ValueError:  # (an int past 64 bits, which mypyc refuses: named below)
            data = None
        if data is not None:
            return data
        # Other integers (NumPy scalars in a list, objects with __index__), or a wrong id to name:
        # one at a time. (min() of __index__ objects that are not ints raised TypeError, and the
        # loop that named the wrong id found none: an AssertionError; a bug hunt.)
        parts: list[bytes] = []
        for token_id in values:
            if not hasattr(type(token_id), "__index__"):
                raise TypeError(f"ids must be int, not {type(token_id).__name__} ({token_id!r})")
            index = operator.index(token_id)
            if not 0 <= index < len(table):
                raise ValueError(f"token id {index} is not in the vocabulary (0..{len(table) - 1})")
            part = table[index]
            if part is None:
                raise ValueError(f"token id {index} is no token of the vocabulary (a gap in its ids)")
            if index < first or not mask[index - first]:
                parts.append(part)
        return b"".join(parts)

    def _skip_mask(self) -> tuple[int, bytes]:
        """The ids a decode that skips special tokens leaves out (``_skipped_ids``), as ``(first,
        mask)``: id ``i`` is left out where ``i >= first`` and ``mask[i - first]`` is 1.

        A mask beside the one table of each id's bytes, not a second table with those ids empty:
        copying the 128-200K entries took 3 ms of a tokenizer's first decode, where tokenizers'
        first decode takes 0.6-0.8 ms, and the second table 1.6 MB, which the garbage collector
        also went through once."""
        skipping = self._skipping
        if skipping is None:
            skipped = self._skipped_ids()
            first = min(skipped, default=len(self._id_bytes))
            mask = bytearray(len(self._id_bytes) - first)
            for token_id in skipped:
                mask[token_id - first] = 1
            skipping = self._skipping = (first, bytes(mask))
        return skipping

    def _skipped_ids(self) -> set[int]:
        """The ids a decode that skips special tokens leaves out, as tokenizers chooses them: those
        whose token (an added token's content, normalized if it is; else the vocabulary's) is the
        content of a special token as written. So a normalized special token whose content NFC
        changes is kept, and a non-special one whose content NFC makes a special one's is skipped
        (a bug hunt; everywhere else these are the special tokens' ids)."""
        specials = {t.content for t in self._added if t.special}
        added_ids = {t.id for t in self._added}
        skipped = {t.id for t in self._added if (self._normalize(t.content) if t.normalized else t.content) in specials}
        for content in specials:
            data = self._added_bytes(content)
            token_id = self.spec.vocab.get(data) if data is not None else None
            if token_id is not None and token_id not in added_ids:
                skipped.add(token_id)
        return skipped

    def _added_bytes(self, content: str) -> bytes | None:
        """The bytes an added token's content stands for (None: not such text)."""
        if not self.spec.added_as_utf8:
            return to_bytes(content)
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError:
            return None

    def decode_batch(self, batch: Iterable[Iterable[SupportsIndex]], skip_special_tokens: bool = True) -> list[str]:
        """``[decode(ids) for ids in batch]``."""
        if type(batch) is list and not batch and type(skip_special_tokens) is bool:
            return []  # (the checks below cost 0.9-1.3 us, 3-3.7x tokenizers' empty call; a bug hunt)
        if isinstance(batch, (set, frozenset, dict)) or not isinstance(batch, Iterable):
            # (a set or a dict has no order to give the texts in, as decode refuses one of ids:
            # the texts came back in hash order; tokenizers refuses them too)
            raise TypeError(f"batch must be a sequence of sequences of int, not {type(batch).__name__}")
        documents = batch if type(batch) is list else list(batch)
        skip_special_tokens = _flag(skip_special_tokens, "skip_special_tokens")
        # decode's usual case in one compiled loop (lists of valid ids), else decode itself
        try:
            first, mask = self._skip_mask() if skip_special_tokens else (len(self._id_bytes), b"")
            texts = ids_texts(self._id_bytes, documents, first, mask, self._decode_words(total_ids(documents)))
        except (ValueError, OverflowError):  # (an int past 64 bits, which mypyc refuses: decode names it)
            texts = [None] * len(documents)
        if None not in texts:
            return texts  # type: ignore[return-value]  # (every one decoded)
        return [text if text is not None else self._decode_one(k, documents[k], skip_special_tokens) for k, text in enumerate(texts)]

    def _decode_one(self, index: int, ids: Iterable[SupportsIndex], skip_special_tokens: bool) -> str:
        """``decode(ids)``, its error naming the document (``batch[index]``), as encode_batch names its texts."""
        try:
            return self.decode(ids, skip_special_tokens)
        except (TypeError, ValueError) as error:
            raise type(error)(f"batch[{index}]: {error}") from None

    # ==== Vocabulary ====

    @property
    def vocab_size(self) -> int:
        """One more than the largest id (the size of an embedding table for this tokenizer)."""
        return len(self._id_bytes)

    def token_to_id(self, token: str) -> int | None:
        """The id of an added token's content or of a byte-level vocabulary token, else None.
        Raises TypeError for what is not a str, ValueError for a lone surrogate (as ``encode``)."""
        # (the added tokens in a dict made at the first call: a loop over them took 27 us a call
        # with DeepSeek-V3's 818, 0.003x tokenizers' token_to_id; a bug hunt)
        return self._token_to_id(token)

    def id_to_bytes(self, token_id: int) -> bytes:
        """The bytes of one token, a special token's too (tiktoken's ``decode_single_token_bytes``;
        it was ``b""`` for a special token: decode skips them by default, a bug hunt)."""
        if type(token_id) is not int:
            token_id = plain_int(token_id)  # (np.int64 went through decode_bytes: 20-40x tiktoken's time; a bug hunt)
        if type(token_id) is int and token_id >= 0:  # (the usual call, without a list and a join)
            try:
                data = self._id_bytes[token_id]
            except IndexError:
                data = None
            if data is not None:
                return data
        if not hasattr(type(token_id), "__index__") or is_array(token_id) and getattr(token_id, "ndim", 0) != 0:
            raise TypeError(f"token_id must be an int, not {type(token_id).__name__}")
        return self.decode_bytes([token_id], skip_special_tokens=False)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Content -> id of the special added tokens."""
        return {t.content: t.id for t in self._added if t.special}

    # ==== Serving (peek2.serving.streaming, peek2.serving.incremental, peek2.serving.aio) ====
    # Thin delegates, imported lazily so that ``import peek2`` stays as cheap as before.

    def stream_encoder(self, add_special_tokens: bool = False, *, split_special_tokens: bool = False) -> StreamEncoder:
        """A ``peek2.serving.streaming.StreamEncoder``: ``feed(chunk) -> ids`` as they become final, ``finish()``."""
        from peek2.serving.streaming import StreamEncoder

        return StreamEncoder(self, add_special_tokens, split_special_tokens=split_special_tokens)

    def stream_decoder(self, skip_special_tokens: bool = False, *, prefill: Iterable[int] = ()) -> StreamDecoder:
        """A ``peek2.serving.streaming.StreamDecoder``: ``feed(id or ids) -> str`` of whole characters, ``finish()``."""
        from peek2.serving.streaming import StreamDecoder

        return StreamDecoder(self, skip_special_tokens, prefill=prefill)

    def prompt_cache(
        self, max_prompts: int = 16, *, add_special_tokens: bool = True, split_special_tokens: bool = False
    ) -> PromptCache:
        """A ``peek2.serving.incremental.PromptCache``: ``encode(prompt)`` re-tokenizes only what changed."""
        from peek2.serving.incremental import PromptCache

        return PromptCache(self, max_prompts, add_special_tokens=add_special_tokens, split_special_tokens=split_special_tokens)

    def prompt_session(self, *, add_special_tokens: bool = True, split_special_tokens: bool = False) -> PromptSession:
        """A ``peek2.serving.incremental.PromptSession``: ``append(text) -> (keep, new_ids)`` for one growing prompt."""
        from peek2.serving.incremental import PromptSession

        return PromptSession(self, add_special_tokens=add_special_tokens, split_special_tokens=split_special_tokens)

    async def async_encode(self, text: str, add_special_tokens: bool = True, *, split_special_tokens: bool = False) -> list[int]:
        """``encode`` without holding the event loop: see ``peek2.serving.aio.async_encode``."""
        from peek2.serving import aio

        return await aio.async_encode(self, text, add_special_tokens, split_special_tokens=split_special_tokens)

    async def async_encode_batch(
        self, texts: Iterable[str], add_special_tokens: bool = True, *, split_special_tokens: bool = False
    ) -> list[list[int]]:
        """``encode_batch`` without holding the event loop: see ``peek2.serving.aio.async_encode_batch``."""
        from peek2.serving import aio

        return await aio.async_encode_batch(self, texts, add_special_tokens, split_special_tokens=split_special_tokens)

    async def async_decode(self, ids: Iterable[SupportsIndex], skip_special_tokens: bool = True) -> str:
        """``decode`` without holding the event loop: see ``peek2.serving.aio.async_decode``."""
        from peek2.serving import aio

        return await aio.async_decode(self, ids, skip_special_tokens)

    # ==== Pickling: by source, not by vocabulary ====
    # A pickle holds the absolute path of the file read (or the model's name) and the sha256 of its
    # content: unpickled in another working directory it finds the same file, and a file changed on
    # disk since is refused instead of loading silently as another vocabulary. The file's size and
    # mtime at load are checked when pickling, so a change between load and pickle is refused too.

    def _same_model(self, **changes: Any) -> Tokenizer:
        """A tokenizer of this one's model (vocabulary, merges, pattern, normalizer) with ``changes``
        to the rest of its spec (``added_tokens``, ids as given; the post-processor's fields), made
        in milliseconds: it shares this one's engine and piece cache, which those do not touch
        (the transformers patch after ``add_tokens`` or a new post-processor: a new load took
        0.3-3 s). It pickles as neither was loaded (a spec in memory)."""
        spec = dataclasses.replace(self.spec, notices=(), **changes)
        return Tokenizer(spec, cache_size=self._engine.cache_size, _engine_of=self)

    def __copy__(self) -> Tokenizer:
        """The tokenizer itself: nothing in it changes once loaded (``copy.copy`` and ``deepcopy``
        went through pickling: a second load from disk, 0.16 s, and for ``from_str`` a refusal
        that spoke of pickling; a bug hunt). A subclass, which may hold state of its own, is
        copied as it pickles."""
        if type(self) is not Tokenizer:
            return cast(Tokenizer, _copied_by_pickling(self))
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Tokenizer:
        return self.__copy__()

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        if not self._source:
            raise TypeError("this Tokenizer was built from a spec in memory: pickle needs one loaded from a file")
        if type(self) is Tokenizer:
            return (_rebuild, (self._source, self._engine.cache_size, self._content_digest()))
        return (_rebuild, (self._source, self._engine.cache_size, self._content_digest(), type(self)))

    def _content_digest(self) -> str:
        """sha256 of the files this tokenizer was read from, as read (every file: GPT-2's
        ``vocab.bpe`` too, whose changes a pickle missed; a bug hunt), and of how they were read."""
        for path, stamp in zip(self._files, self._stamps):
            if file_stamp(path) != stamp:
                # (hashed again: a touch or a checkout of the same bytes was refused; a bug hunt)
                if self._digest and same_content(self._files, self._options, self._digest):
                    self._stamps = tuple(file_stamp(f) for f in self._files)
                    break
                raise pickle.PicklingError(f"cannot pickle this Tokenizer: {path} changed on disk since it was loaded")
        return self._digest

    def __repr__(self) -> str:
        return f"Tokenizer(family={self.family!r}, vocab_size={self.vocab_size}, source={self.spec.source!r})"


# The methods as the class defines them (see Tokenizer.__init__).
_OWN_ENCODE = Tokenizer.encode
_OWN_ENCODE_ORDINARY = Tokenizer.encode_ordinary
_OWN_TOKEN_TO_ID = Tokenizer.token_to_id
_OWN_DECODE_BYTES = Tokenizer.decode_bytes

_TRIMMED = "\u0120" + "".join(sorted(WHITESPACE))
"""What ``trim_offsets`` trims off an added token's content: the byte-level space ``Ġ`` and what Rust's
``char::is_whitespace`` calls whitespace."""


def _as_matched(span: str, content: str) -> str:
    """The normalized text a normalized added token matched, from its raw ``span``: the whitespace
    its lstrip and rstrip took (raw whitespace, which NFC leaves as it is) around its content. A
    content that itself begins or ends with whitespace keeps the raw span: a token before it may
    have taken that whitespace (an rstrip token), and tokenizers then counts the rest."""
    spaces = _TRIMMED[1:]
    if content[:1] in spaces or content[-1:] in spaces or not content:
        return span
    before = len(span) - len(span.lstrip(spaces))
    after = len(span) - len(span.rstrip(spaces))
    return span[:before] + content + span[len(span) - after :]


def _special_tokens(special_tokens: object) -> dict[str, int] | None:
    """A loader's ``special_tokens`` argument (content -> id) as a dict, checked; None stays None."""
    if special_tokens is None:
        return None
    if not isinstance(special_tokens, Mapping):
        raise TypeError(f"special_tokens must be a dict of str to int, not {type(special_tokens).__name__}")
    # (NumPy integer ids are ids, as tiktoken takes them and as decode does: they were refused; a bug hunt)
    specials = {content: plain_int(token_id) for content, token_id in special_tokens.items()}
    for content, token_id in specials.items():
        if not isinstance(content, str) or not isinstance(token_id, int) or isinstance(token_id, bool):
            raise TypeError(f"special_tokens must map str to int, not {content!r}: {token_id!r}")
        if not content:  # (it was loaded and never matched; tiktoken hangs on it)
            raise ValueError(f"special_tokens: an empty name (id {token_id})")
        if token_id < 0:
            raise ValueError(f"special_tokens: the id of {content!r} must not be negative, not {token_id}")
    return specials


def _copied_by_pickling(tokenizer: Tokenizer) -> object:
    rebuild, arguments = tokenizer.__reduce__()
    return rebuild(*arguments)  # type: ignore[operator]


def _rebuild(source: tuple, cache_size: int, digest: str = "", cls: type[Tokenizer] | None = None) -> Tokenizer:  # type: ignore[type-arg]
    """The tokenizer a pickle names, of its class (a subclass came back a plain Tokenizer, without
    its methods; a bug hunt)."""
    if cls is None:
        cls = Tokenizer
    with warnings.catch_warnings():
        # (the load that made the pickled tokenizer gave its notices: not again in every worker
        # process of a pool or a datasets map that unpickles it)
        warnings.filterwarnings("ignore", message=".*: numbered as tokenizers numbers added tokens: ")
        warnings.filterwarnings("ignore", message=".* sets what .* does not, which transformers applies")
        warnings.filterwarnings("ignore", message=".*: no merge of .* makes .* of its .* tokens")
        tokenizer = _rebuilt(source, cache_size, cls)
    if digest and tokenizer._content_digest() != digest:
        raise TokenizerFormatError(
            f"cannot unpickle the Tokenizer of {source[1]!r}: its files ({', '.join(tokenizer._files)}) have changed "
            f"since it was pickled (sha256 {tokenizer._content_digest()[:12]}..., pickled {digest[:12]}...)"
        )
    return tokenizer


def _rebuilt(source: tuple, cache_size: int, cls: type[Tokenizer]) -> Tokenizer:  # type: ignore[type-arg]
    kind = source[0]
    if kind == "file":
        tokenizer = cls.from_file(source[1], cache_size=cache_size)
    elif kind == "pretrained":
        from peek2 import models

        # (a model's name stays the model, whatever folder the unpickling process runs in)
        load = cls._load_pretrained if source[1] in models.MODELS else cls.from_pretrained
        tokenizer = load(source[1], cache_size=cache_size)
    elif kind == "gpt2":
        specials = dict(source[3]) if source[3] is not None else None
        tokenizer = cls.from_gpt2_files(source[1], source[2], special_tokens=specials, cache_size=cache_size)
    elif kind == "tiktoken":
        tokenizer = cls.from_tiktoken(source[1], pattern=source[2], special_tokens=dict(source[3]), cache_size=cache_size)
    else:
        raise ValueError(f"cannot rebuild a Tokenizer from {source!r}")
    return tokenizer


def _spaced(segment: str) -> str:
    """``segment`` with the space a ``ByteLevel(add_prefix_space=true)`` puts before it (none if it is empty or starts with one)."""
    return " " + segment if segment and segment[0] != " " else segment


def _normalizer(name: str | None) -> Callable[[str], str]:
    if name is None:
        return lambda text: text
    if name == "NFC":
        return nfc
    raise NotImplementedError(f"normalizer {name!r} is not supported")


_NAMED: dict[str, Tokenizer] = {}
_NAMED_LOCK = threading.Lock()
os.register_at_fork(after_in_child=lambda: globals().update(_NAMED_LOCK=threading.Lock()))  # a fork mid-load

IMPORTED_AT_FIRST_CALL = (
    "peek2.models",
    "peek2.formats.load_cache",
    "peek2.formats.hf_config",
    "peek2.serving.streaming",
    "peek2.serving.incremental",
    "email.parser",  # (importlib.metadata's, reading a model package's version)
)
"""Modules imported by a method's first call (``import peek2`` stays cheap without them)."""


def _import_before_fork() -> None:
    """Import the modules a first call imports, before a fork (waiting for an import another thread
    has begun). A fork while another thread imported one left the child waiting for ever at its
    own first call: CPython renews only the global import lock in a child, and the module's lock
    stays held by a thread the child does not have (a bug hunt: a child's first ``prompt_cache()``
    hung in 7 of 15 forks). The async module only where asyncio is in use (a loop runs it)."""
    names: tuple[str, ...] = IMPORTED_AT_FIRST_CALL
    if "asyncio" in sys.modules:
        names += ("peek2.serving.aio", "peek2.serving.encode_worker")
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # (one that cannot load here fails at its call, as it did)
            pass


os.register_at_fork(before=_import_before_fork)


def named(model: str) -> Tokenizer:
    """The Tokenizer of a named model (or tokenizer.json path), loaded once per process.

    Threads that ask for a model being loaded wait for that load instead of loading it again.
    """
    if not isinstance(model, str):
        # (``peek2.encode("x", False)``: the second argument is the model, not a flag as in the
        # method; a bug hunt found "name_or_dir must be a str", a parameter it had not given)
        raise TypeError(f"model must be a model name or a tokenizer path (str), not {type(model).__name__}")
    tokenizer = _NAMED.get(model)
    if tokenizer is None:
        with _NAMED_LOCK:
            tokenizer = _NAMED.get(model)
            if tokenizer is None:
                tokenizer = Tokenizer.from_pretrained(model)
                _NAMED[model] = tokenizer
    return tokenizer


class AmbiguousAddedTokensWarning(UserWarning):
    """Two normalized added tokens are equal once normalized: ``tokenizers`` matches one or the
    other from one process to the next, so no single answer is always ``tokenizers``'."""


def _warn_of_tokens_alike(added: Iterable[AddedToken], normalize: Callable[[str], str], source: object) -> None:
    """Warn of two normalized added tokens that the normalizer makes equal ("\u00e9z" and "e\u0301z"
    with NFC): tokenizers matches one or the other from one process to the next (its automaton is
    built from a hash map), so no answer is tokenizers'. peek2 matches the first in the file. (A
    bug hunt found it; tokens given the same id, where tokenizers follows hash-map order too, are
    refused, but such a file loads in tokenizers and may be in use.)"""
    first: dict[str, str] = {}
    for token in added:
        if token.normalized and token.content:
            key = normalize(token.content)
            other = first.setdefault(key, token.content)
            if other != token.content:
                warnings.warn(
                    f"{source}: the added tokens {other!a} and {token.content!a} are equal once normalized "
                    f"({key!a}): tokenizers matches either one from one run to the next; peek2 matches the first",
                    AmbiguousAddedTokensWarning,
                    stacklevel=4,
                )

def encode(text: str, model: str = "llama3", add_special_tokens: bool = True, *, split_special_tokens: bool = False) -> list[int]:
    """``Tokenizer.from_pretrained(model).encode(text, ...)``, with the tokenizer kept for later calls.

    >>> encode("Hello world")  # doctest: +SKIP
    [9906, 1917]
    """
    return named(model).encode(text, add_special_tokens, split_special_tokens=split_special_tokens)


def decode(ids: Iterable[SupportsIndex], model: str = "llama3", skip_special_tokens: bool = True) -> str:
    """``Tokenizer.from_pretrained(model).decode(ids, ...)``, with the tokenizer kept for later calls."""
    return named(model).decode(ids, skip_special_tokens)


def count(text: str, model: str = "llama3", add_special_tokens: bool = True, *, split_special_tokens: bool = False) -> int:
    """``len(encode(text, model, ...))`` without building the ids."""
    return named(model).count(text, add_special_tokens, split_special_tokens=split_special_tokens)
