"""Read a HuggingFace ``tokenizer.json`` into a ``TokenizerSpec``, refusing what peek2 does not implement.

Supported: model ``BPE`` in the byte-level alphabet; normalizer none, ``NFC`` or a
``Sequence`` of those; pre-tokenizer ``Sequence[Split(<family pattern>, Isolated),
ByteLevel(use_regex=false)]``; post-processor ``ByteLevel``, ``TemplateProcessing``
or a ``Sequence`` of them; decoder ``ByteLevel``. Anything else raises
``NotImplementedError`` naming the field; malformed files raise
``TokenizerFormatError`` (a ``ValueError``) naming the JSON path.
"""

from __future__ import annotations

import json
import os
from typing import Any

from peek2.families import UnsupportedPatternError, find_family
from peek2.formats.byte_level import to_bytes
from peek2.spec import AddedToken, TokenizerFormatError, TokenizerSpec

SUPPORTED_NORMALIZERS = ("NFC",)


def load_file(path: str | os.PathLike[str]) -> TokenizerSpec:
    """Read ``path`` (a tokenizer.json file).

    Raises:
        FileNotFoundError: no such file.
        TokenizerFormatError: not JSON, truncated, or a field is missing or of the wrong type.
        NotImplementedError: a model, normalizer or pipeline step peek2 does not implement.
    """
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return load_str(text, source=os.fspath(path))


def load_str(text: str, source: str = "<string>") -> TokenizerSpec:
    """Parse tokenizer.json content; ``source`` names it in error messages."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TokenizerFormatError(f"{source}: not valid JSON (truncated?): {error}") from None
    return parse(data, source)


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


def _optional(obj: dict[str, Any], key: str, default: Any) -> Any:
    value = obj.get(key, default)
    return default if value is None else value


def parse(data: Any, source: str = "<object>") -> TokenizerSpec:
    """Build a TokenizerSpec from the parsed JSON object."""
    model = _field(data, "model", "", source, dict)
    model_type = model.get("type", "BPE" if "merges" in model else None)
    if model_type != "BPE":
        raise NotImplementedError(
            f"{source}: model.type {model_type!r} is not supported: peek2 implements byte-level BPE only"
        )
    if _optional(model, "dropout", 0.0) not in (0, 0.0):
        raise NotImplementedError(f"{source}: model.dropout is set: BPE dropout is not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if _optional(model, key, ""):
            raise NotImplementedError(f"{source}: model.{key} is set: not supported for byte-level BPE")

    family = _family(data.get("pre_tokenizer"), source)
    vocab = _vocab(_field(model, "vocab", "model", source, dict), source)
    merges = _merges(_field(model, "merges", "model", source, list), source)
    added = _added_tokens(_optional(data, "added_tokens", []), source)
    prefix_ids, suffix_ids = _post_processor(data.get("post_processor"), source)
    _decoder(data.get("decoder"), source)
    return TokenizerSpec(
        family=family,
        vocab=vocab,
        merges=merges,
        ignore_merges=bool(_optional(model, "ignore_merges", False)),
        added_tokens=added,
        normalizer=_normalizer(data.get("normalizer"), source),
        prefix_ids=prefix_ids,
        suffix_ids=suffix_ids,
        byte_fallback=bool(_optional(model, "byte_fallback", False)),
        unk_token=model.get("unk_token"),
        fuse_unk=bool(_optional(model, "fuse_unk", False)),
        source=source,
    )


def _vocab(raw: dict[str, Any], source: str) -> dict[bytes, int]:
    vocab: dict[bytes, int] = {}
    for token, token_id in raw.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise TokenizerFormatError(f"{source}: model.vocab[{token!r}] must be a non-negative int, not {token_id!r}")
        data = to_bytes(token)
        if data is None:
            raise NotImplementedError(
                f"{source}: model.vocab token {token!r} is not in the byte-level alphabet: "
                "peek2 implements byte-level BPE only"
            )
        vocab[data] = token_id
    return vocab


def _merges(raw: list[Any], source: str) -> list[tuple[bytes, bytes]]:
    merges: list[tuple[bytes, bytes]] = []
    for rank, merge in enumerate(raw):
        if isinstance(merge, str):
            parts = merge.split(" ")
        elif isinstance(merge, list):
            parts = merge
        else:
            raise TokenizerFormatError(f"{source}: model.merges[{rank}] must be a string or a pair, not {merge!r}")
        if len(parts) != 2 or not all(isinstance(part, str) for part in parts):
            raise TokenizerFormatError(f"{source}: model.merges[{rank}] is not a pair of tokens: {merge!r}")
        left, right = to_bytes(parts[0]), to_bytes(parts[1])
        if left is None or right is None:
            raise TokenizerFormatError(f"{source}: model.merges[{rank}] is outside the byte-level alphabet: {merge!r}")
        merges.append((left, right))
    return merges


def _added_tokens(raw: Any, source: str) -> list[AddedToken]:
    if not isinstance(raw, list):
        raise TokenizerFormatError(f"{source}: added_tokens must be a list")
    tokens = []
    for k, item in enumerate(raw):
        path = f"added_tokens[{k}]"
        token_id = _field(item, "id", path, source, int)
        content = _field(item, "content", path, source, str)
        flags = {key: bool(item.get(key, False)) for key in ("lstrip", "rstrip", "single_word")}
        tokens.append(
            AddedToken(
                id=token_id,
                content=content,
                special=bool(item.get("special", False)),
                normalized=bool(item.get("normalized", not item.get("special", False))),
                **flags,
            )
        )
    return tokens


def _normalizer(raw: Any, source: str) -> str | None:
    if raw is None:
        return None
    kind = _field(raw, "type", "normalizer", source, str)
    if kind == "Sequence":
        steps = [_normalizer(step, source) for step in _field(raw, "normalizers", "normalizer", source, list)]
        steps = [step for step in steps if step is not None]
        if len(steps) > 1:
            raise NotImplementedError(f"{source}: normalizer Sequence of {steps}: only one NFC step is supported")
        return steps[0] if steps else None
    if kind not in SUPPORTED_NORMALIZERS:
        raise NotImplementedError(
            f"{source}: normalizer {kind!r} is not supported (supported: none, {', '.join(SUPPORTED_NORMALIZERS)})"
        )
    return str(kind)


def _family(raw: Any, source: str) -> str:
    if raw is None:
        raise NotImplementedError(f"{source}: no pre_tokenizer: peek2 needs Split(<pattern>) + ByteLevel")
    kind = _field(raw, "type", "pre_tokenizer", source, str)
    steps = _field(raw, "pretokenizers", "pre_tokenizer", source, list) if kind == "Sequence" else [raw]
    kinds = [step.get("type") if isinstance(step, dict) else None for step in steps]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        raise NotImplementedError(
            f"{source}: pre_tokenizer ByteLevel(use_regex=true) uses GPT-2's pattern, which peek2 does not implement"
        )
    if kinds != ["Split", "ByteLevel"]:
        raise NotImplementedError(
            f"{source}: pre_tokenizer {kind}{kinds if kind == 'Sequence' else ''} is not supported: "
            "peek2 implements Sequence[Split(<family pattern>), ByteLevel(use_regex=false)]"
        )
    split, byte_level = steps
    if byte_level.get("use_regex", True) or byte_level.get("add_prefix_space", False):
        raise NotImplementedError(
            f"{source}: pre_tokenizer ByteLevel must have use_regex=false and add_prefix_space=false"
        )
    if split.get("behavior") != "Isolated" or split.get("invert", False):
        raise NotImplementedError(
            f"{source}: pre_tokenizer Split behavior {split.get('behavior')!r} invert={split.get('invert')}: "
            "only Isolated, invert=false is supported"
        )
    pattern = _field(split, "pattern", "pre_tokenizer.Split", source, dict)
    regex = pattern.get("Regex")
    if not isinstance(regex, str):
        raise NotImplementedError(f"{source}: pre_tokenizer Split pattern {pattern!r}: only a Regex is supported")
    try:
        return find_family(regex).name
    except UnsupportedPatternError as error:
        raise UnsupportedPatternError(f"{source}: pre_tokenizer Split: {error}") from None


def _post_processor(raw: Any, source: str) -> tuple[list[int], list[int]]:
    if raw is None:
        return [], []
    kind = _field(raw, "type", "post_processor", source, str)
    if kind == "ByteLevel":
        return [], []  # only trims offsets, which peek2 reports untrimmed like trim_offsets=false
    if kind == "Sequence":
        prefix: list[int] = []
        suffix: list[int] = []
        for step in _field(raw, "processors", "post_processor", source, list):
            more_prefix, more_suffix = _post_processor(step, source)
            prefix, suffix = prefix + more_prefix, more_suffix + suffix
        return prefix, suffix
    if kind != "TemplateProcessing":
        raise NotImplementedError(f"{source}: post_processor {kind!r} is not supported")
    special = _field(raw, "special_tokens", "post_processor", source, dict)
    prefix, suffix = [], []
    seen_sequence = False
    for item in _field(raw, "single", "post_processor", source, list):
        if "Sequence" in item:
            seen_sequence = True
        elif "SpecialToken" in item:
            name = item["SpecialToken"]["id"]
            if name not in special:
                raise TokenizerFormatError(f"{source}: post_processor.special_tokens lacks {name!r}")
            (prefix if not seen_sequence else suffix).extend(int(i) for i in special[name]["ids"])
    return prefix, suffix


def _decoder(raw: Any, source: str) -> None:
    if raw is None:
        return
    kind = _field(raw, "type", "decoder", source, str)
    if kind != "ByteLevel":
        raise NotImplementedError(f"{source}: decoder {kind!r} is not supported (ByteLevel only)")
