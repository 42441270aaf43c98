"""Read a HuggingFace ``tokenizer.json`` into a ``TokenizerSpec``, refusing what peek2 does not implement.

Supported: model ``BPE`` in the byte-level alphabet; normalizer none, ``NFC`` or a
``Sequence`` of those; pre-tokenizer ``Sequence[Split(<family pattern>, Isolated),
ByteLevel(use_regex=false)]`` (or the Split's ``Removed`` with ``invert: true``, the same
pieces), a family's sequence of Isolated Splits before the ByteLevel (DeepSeek-V3's
three), or ``ByteLevel(use_regex=true)`` alone (GPT-2's pattern, the gpt2 family;
``add_prefix_space`` true or false) or, with ``add_prefix_space=false``, after ``Digits(individual_digits=true)`` (StarCoder2, SmolLM: the starcoder2 family); post-processor ``ByteLevel`` (its ``trim_offsets`` applied to the offsets), ``RobertaProcessing``
(the same trimming), ``TemplateProcessing`` of one ``$A`` between special tokens, or a ``Sequence`` of them
with at most one step that adds tokens; decoder ``ByteLevel``. Anything else raises
``NotImplementedError`` naming the field; malformed files raise
``TokenizerFormatError`` (a ``ValueError``) naming the JSON path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from peek2.pretokenize.families import FAMILIES, UnsupportedPatternError, find_sequence
from peek2.bpe.engine_tables import MAX_ID
from peek2.bpe.vocab import is_header, merge_bytes, merge_ids, vocab_bytes
from peek2.formats.byte_level import to_bytes
from peek2.spec import AddedToken, RankedMerges, TokenizerFormatError, TokenizerSpec

SUPPORTED_NORMALIZERS = ("NFC",)


def load_file(path: str | os.PathLike[str]) -> TokenizerSpec:
    """Read ``path`` (a tokenizer.json file).

    Raises:
        FileNotFoundError: no such file.
        TokenizerFormatError: not JSON, truncated, or a field is missing or of the wrong type.
        NotImplementedError: a model, normalizer or pipeline step peek2 does not implement.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    rank_file = _rank_file_hint(data)
    if rank_file:
        raise TokenizerFormatError(f"{os.fspath(path)}: {rank_file}")
    try:
        # (bytes decoded at once: a text-mode read, through the newline decoder, took 40 ms of 9 MB)
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TokenizerFormatError(f"{os.fspath(path)}: not UTF-8 (byte {error.start}): {error.reason}") from None
    return load_str(text, source=os.fspath(path))


_RANK_LINE = re.compile(rb"[A-Za-z0-9+/]+={0,2} [0-9]+\r?\n")


def _rank_file_hint(data: bytes) -> str:
    """What to say where ``data`` is no tokenizer.json but a tiktoken rank file, gzipped or not
    (an ``o200k_base.tiktoken.gz`` said "not UTF-8 (byte 1)", and Llama-3's ``tokenizer.model``
    "not valid JSON (truncated?)"; a bug hunt); "" otherwise."""
    gzipped = data[:2] == b"\x1f\x8b"
    if not gzipped and not _RANK_LINE.match(data, 0, 512):
        return ""
    what = "gzipped data (a gzipped rank file?)" if gzipped else "a tiktoken rank file (base64 token, rank)"
    return (
        f"{what}, not a tokenizer.json: load a rank file with Tokenizer.from_tiktoken(path, pattern=..., "
        "special_tokens=...), or name it for a named model with PEEK2_MODEL_<NAME>=path (docs/models.md)"
    )


def load_str(text: str, source: str = "<string>") -> TokenizerSpec:
    """Parse tokenizer.json content; ``source`` names it in error messages."""
    return parse(read_json(text, source, _object), source)


def read_json(text: str, source: str, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """The value of a JSON text; TokenizerFormatError naming ``source`` where it is not JSON that
    Python reads (a RecursionError from deep nesting and the ValueError of a number of thousands
    of digits escaped the loaders bare, naming no file; a bug hunt)."""
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook, parse_constant=_not_json_constant)
    except _NotJsonConstant as error:  # (NaN and Infinity loaded where tokenizers refuses the file; a bug hunt)
        raise TokenizerFormatError(f"{source}: not valid JSON: {error.args[0]} is not a JSON value (RFC 8259)") from None
    except json.JSONDecodeError as error:
        raise TokenizerFormatError(f"{source}: not valid JSON (truncated?): {error}") from None
    except RecursionError:
        raise TokenizerFormatError(f"{source}: not valid JSON: arrays or objects nested too deeply to read") from None
    except ValueError:  # (int() of a literal past sys.get_int_max_str_digits(); tokenizers refuses it too)
        raise TokenizerFormatError(f"{source}: not valid JSON: a number of more than {sys.get_int_max_str_digits()} digits") from None


class _NotJsonConstant(Exception):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a JSON text: Python's ``json`` reads them, JSON has none."""


def _not_json_constant(name: str) -> Any:
    raise _NotJsonConstant(name)


class _Repeating(dict):  # type: ignore[type-arg]
    """A JSON object naming a key more than once (``repeated``), with the last value of each, as
    ``json`` keeps it."""

    repeated: frozenset[str] = frozenset()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, marked where a key repeats: tokenizers refuses a field it reads given twice
    (a model with "type" twice loaded here; a bug hunt), and takes the last of the others.

    (The pairs cost a first load about 40 ms of Llama-3.2's 0.8 s, where json builds its dicts
    itself; a cached load does not read the JSON.)"""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    repeated: set[str] = set()
    for key, _ in pairs:
        (repeated if key in seen else seen).add(key)
    repeating = _Repeating(obj)
    repeating.repeated = frozenset(repeated)
    return repeating


def _once(obj: Any, keys: tuple[str, ...], path: str, source: str) -> None:
    """Refuse an object naming one of ``keys`` (fields tokenizers reads in it) twice."""
    for key in getattr(obj, "repeated", ()):
        if key in keys:
            raise TokenizerFormatError(f"{source}: field {_at(path, key)} is given twice (tokenizers refuses a duplicate field)")


def _field(obj: Any, key: str, path: str, source: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict):
        raise TokenizerFormatError(f"{source}: {path or 'the top level'} must be an object")
    if key not in obj:
        raise TokenizerFormatError(f"{source}: missing field {path + '.' if path else ''}{key}")
    value = obj[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise TokenizerFormatError(
            f"{source}: field {path + '.' if path else ''}{key} must be {names}, not {type(value).__name__}"
        )
    return value


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _flag(obj: dict[str, Any], key: str, path: str, source: str, default: bool) -> bool:
    """A true/false field; absent or null is ``default``. A string such as "false" is refused
    (``bool("false")`` is True: it would be read as the opposite of what it says)."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TokenizerFormatError(f"{source}: field {_at(path, key)} must be true or false, not {value!r}")
    return value


def _required_flag(obj: dict[str, Any], key: str, path: str, source: str) -> bool:
    """A true/false field that must be present and not null, as tokenizers requires it."""
    if key not in obj:
        raise TokenizerFormatError(f"{source}: missing field {_at(path, key)}")
    if obj[key] is None:
        raise TokenizerFormatError(f"{source}: field {_at(path, key)} must be true or false, not null")
    return _flag(obj, key, path, source, False)


# The fields tokenizers (the pinned version) reads at the top level: it refuses a file with any other.
TOP_LEVEL_FIELDS = ("version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model")


def _byte_level_fields(obj: dict[str, Any], path: str, source: str) -> None:
    """A ByteLevel step (pre-tokenizer, post-processor or decoder): tokenizers requires both
    fields, and refuses the file without them (``use_regex`` defaults to true)."""
    for key in ("add_prefix_space", "trim_offsets"):
        _required_flag(obj, key, path, source)
    if "use_regex" in obj and not isinstance(obj["use_regex"], bool):  # (absent: true; null or 1 refused, as tokenizers does; a bug hunt)
        raise TokenizerFormatError(f"{source}: field {_at(path, 'use_regex')} must be true or false, not {obj['use_regex']!r}")


def _token_id(value: Any, where: str, source: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TokenizerFormatError(f"{source}: {where} must be a non-negative integer id, not {value!r}")
    if value >= 1 << 32:  # (an added token's id, which tokenizers renumbers, loaded here at 2**32; a bug hunt)
        raise TokenizerFormatError(f"{source}: {where} must be below 2**32 (tokenizers reads a u32), not {value}")
    return value


def _optional_str(obj: dict[str, Any], key: str, path: str, source: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise TokenizerFormatError(f"{source}: field {_at(path, key)} must be a string or null, not {value!r}")
    return value


def parse(data: Any, source: str = "<object>") -> TokenizerSpec:
    """Build a TokenizerSpec from the parsed JSON object."""
    if isinstance(data, dict) and len(data) > 256 and all(isinstance(v, int) for v in data.values()):
        # (GPT-2's encoder.json read as a tokenizer.json said "field model must be dict, not int":
        # "model" is one of its tokens; a bug hunt)
        raise TokenizerFormatError(
            f"{source}: a vocabulary of token -> id (GPT-2's encoder.json or vocab.json), not a tokenizer.json: "
            "load it with its merges, Tokenizer.from_gpt2_files(encoder.json, vocab.bpe)"
        )
    model = _field(data, "model", "", source, dict)
    _nesting(data, model, source)
    _once(model, ("type",), "model", source)  # (its other fields tokenizers reads with the last of each)
    # (where tokenizers refuses a file, so does peek2, even where it could read it: a file
    # loads in both or in neither; a bug hunt found peek2 laxer on these)
    unknown = [key for key in data if key not in TOP_LEVEL_FIELDS]
    if unknown:
        raise TokenizerFormatError(f"{source}: unknown field {unknown[0]!r} at the top level (tokenizers refuses the file)")
    if "type" in model:  # (a number or null was "not supported", where it is malformed: a bug hunt)
        _field(model, "type", "model", source, str)
    model_type = model.get("type", "BPE" if "merges" in model else None)
    if model_type != "BPE":
        raise NotImplementedError(
            f"{source}: model.type {model_type!r} is not supported: peek2 implements byte-level BPE only"
        )
    dropout = model.get("dropout")
    if dropout is not None and (not isinstance(dropout, (int, float)) or isinstance(dropout, bool)):
        raise TokenizerFormatError(f"{source}: field model.dropout must be a number or null, not {dropout!r}")
    if dropout:
        raise NotImplementedError(f"{source}: model.dropout is set: BPE dropout is not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if _optional_str(model, key, "model", source):
            raise NotImplementedError(f"{source}: model.{key} is set: not supported for byte-level BPE")

    for key in ("truncation", "padding"):
        if data.get(key) is not None:  # encode would cut or pad every text: never silently ignored
            raise NotImplementedError(f"{source}: {key} is set: peek2 does not truncate or pad (set it to null)")
    family, prefix_space = _family(data.get("pre_tokenizer"), source)
    raw_vocab = _field(model, "vocab", "model", source, dict)
    _version(data, source)
    added = _added_tokens(data.get("added_tokens", []), source)
    contents = {token.content for token in added}
    vocab = _vocab(raw_vocab, contents, source)
    # (before the merges are packed as int32 ids: an id of 2**31, which tokenizers reads, was a
    # bare "int too large to convert to i32" naming no file or field; a bug hunt)
    top = max(vocab.values(), default=-1)
    if top > MAX_ID:
        token = next(token for token, token_id in raw_vocab.items() if token_id == top)
        raise TokenizerFormatError(f"{source}: model.vocab[{token!r}]: token id {top} is too large (at most {MAX_ID})")
    if len(set(vocab.values())) != len(vocab):
        # tokenizers keys its merges by id, and which token an id decodes to follows its hash
        # map's order: no answer to match (it loaded, and encoded differently; a bug hunt).
        first: dict[int, bytes] = {}
        for token, token_id in vocab.items():
            if token_id in first:
                raise TokenizerFormatError(f"{source}: model.vocab gives id {token_id} to two tokens, {first[token_id]!r} and {token!r}")
            first[token_id] = token
    added, notices = _numbered(added, raw_vocab, source)
    if len(vocab) < len(raw_vocab):  # added tokens listed in the vocabulary too, outside the alphabet (DeepSeek-V3)
        raw_vocab = {token: token_id for token, token_id in raw_vocab.items() if token not in contents or to_bytes(token) is not None}
    merges = _merges(_field(model, "merges", "model", source, list), raw_vocab, vocab, source)
    post = post_processor_fields(data.get("post_processor"), source)
    _decoder(data.get("decoder"), source)
    return TokenizerSpec(
        family=family,
        vocab=vocab,
        merges=merges,
        ignore_merges=_flag(model, "ignore_merges", "model", source, False),
        added_tokens=added,
        normalizer=_normalizer(data.get("normalizer"), "normalizer", source),
        byte_fallback=_flag(model, "byte_fallback", "model", source, False),
        unk_token=_optional_str(model, "unk_token", "model", source),
        fuse_unk=_flag(model, "fuse_unk", "model", source, False),
        source=source,
        prefix_space=prefix_space,
        notices=notices,
        **post,
    )


def post_processor_fields(raw: Any, source: str) -> dict[str, Any]:
    """The fields of a spec that a post-processor (``raw``, its JSON object, or None) decides: the
    ids it puts before and after a text, and its offset trimming."""
    prefix_ids, suffix_ids = _post_processor(raw, "post_processor", source)
    trim_steps = _trim_steps(raw)
    return {
        "prefix_ids": prefix_ids,
        "suffix_ids": suffix_ids,
        "trim_offsets": (True, trim_steps[0][0]) if trim_steps else (False, False),
        "trim_again": tuple(trim_steps[1:]),
    }


MAX_NESTING = 127
"""The deepest nesting of arrays and objects serde_json (tokenizers' reader) takes, the top-level object one."""


def _nesting(data: dict[str, Any], model: dict[str, Any], source: str) -> None:
    """Refuse a file nested more deeply than tokenizers reads (62 Sequence normalizers in one
    another loaded here, and 490 raised a bare RecursionError; a bug hunt). The vocabulary's and
    merges' values are not walked (no container is a valid one there), which keeps this to the
    small parts of a file."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise TokenizerFormatError(
                f"{source}: arrays or objects nested more than {MAX_NESTING} deep (tokenizers refuses the file)"
            )
        if value is model:
            children: Any = [inner for key, inner in value.items() if key not in ("vocab", "merges")]
        else:
            children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _vocab(raw: dict[str, Any], added: set[str], source: str) -> dict[bytes, int]:
    """The byte-level vocabulary. An entry outside the byte-level alphabet that is also an added
    token (DeepSeek-V3 lists ``<｜begin▁of▁sentence｜>`` in both) is left to the added tokens:
    no byte-level piece spells it, so the model could never produce it."""
    fast = vocab_bytes(raw)  # (compiled; None: an id to report below)
    if fast is not None:
        vocab, outside = fast
        for token in outside:
            if token not in added:
                raise NotImplementedError(
                    f"{source}: model.vocab token {token!r} is not in the byte-level alphabet: "
                    "peek2 implements byte-level BPE only"
                )
        return vocab
    vocab = {}
    for token, token_id in raw.items():
        _token_id(token_id, f"model.vocab[{token!r}]", source)
        data = to_bytes(token)
        if data is None and token in added:
            continue
        if data is None:
            raise NotImplementedError(
                f"{source}: model.vocab token {token!r} is not in the byte-level alphabet: "
                "peek2 implements byte-level BPE only"
            )
        vocab[data] = token_id
    return vocab


def _merges(raw: list[Any], raw_vocab: dict[str, Any], vocab: dict[bytes, int], source: str) -> Sequence[tuple[bytes, bytes]]:
    """The merges in rank order: as their tokens' ids where each id is one token (``RankedMerges``),
    else as pairs of bytes (which is also where a bad merge is found and named)."""
    if len(vocab) == len(raw_vocab) and len(set(vocab.values())) == len(vocab):  # (every token in the alphabet, ids unique)
        pairs = merge_ids(raw, raw_vocab)  # (compiled; None: a merge to report below)
        if pairs is not None:
            return RankedMerges(pairs, vocab)
    fast = merge_bytes(raw)  # (compiled; None: a merge to report below)
    if fast is not None:
        return fast
    merges: list[tuple[bytes, bytes]] = []
    for rank, merge in enumerate(raw):
        if isinstance(raw[0], str) and is_header(merge):
            continue
        if isinstance(merge, str):
            parts = merge.split(" ")
        elif isinstance(merge, list):
            parts = merge
        else:
            raise TokenizerFormatError(f"{source}: model.merges[{rank}] must be a string or a pair, not {merge!r}")
        if len(parts) != 2 or not all(isinstance(part, str) for part in parts):
            raise TokenizerFormatError(f"{source}: model.merges[{rank}] is not a pair of tokens: {merge!r}")
        if isinstance(merge, str) != isinstance(raw[0], str) and isinstance(raw[0], (str, list)):
            raise TokenizerFormatError(
                f"{source}: model.merges[{rank}] is a {type(merge).__name__} and model.merges[0] a {type(raw[0]).__name__}: "
                "tokenizers refuses merges written in both forms"
            )
        left, right = to_bytes(parts[0]), to_bytes(parts[1])
        if left is None or right is None:
            raise TokenizerFormatError(f"{source}: model.merges[{rank}] is outside the byte-level alphabet: {merge!r}")
        merges.append((left, right))
    return merges


def _version(data: dict[str, Any], source: str) -> None:
    """The format's version, which tokenizers checks (it may be absent): "1.0" is the only one."""
    if "version" in data and data["version"] != "1.0":
        raise TokenizerFormatError(f"{source}: field version must be \"1.0\", not {data['version']!r}: an unknown tokenizer.json version")


ADDED_TOKEN_FIELDS = ("id", "content", "special", "normalized", "lstrip", "rstrip", "single_word")


def _added_tokens(raw: Any, source: str) -> list[AddedToken]:
    if not isinstance(raw, list):
        raise TokenizerFormatError(f"{source}: added_tokens must be a list, not {type(raw).__name__}")
    tokens = []
    for k, item in enumerate(raw):
        path = f"added_tokens[{k}]"
        _once(item, ADDED_TOKEN_FIELDS, path, source)
        token_id = _token_id(_field(item, "id", path, source, int), f"{path}.id", source)
        content = _field(item, "content", path, source, str)
        # Every flag is required, as tokenizers requires it: a file it refuses is not read here
        # with guessed defaults (a bug hunt: ``"lstrip": null`` loaded here, as false).
        flags = [_required_flag(item, key, path, source) for key in ("special", "normalized", "lstrip", "rstrip", "single_word")]
        special, normalized, lstrip, rstrip, single_word = flags
        tokens.append(AddedToken(token_id, content, special, normalized, lstrip, rstrip, single_word))
    return tokens


def _numbered(added: list[AddedToken], raw_vocab: dict[str, Any], source: str) -> tuple[list[AddedToken], tuple[str, ...]]:
    """The added tokens with the ids and flags tokenizers gives them. It does not take the file's
    ids (it logs a warning where they differ, as the notice returned beside the tokens, which the
    tokenizer gives as a warning at each load): it adds the tokens in the file's order. A content of
    the model's vocabulary gets that token's id; any other new content the vocabulary's size, or
    one past the largest id given so far to such a content once that is past the size (a
    vocabulary token's id does not count: GPT-4o's ``<|endofprompt|>`` is 200,018 of a vocabulary
    of 200,000 entries, and a token added to that file is 200,000). A content listed again with the
    same flags is left out; with other flags it keeps its id and takes those flags, special if
    either is. Files written by tokenizers agree; an edited one may not (bug hunts: a content listed
    twice, the next token renumbered by tokenizers; a token added to GPT-4o's file), and then these
    ids are the ones that match its encode."""
    size = len(raw_vocab)
    numbered: list[AddedToken] = []
    where: dict[str, int] = {}  # content -> its index in numbered
    top = -1
    moved: list[str] = []
    for k, token in enumerate(added):
        if not token.content:
            continue
        if token.content in where:
            earlier = numbered[where[token.content]]
            if dataclasses.replace(token, id=earlier.id) == earlier:
                moved.append(f"added_tokens[{k}] {token.content!r} repeats an earlier token (left out)")
                continue
            if token.normalized != earlier.normalized:
                raise NotImplementedError(
                    f"{source}: added_tokens[{k}] {token.content!r} is listed before with another 'normalized' flag: not supported"
                )
            moved.append(f"added_tokens[{k}] {token.content!r} repeats an earlier content with other flags (which it takes)")
            numbered[where[token.content]] = dataclasses.replace(token, id=earlier.id, special=token.special or earlier.special)
            continue
        in_vocab = raw_vocab.get(token.content)
        if isinstance(in_vocab, int) and not isinstance(in_vocab, bool):
            token_id = in_vocab
        else:
            token_id = size if top < size else top + 1
            top = max(top, token_id)
        if token_id != token.id:
            moved.append(f"added_tokens[{k}] {token.content!r} is id {token_id}, not the file's {token.id}")
            token = dataclasses.replace(token, id=token_id)
        where[token.content] = len(numbered)
        numbered.append(token)
    if top >= size and max(raw_vocab.values(), default=-1) >= size:  # a new id may be a vocabulary token's
        taken = {token_id: token for token, token_id in raw_vocab.items() if isinstance(token_id, int) and token_id >= size}
        for token in numbered:
            other = taken.get(token.id)
            if other is not None and other != token.content:
                raise NotImplementedError(
                    f"{source}: the added token {token.content!r} is numbered {token.id}, the id of the vocabulary's "
                    f"{other!r} (tokenizers gives both that id): not supported"
                )
    if moved:
        more = f" (and {len(moved) - 3} more)" if len(moved) > 3 else ""
        return numbered, (f"numbered as tokenizers numbers added tokens: {'; '.join(moved[:3])}{more}",)
    return numbered, ()


def _step(raw: Any, path: str, source: str) -> Any:
    """A step of a Sequence: an object (a null one loaded as nothing, where tokenizers refuses the
    file: a Sequence's template step set to null dropped the BOS silently; a bug hunt)."""
    if not isinstance(raw, dict):
        raise TokenizerFormatError(f"{source}: {path} must be an object, not {raw!r}")
    return raw


def _normalizer(raw: Any, path: str, source: str) -> str | None:
    if raw is None:
        return None
    # (tokenizers reads an object with "normalizers" and no type as a Sequence, by its shape; a bug hunt)
    kind = "Sequence" if isinstance(raw, dict) and "type" not in raw and "normalizers" in raw else _field(raw, "type", path, source, str)
    if kind == "Sequence":
        steps = [
            _normalizer(_step(step, f"{path}.normalizers[{k}]", source), f"{path}.normalizers[{k}]", source)
            for k, step in enumerate(_field(raw, "normalizers", path, source, list))
        ]
        steps = [step for step in steps if step is not None]
        if len(steps) > 1:
            raise NotImplementedError(f"{source}: {path} Sequence of {steps}: only one NFC step is supported")
        return steps[0] if steps else None
    if kind not in SUPPORTED_NORMALIZERS:
        raise NotImplementedError(
            f"{source}: {path} {kind!r} is not supported (supported: none, {', '.join(SUPPORTED_NORMALIZERS)})"
        )
    return str(kind)


def _family(raw: Any, source: str) -> tuple[str, bool]:
    """The pre-tokenizer's family, and whether it puts a space before each text segment."""
    if raw is None:
        raise NotImplementedError(f"{source}: no pre_tokenizer: peek2 needs Split(<pattern>) + ByteLevel")
    kind = _field(raw, "type", "pre_tokenizer", source, str)
    steps = _field(raw, "pretokenizers", "pre_tokenizer", source, list) if kind == "Sequence" else [raw]
    paths = [f"pre_tokenizer.pretokenizers[{k}]" for k in range(len(steps))] if kind == "Sequence" else ["pre_tokenizer"]
    kinds = [_field(step, "type", path, source, str) for step, path in zip(steps, paths)]
    for step, path, step_kind in zip(steps, paths, kinds):
        if step_kind == "ByteLevel":
            _byte_level_fields(step, path, source)
    if kinds == ["ByteLevel"] and _flag(steps[0], "use_regex", paths[0], source, True):
        # GPT-2's own pre-tokenizer: ByteLevel splits with GPT-2's regex (the gpt2 family), after
        # putting a space before the text segment when add_prefix_space (RoBERTa-style files).
        return "gpt2", _flag(steps[0], "add_prefix_space", paths[0], source, True)
    # After another step, tokenizers puts the space before each piece that step cut, not before
    # the segment: a different tokenizer, which no known file uses.
    per_piece = "(after another pre-tokenizer step it puts a space before each of that step's pieces)"
    if kinds == ["Digits", "ByteLevel"] and _flag(steps[1], "use_regex", paths[1], source, True):
        # StarCoder2's and SmolLM's: each digit apart, then GPT-2's pattern (the starcoder2 family).
        if not _flag(steps[0], "individual_digits", paths[0], source, False):
            raise NotImplementedError(f"{source}: {paths[0]} Digits individual_digits=false is not supported")
        if _flag(steps[1], "add_prefix_space", paths[1], source, True):
            raise NotImplementedError(f"{source}: {paths[1]} ByteLevel add_prefix_space=true is not supported {per_piece}")
        return "starcoder2", False
    if len(kinds) < 2 or kinds[-1] != "ByteLevel" or any(k != "Split" for k in kinds[:-1]):
        raise NotImplementedError(
            f"{source}: pre_tokenizer {kind}{kinds if kind == 'Sequence' else ''} is not supported: "
            "peek2 implements Sequence[Split(<family pattern>)..., ByteLevel(use_regex=false)]"
        )
    byte_level, byte_level_path = steps[-1], paths[-1]
    if _flag(byte_level, "use_regex", byte_level_path, source, True):
        raise NotImplementedError(f"{source}: {byte_level_path} ByteLevel after a Split must have use_regex=false")
    if _flag(byte_level, "add_prefix_space", byte_level_path, source, False):
        raise NotImplementedError(f"{source}: {byte_level_path} ByteLevel add_prefix_space=true is not supported {per_piece}")
    patterns = tuple(
        _split_regex(split, split_path, source, alone=len(steps) == 2) for split, split_path in zip(steps, paths[:-1])
    )
    if len(patterns) == 1 and patterns[0] in FAMILIES:
        # find_sequence takes a family's name too, for the API and the CLI; in a file it is a regex
        # matching that text (a Split of {"Regex": "llama3"} was read as Llama-3's pattern; a bug hunt)
        raise UnsupportedPatternError(
            f"{source}: pre_tokenizer Split: unsupported pre-tokenizer pattern {patterns[0]!r}, a regex matching "
            "that text (a family's name is a pattern only where peek2's API or CLI takes one)"
        )
    try:
        return find_sequence(patterns).name, False
    except UnsupportedPatternError as error:
        raise UnsupportedPatternError(f"{source}: pre_tokenizer Split: {error}") from None


def _split_regex(split: Any, path: str, source: str, alone: bool) -> str:
    """The regex of one Split step, checking that its behavior keeps every piece apart."""
    behavior = (_field(split, "behavior", path, source, str), _required_flag(split, "invert", path, source))
    # Removed with invert keeps the matches and drops the text between them: the same pieces as
    # Isolated for a pattern that matches every character, as each single-Split family's does
    # (hub ports of cl100k and GPT-4o's file are written that way). In a sequence the pre-splits
    # match only some characters, so there only Isolated means Isolated.
    if behavior != ("Isolated", False) and not (alone and behavior == ("Removed", True)):
        raise NotImplementedError(
            f"{source}: {path} Split behavior {behavior[0]!r} invert={str(behavior[1]).lower()}: "
            "only Isolated (or, for a single Split, Removed with invert=true, the same for those patterns) "
            "is supported"
        )
    pattern = _field(split, "pattern", path, source, dict)
    if len(pattern) != 1:
        raise TokenizerFormatError(f"{source}: {path}.pattern must have one field, Regex or String, not {sorted(pattern)}")
    regex = pattern.get("Regex")
    if not isinstance(regex, str):
        raise NotImplementedError(f"{source}: {path} Split pattern {pattern!r}: only a Regex is supported")
    return regex


def _post_kind(raw: Any) -> Any:
    """The kind of post-processor ``raw`` is, as tokenizers reads it: by its shape before its
    ``type``. tokenizers tries, in this order, RobertaProcessing (``sep``, ``cls``, and both
    flags), BertProcessing (``sep`` and ``cls``), ByteLevel (by ``type``), TemplateProcessing
    (``single``, ``pair`` and ``special_tokens``) and Sequence (by ``type``), and takes the first
    that reads, whatever ``type`` says or whether it is there: a "RobertaProcessing" without
    ``trim_offsets`` is a BertProcessing, which trims nothing (peek2 trimmed: other offsets; a
    template without ``type`` loads; a field it reads given twice fails a shape: a RobertaProcessing
    with ``trim_offsets`` twice is a BertProcessing). Where none has its shape, ``type`` (perhaps
    None) names what to check, so that the error names the missing field."""
    if not isinstance(raw, dict):
        return None
    repeated: frozenset[str] = getattr(raw, "repeated", frozenset())
    if _named_pair(raw.get("sep")) and _named_pair(raw.get("cls")) and not repeated & {"sep", "cls"}:
        flags = ("trim_offsets", "add_prefix_space")
        if all(isinstance(raw.get(key), bool) for key in flags) and not repeated & set(flags):
            return "RobertaProcessing"
        return "BertProcessing"  # (a flag given twice too: tokenizers tries Roberta's shape, then Bert's)
    kind = raw.get("type")
    if kind == "ByteLevel" and isinstance(raw.get("add_prefix_space"), bool) and isinstance(raw.get("trim_offsets"), bool):
        return kind
    if all(key in raw for key in ("single", "pair", "special_tokens")):
        return "TemplateProcessing"
    return kind


def _named_pair(value: Any) -> bool:
    """Whether ``value`` is a ``[token, id]`` pair (``sep``, ``cls``), as tokenizers reads one."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
        and 0 <= value[1] < 1 << 32
    )


# The fields tokenizers reads in each post-processor (a template's type, and a Roberta's, it does not)
POST_PROCESSOR_FIELDS = {
    "ByteLevel": ("type", "add_prefix_space", "trim_offsets", "use_regex"),
    "Sequence": ("type", "processors"),
    "RobertaProcessing": ("sep", "cls", "trim_offsets", "add_prefix_space"),
    "BertProcessing": ("sep", "cls"),
    "TemplateProcessing": ("single", "pair", "special_tokens"),
}


def _post_processor(raw: Any, path: str, source: str) -> tuple[list[int], list[int]]:
    if raw is None:
        return [], []
    kind = _post_kind(raw)
    if not isinstance(kind, str):  # (missing, or not a string: malformed, as other components say)
        kind = _field(raw, "type", path, source, str)
    _once(raw, POST_PROCESSOR_FIELDS.get(kind, ()), path, source)
    if kind == "ByteLevel":
        _byte_level_fields(raw, path, source)
        return [], []  # adds no ids; its offset trimming: _trim_steps
    if kind == "Sequence":
        prefix: list[int] = []
        suffix: list[int] = []
        steps = _field(raw, "processors", path, source, list)
        adding = [k for k, step in enumerate(steps) if _adds_tokens(step)]
        if len(adding) > 1:
            # tokenizers hands each piece a template makes to the next step as an input of its own
            # (a second template then applies its pair form): not a prefix and a suffix (a bug hunt).
            raise NotImplementedError(
                f"{source}: {path} has {len(adding)} steps that may add tokens (processors{adding}): "
                "peek2 supports one TemplateProcessing or RobertaProcessing in a Sequence"
            )
        for k, step in enumerate(steps):
            more_prefix, more_suffix = _post_processor(_step(step, f"{path}.processors[{k}]", source), f"{path}.processors[{k}]", source)
            prefix, suffix = prefix + more_prefix, more_suffix + suffix
        return prefix, suffix
    if kind in ("RobertaProcessing", "BertProcessing"):  # <s> text </s> ([CLS] text [SEP]); Roberta's offset trimming: _trim_steps
        if kind == "RobertaProcessing":  # (a BertProcessing's flags, of any value, are not read: a bug hunt)
            _flag(raw, "trim_offsets", path, source, True)
            _flag(raw, "add_prefix_space", path, source, True)
        cls, sep = (_named_id(raw, key, path, source) for key in ("cls", "sep"))
        return [cls], [sep]
    if kind != "TemplateProcessing":
        raise NotImplementedError(f"{source}: {path} {kind!r} is not supported")
    special = _field(raw, "special_tokens", path, source, dict)
    for name, entry in special.items():
        # (every entry as tokenizers reads it, used or not: tokens of other types, ids past u32 loaded here; a bug hunt)
        entry_path = f"{path}.special_tokens[{name!r}]"
        _once(entry, ("id", "ids", "tokens"), entry_path, source)
        _field(entry, "id", entry_path, source, str)
        for j, token_id in enumerate(_field(entry, "ids", entry_path, source, list)):
            _token_id(token_id, f"{entry_path}.ids[{j}]", source)
        for j, token in enumerate(_field(entry, "tokens", entry_path, source, list)):
            if not isinstance(token, str):
                raise TokenizerFormatError(f"{source}: {entry_path}.tokens[{j}] must be a string, not {token!r}")
    for k, item in enumerate(_field(raw, "pair", path, source, list)):  # (not used: checked as tokenizers does)
        _template_piece(item, f"{path}.pair[{k}]", source)
    prefix, suffix = [], []
    seen_sequence = False
    for k, item in enumerate(_field(raw, "single", path, source, list)):
        where = f"{path}.single[{k}]"
        _template_piece(item, where, source)
        if "Sequence" in item:
            sequence = _field(item, "Sequence", where, source, dict)
            if sequence.get("id") != "A" or seen_sequence:
                # (tokenizers drops the text of a template without $A, repeats it for "$A $A", and
                # panics for "$B" alone: a bug hunt found each taken here as "$A")
                raise NotImplementedError(
                    f"{source}: {path}.single is not a template of one $A between special tokens "
                    f"({where} is a second sequence or not $A): not supported"
                )
            seen_sequence = True
            continue
        name = _field(item["SpecialToken"], "id", f"{where}.SpecialToken", source, str)
        if name not in special:
            raise TokenizerFormatError(f"{source}: {path}.special_tokens lacks {name!r}, used by {where}")
        entry_path = f"{path}.special_tokens[{name!r}]"
        ids = _field(special[name], "ids", entry_path, source, list)
        (prefix if not seen_sequence else suffix).extend(_token_id(i, f"{entry_path}.ids[{j}]", source) for j, i in enumerate(ids))
    if not seen_sequence:
        raise NotImplementedError(f"{source}: {path}.single has no $A (tokenizers then drops the text): not supported")
    return prefix, suffix


def _template_piece(item: Any, where: str, source: str) -> None:
    """One piece of a template: ``{"Sequence": {"id": "A", "type_id": 0}}`` or ``{"SpecialToken": {"id": ..., "type_id": ...}}``."""
    if not isinstance(item, dict) or len(item) != 1 or not ({"Sequence", "SpecialToken"} & item.keys()):
        raise TokenizerFormatError(f"{source}: {where} must be an object with one field, Sequence or SpecialToken: {item!r}")
    kind = next(iter(item))
    _once(item, (kind,), where, source)
    _once(item[kind], ("id", "type_id"), f"{where}.{kind}", source)
    name = _field(item[kind], "id", f"{where}.{kind}", source, str)
    if kind == "Sequence" and name not in ("A", "B"):  # (a pair's "x" loaded here; a bug hunt)
        raise TokenizerFormatError(f"{source}: field {where}.Sequence.id must be \"A\" or \"B\", not {name!r}")
    _token_id(_field(item[kind], "type_id", f"{where}.{kind}", source, int), f"{where}.{kind}.type_id", source)


def _adds_tokens(step: Any) -> bool:
    """Whether a post-processor may add tokens (a template, RobertaProcessing, or a Sequence holding one)."""
    kind = _post_kind(step)
    if kind == "Sequence":
        steps = step.get("processors")
        return isinstance(steps, list) and any(_adds_tokens(inner) for inner in steps)
    return kind in ("TemplateProcessing", "RobertaProcessing", "BertProcessing")


def _named_id(raw: dict[str, Any], key: str, path: str, source: str) -> int:
    """The id of a ``[content, id]`` pair (RobertaProcessing's ``cls`` and ``sep``)."""
    pair = raw.get(key)
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
        raise TokenizerFormatError(f"{source}: field {_at(path, key)} must be a [token, id] pair, not {pair!r}")
    return _token_id(pair[1], f"{_at(path, key)}[1]", source)


def _trim_steps(raw: Any) -> list[tuple[bool, bool]]:
    """Each step of the post-processor that trims offsets, a ``ByteLevel`` or ``RobertaProcessing``
    with ``trim_offsets`` (checked by _post_processor), in order, as ``(add_prefix_space, whether
    a RobertaProcessing or BertProcessing before it put the cls token first)``: each trims the
    text's tokens, special tokens added or not. tokenizers trims once per step (two in a Sequence
    were applied here as one; a bug hunt). A template hands the next step its text as an encoding
    of its own, whose first token is the text's; Roberta and Bert put cls before it in one."""
    steps: list[tuple[bool, bool]] = []
    after_cls = False
    for step in _flat_steps(raw):
        kind = _post_kind(step)
        if kind in ("ByteLevel", "RobertaProcessing") and step.get("trim_offsets", True):
            steps.append((bool(step.get("add_prefix_space", True)), after_cls))  # (Roberta trims before it adds)
        after_cls = after_cls or kind in ("RobertaProcessing", "BertProcessing")
    return steps


def _flat_steps(raw: Any) -> list[Any]:
    """A post-processor's steps in the order tokenizers applies them, Sequences opened."""
    if _post_kind(raw) != "Sequence":
        return [raw]
    return [inner for step in raw.get("processors", []) for inner in _flat_steps(step)]


def _decoder(raw: Any, source: str) -> None:
    if raw is None:  # (a bug hunt: peek2 decoded with ByteLevel, tokenizers joins the tokens' text with spaces)
        raise NotImplementedError(
            f"{source}: no decoder (null): tokenizers then decodes to the tokens' byte-level text joined by "
            "spaces; peek2 decodes with a ByteLevel decoder only (set decoder to ByteLevel)"
        )
    kind = _field(raw, "type", "decoder", source, str)
    if kind != "ByteLevel":
        raise NotImplementedError(f"{source}: decoder {kind!r} is not supported (ByteLevel only)")
    _byte_level_fields(raw, "decoder", source)
