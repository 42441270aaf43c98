"""The ``tokenizers`` plugin: Peek2 as the pre-tokenizer of a ``tokenizers.Tokenizer``.

    >>> from tokenizers import Tokenizer                                    # doctest: +SKIP
    >>> import peek2
    >>> tok = peek2.patch(Tokenizer.from_file("tokenizer.json"))            # doctest: +SKIP
    >>> tok.encode("Hello world").tokens                                    # doctest: +SKIP
    ['<|begin_of_text|>', 'Hello', 'Ġworld']
    >>> tok.save("saved.json")          # the original regex form: any tokenizers can load it  # doctest: +SKIP

``Peek2()`` stands for the whole pre-tokenizer of these models,
``Sequence[Split(Regex(pattern), "isolated"), ByteLevel(use_regex=False)]``: it returns
that ``Sequence`` with the ``Split`` replaced by a custom component that splits with
peek2. The byte-level step is kept as the real ``ByteLevel``: it is what the BPE
vocabulary is written in, and keeping it makes ``Peek2()`` a drop-in replacement for the
whole ``tok.pre_tokenizer`` field (``Peek2(byte_level=False)`` gives the split alone, for
your own ``Sequence``).

Why pieces, not finished tokens: a custom component may also hand back finished tokens
(``PreTokenizedString.tokenize``) made by peek2's own BPE, skipping the model. Measured on
XNLI sentences (interleaved medians) that is no faster than the original pipeline (3.24
against 3.29 MB/s: each ``tokenizers.Token`` costs about 0.2 us to make, and more to
convert), and it gives every token of a text the same word index (``Encoding.word_ids``
differ), ``pre_tokenize_str`` returns the text unsplit, and ``train_from_iterator`` learns
from whole texts instead of pieces. The split route is faithful everywhere, so ``Peek2()``
splits. Its cost is one ``NormalizedString`` per piece: ``peek2.plugin.cuts`` makes them with
as few crossings as it can (native ``split`` on a space, then on the characters beside the
remaining cuts; ``slice`` only where no character can cut, and in halves for long texts, which
keeps it linear). Making and converting those objects still costs more than the regex they
replace, so the plugin runs below the original's speed (``scripts/bench_plugin.py``; see
docs/plugin.md).

Serialisation: ``tokenizers`` cannot serialise a custom component. ``patch(tok)`` keeps
the original pre-tokenizer and gives the instance its own ``to_str``, ``save`` and
``__reduce_ex__`` (a ``tokenizers.Tokenizer`` accepts attributes, and instance attributes
come before the class's methods): they write the original regex form, and unpickling
loads it and patches again. A tokenizer that got ``tok.pre_tokenizer = Peek2()`` directly
cannot be saved (tokenizers raises "Custom PreTokenizer cannot be serialized"): use
``patch``.
"""

from __future__ import annotations

import json
import os
import threading
from types import MethodType
from typing import TYPE_CHECKING, Any

from peek2.plugin.cuts import CHUNK_CHARS as CHUNK_CHARS
from peek2.plugin.cuts import cut_pieces
from peek2.pretokenize.families import FAMILIES
from peek2.formats import hf_json
from peek2.pretokenize.pattern import PatternLike, resolve

if TYPE_CHECKING:  # tokenizers is needed only when the plugin is used
    from tokenizers import NormalizedString, PreTokenizedString, Tokenizer
    from tokenizers.pre_tokenizers import PreTokenizer

_PATCH_KEYS = ("_peek2_family", "_peek2_original", "_peek2_installed", "to_str", "save", "__reduce_ex__")
# Held around the swap of the original pre-tokenizer in for a save, and around ``_replaced``: a
# save in another thread showed the original, which ``_replaced`` took for the user's own (the
# patch dropped, then KeyError in the first save's ``finally``; a bug hunt). Reentrant: pickling
# goes through ``_to_str``.
_SWAP_LOCK = threading.RLock()


def _renew_swap_lock() -> None:
    """A forked child's own lock: one held by another thread of the parent at the fork (a save
    meanwhile) was held for ever in the child, whose next save hung (a bug hunt)."""
    global _SWAP_LOCK
    _SWAP_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_swap_lock)


class Peek2Split:
    """The custom component: splits each ``NormalizedString`` into the pieces of a family.

    Use it through ``Peek2()``; on its own it is ``Split(Regex(pattern), "isolated")``:

    >>> from tokenizers.pre_tokenizers import PreTokenizer
    >>> PreTokenizer.custom(Peek2Split("llama3")).pre_tokenize_str("Hi  there")
    [('Hi', (0, 2)), (' ', (2, 3)), (' there', (3, 9))]

    ``prefix_space=True`` first puts a space before each text that does not start with one, as
    GPT-2's ``ByteLevel(add_prefix_space=True)`` does before it splits (``patch`` uses it for such files).
    """

    def __init__(self, pattern: PatternLike = "llama3", prefix_space: bool = False) -> None:
        self.pattern = resolve(pattern)
        self.family = self.pattern.family
        self.prefix_space = bool(prefix_space)

    def pre_tokenize(self, pretok: PreTokenizedString) -> None:
        pretok.split(self._split)

    def _split(self, index: int, normalized: NormalizedString) -> list[NormalizedString]:
        text = str(normalized)
        if self.prefix_space and text and text[0] != " ":
            normalized.prepend(" ")  # (the space spans the first character, as ByteLevel's)
            text = " " + text
        return cut_pieces(normalized, text, self.pattern.split_ends(text))

    def __repr__(self) -> str:
        return f"Peek2Split({self.family!r}{', prefix_space=True' if self.prefix_space else ''})"

    def __reduce__(self) -> tuple[type[Peek2Split], tuple[str, bool]]:
        return (Peek2Split, (self.family, self.prefix_space))


def Peek2(pattern: PatternLike = "llama3", *, byte_level: bool = True) -> PreTokenizer:  # noqa: N802 (a class to its users)
    """A ``tokenizers`` pre-tokenizer: ``Sequence[Split(pattern), ByteLevel(use_regex=False)]`` done by peek2.

    ``pattern`` is a family name (``"llama3"``, ``"qwen2"``, ``"qwen3.5"``) or the exact pattern
    string of one; ``byte_level=False`` leaves out the byte-level step.

    >>> Peek2("qwen2").pre_tokenize_str("I've 12")
    [('I', (0, 1)), ("'ve", (1, 4)), ('Ġ', (4, 5)), ('1', (5, 6)), ('2', (6, 7))]
    >>> Peek2(byte_level=False).pre_tokenize_str("Hi there")
    [('Hi', (0, 2)), (' there', (2, 8))]

    Raises:
        TypeError: ``pattern`` is not a str.
        UnsupportedPatternError (a ValueError): not a supported family or pattern.
    """
    from tokenizers import pre_tokenizers

    split = Peek2Split(pattern)
    custom = pre_tokenizers.PreTokenizer.custom(split)
    if not byte_level:
        result = custom
    else:
        step = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        result = pre_tokenizers.Sequence([custom, step])
    # Pickles as the call that made it (tokenizers cannot pickle a custom component).
    result.__reduce_ex__ = lambda protocol: (_peek2_from_args, (split.family, byte_level))
    return result


def _peek2_from_args(family: str, byte_level: bool) -> PreTokenizer:
    return Peek2(family, byte_level=byte_level)


# ==== Patching a tokenizers.Tokenizer ====


def patch(tok: Tokenizer) -> Tokenizer:
    """Install the Peek2 pre-tokenizer matching ``tok``'s own pattern; returns ``tok`` (patched in place).

    ``tok`` keeps working as before (same ids, tokens, offsets, word ids, training), and its
    ``to_str``, ``save`` and pickling write the original regex form (loadable anywhere);
    unpickling patches again. Patching a patched tokenizer does nothing.

    Raises:
        TypeError: ``tok`` is not a ``tokenizers.Tokenizer``.
        NotImplementedError: its pre-tokenizer is not ``Sequence[Split(Regex)..., ByteLevel(use_regex=False)]``
            nor GPT-2's ``ByteLevel(use_regex=True)`` (not a Split, not
            byte-level, or a custom component); the message names the step.
        UnsupportedPatternError (a ValueError): the Split's regex is not a supported family's.
    """
    from tokenizers import Tokenizer as HfTokenizer
    from tokenizers import pre_tokenizers

    if not isinstance(tok, HfTokenizer):
        raise TypeError(f"patch expects a tokenizers.Tokenizer, not {type(tok).__name__}")
    with _SWAP_LOCK:  # (two threads' first calls through transformers patch one backend)
        if "_peek2_family" in tok.__dict__:
            return tok
        family, prefix_space = pipeline_family(tok)
        original = tok.pre_tokenizer
        assert original is not None  # pipeline_family refused a missing one
        if family in ("gpt2", "starcoder2"):
            # GPT-2's pre-tokenizer is one ByteLevel that splits with its regex (after Digits for
            # starcoder2): Peek2 splits, after the space of add_prefix_space, and a ByteLevel that
            # only maps bytes follows.
            byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        else:
            # Keep the tokenizer's own ByteLevel step object (its settings, exactly): the last step,
            # after the family's Split (or DeepSeek-V3's three).
            byte_level = original[len(FAMILIES[family].patterns)]
        installed = pre_tokenizers.Sequence([pre_tokenizers.PreTokenizer.custom(Peek2Split(family, prefix_space)), byte_level])
        tok.pre_tokenizer = installed
        attributes = tok.__dict__
        attributes["_peek2_family"] = family
        attributes["_peek2_original"] = original
        attributes["_peek2_installed"] = installed
        attributes["to_str"] = MethodType(_to_str, tok)
        attributes["save"] = MethodType(_save, tok)
        attributes["__reduce_ex__"] = MethodType(_reduce_ex, tok)
    return tok


def unpatch(tok: Tokenizer) -> Tokenizer:
    """Put back the original pre-tokenizer of a patched ``tok``; returns ``tok`` (a no-op if not patched)."""
    attributes = tok.__dict__
    with _SWAP_LOCK:  # (not in the middle of another thread's save)
        if "_peek2_family" in attributes:
            tok.pre_tokenizer = attributes["_peek2_original"]
            for key in _PATCH_KEYS:
                attributes.pop(key, None)
    return tok


def patched_family(tok: Tokenizer) -> str | None:
    """The family of the Peek2 that ``patch`` installed in ``tok``, or None when it is not patched."""
    family = getattr(tok, "__dict__", {}).get("_peek2_family")
    return family if isinstance(family, str) else None


def pipeline_family(tok: Tokenizer) -> tuple[str, bool]:
    """The family of ``tok``'s pre-tokenizer and its ``add_prefix_space``, or a clear refusal (see ``patch``)."""
    if tok.pre_tokenizer is None:
        raise NotImplementedError(
            "tokenizer has no pre_tokenizer: peek2 replaces Sequence[Split(<family pattern>), ByteLevel(use_regex=false)]"
        )
    try:
        state = json.loads(tok.pre_tokenizer.__getstate__())
    except Exception as error:  # tokenizers raises a bare Exception for a custom component
        raise NotImplementedError(
            f"tokenizer's pre_tokenizer cannot be read ({error}): a custom component (already Peek2?) cannot be patched"
        ) from None
    return hf_json._family(state, "tokenizer")


def _replaced(tok: Tokenizer) -> bool:
    """Whether the user gave a patched ``tok`` a pre-tokenizer of their own since (then the patch
    is dropped, and ``tok`` saves and pickles as it is: writing the original form undid their
    assignment, silently; a bug hunt). Peek2's is a custom component, which cannot be read back;
    any pre-tokenizer that can, or none, is someone else's. (Another custom component cannot be
    told from Peek2's: tokenizers cannot save such a tokenizer anyway; ``unpatch`` it first.)"""
    live = tok.pre_tokenizer
    if live is not None:
        try:
            live.__getstate__()
        except Exception:  # (tokenizers raises a bare Exception for a custom component)
            return False
    for key in _PATCH_KEYS:
        tok.__dict__.pop(key, None)
    return True


def _original_json(tok: Tokenizer, pretty: bool) -> str:
    """What the patched ``tok``'s ``to_str(pretty)`` is unpatched, made without writing to ``tok``.

    A ``tokenizers.Tokenizer`` is made beside it, sharing its model and other components, with the
    original pre-tokenizer and no added tokens; its JSON then gets ``tok``'s added tokens, written
    as tokenizers writes them. (Giving them to that tokenizer would renumber them after a model of
    another size: one trained since patching, a bug hunt.) Truncation and padding are set before
    the post-processor, whose added tokens tokenizers checks a truncation against only when it is
    set, as the live tokenizer got them.

    ``tok`` itself is never written to: setting its pre-tokenizer for a save waited, holding the
    GIL, for the lock that another thread's encode held while its Peek2 waited for the GIL, and
    the whole process hung (a bug hunt: ``to_str`` or pickling beside ``encode_batch``, also through
    transformers). Reading its components takes that lock shared, beside any encode.
    """
    from tokenizers import Tokenizer as HfTokenizer

    form = HfTokenizer(tok.model)
    truncation = tok.truncation
    if truncation is not None:
        form.enable_truncation(**truncation)
    padding = tok.padding
    if padding is not None:
        form.enable_padding(**padding)
    form.normalizer = tok.normalizer
    form.pre_tokenizer = tok.__dict__["_peek2_original"]
    form.post_processor = tok.post_processor
    form.decoder = tok.decoder
    text: str = form.to_str(pretty)
    empty = '"added_tokens": []' if pretty else '"added_tokens":[]'
    at = text.find(empty)  # (the first: a top-level field before the model; a string holds no bare quote)
    if at < 0:
        raise RuntimeError(f"tokenizers wrote no empty added_tokens field: {text[:200]!r}")
    fields = ("id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")
    added = tok.get_added_tokens_decoder()
    entries = [{name: token_id if name == "id" else getattr(added[token_id], name) for name in fields} for token_id in sorted(added)]
    if not entries:
        return text
    if pretty:  # (serde_json's pretty form: two spaces a level, the field one level in)
        listed = json.dumps(entries, ensure_ascii=False, indent=2).replace("\n", "\n  ")
        return text[:at] + '"added_tokens": ' + listed + text[at + len(empty) :]
    listed = json.dumps(entries, ensure_ascii=False, separators=(",", ":"))
    return text[:at] + '"added_tokens":' + listed + text[at + len(empty) :]


def _to_str(tok: Tokenizer, pretty: bool = False) -> str:
    """``Tokenizer.to_str`` with the original pre-tokenizer in place of Peek2 (the same results)."""
    from tokenizers import Tokenizer as HfTokenizer

    with _SWAP_LOCK:
        if _replaced(tok):
            return HfTokenizer.to_str(tok, pretty)  # type: ignore[no-any-return]
        return _original_json(tok, pretty)


def _save(tok: Tokenizer, path: str | os.PathLike[str], pretty: bool = True) -> None:
    """``Tokenizer.save`` of the original form (see ``_to_str``)."""
    from tokenizers import Tokenizer as HfTokenizer

    with _SWAP_LOCK:
        if _replaced(tok):
            HfTokenizer.save(tok, os.fspath(path), pretty)
            return
        text = _original_json(tok, pretty)
    with open(os.fspath(path), "w", encoding="utf-8") as handle:  # (as tokenizers writes it: UTF-8, no newline added)
        handle.write(text)


def _reduce_ex(tok: Tokenizer, protocol: int) -> Any:
    with _SWAP_LOCK:
        if _replaced(tok):
            return tok.__reduce_ex__(protocol)  # (the class's, the patch's attributes gone)
        return (_load_patched, (_to_str(tok),))


def _load_patched(json_text: str) -> Tokenizer:
    """Unpickle a patched tokenizer: load its original form and patch it again."""
    from tokenizers import Tokenizer as HfTokenizer

    return patch(HfTokenizer.from_str(json_text))
