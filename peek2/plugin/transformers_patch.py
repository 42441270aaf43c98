"""``patch_transformers()``: transformers' fast tokenizers of Llama-3 / Qwen2 / Qwen3 run on peek2.

    >>> import peek2
    >>> peek2.patch_transformers()                                   # doctest: +SKIP
    >>> tok = AutoTokenizer.from_pretrained("path/to/llama3.1")     # doctest: +SKIP
    >>> tok("Hello world")                                           # doctest: +SKIP
    {'input_ids': [128000, 9906, 1917], 'attention_mask': [1, 1, 1]}
    >>> peek2.unpatch_transformers()                                 # doctest: +SKIP

Two integration points, chosen by what a call asks for:
- plain calls (``__call__``/``encode`` of text or a list of texts, no offsets, pairs or
  other outputs; padding, truncation and tensors as the backend would make them: see
  ``_shaped_call``) go to peek2's standalone ``Tokenizer``,
  built once per tokenizer from its backend's own JSON (so added tokens and the
  post-processor are those transformers set up): no ``tokenizers.Encoding`` is built.
  ``tok(text)`` with no keyword but ``add_special_tokens``, ``return_attention_mask`` or
  ``split_special_tokens`` skips transformers' argument handling too (it resolves to the
  plain case): on XNLI sentences that halves the time of a call;
- every other call goes through the backend ``tokenizers.Tokenizer`` with the peek2
  plugin installed (``peek2.patch``), so offsets, padding and the rest are the backend's own.

Tokenizers whose pipeline peek2 does not implement (or with a custom Python normalizer or
decoder, which cannot be saved to JSON) are left alone. The result of a plain
call makes its ``encodings`` when first read (``.tokens()``, ``.word_ids()``, ...): the
backend encodes the call's texts then, as transformers' own path would have. The standalone
tokenizer is rebuilt when tokens are added through the transformers tokenizer
(``add_tokens``, ``add_special_tokens``; or a copy sharing its backend), after
``patch_transformers()`` again, or when its post-processor changes (``add_bos_token =
...``); tokens added to ``backend_tokenizer`` directly, and its other direct edits after
the first call, are not seen.
"""

from __future__ import annotations

import collections
import contextvars
import dataclasses
import hashlib
import json
import os
import threading
import warnings
import weakref
from typing import Any, cast

from peek2.extras import install_hint
from peek2.pretokenize.families import UnsupportedPatternError
from peek2.pretokenize.scanner import first_surrogate
from peek2.plugin.pre_tokenizer import patch, patched_family, unpatch
from peek2.formats.hf_json import post_processor_fields
from peek2.spec import AddedToken, TokenizerFormatError
from peek2.tokenizer import AmbiguousAddedTokensWarning, Tokenizer

_ORIGINAL: dict[str, Any] = {}  # what patch_transformers replaced
# Per transformers tokenizer: (fingerprint, peek2 Tokenizer or None when unsupported).
# Kept outside the instance so that pickling and deepcopy of the tokenizer are unchanged.
_STATE: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int, bytes], Tokenizer | None]] = weakref.WeakKeyDictionary()
_EPOCH = [0]  # one more at each patch_transformers: tokens may have been added while unpatched, unseen
# Set while a subclass's own _encode_plus runs for the patched tokenize, which reads ``.tokens()``
# of the result: the patched _encode_plus then takes the backend's path.
_NEEDS_ENCODINGS: contextvars.ContextVar[bool] = contextvars.ContextVar("peek2_needs_encodings", default=False)
_ADDED = "_peek2_added"  # on the backend: how many times tokens were added through a patched wrapper
_READDED = "_peek2_readded"  # on the backend: an added token's content was added again (see _add_tokens)
_LOCK = "_peek2_lock"  # on the backend: held by the patched methods while they use it (see _backend_lock)


def _backend_lock(backend: Any) -> Any:
    """The backend's lock, which the patched methods hold while they read, change or encode with it.

    The backend runs peek2's pre-tokenizer, a Python callback: its encode, which releases the GIL,
    needs the GIL back from its worker threads. A thread that changes the backend meanwhile
    (``encode_special_tokens``, truncation, padding: transformers' path sets them at every call)
    waits for the encode's hold on the tokenizer while holding the GIL, and both wait for ever (a
    bug hunt: 4 threads calling ``tok(text, return_offsets_mapping=True, split_special_tokens=...)``
    with both settings hung at once; unpatched, the encode needs no GIL and nothing waits). One
    thread at a time through the patched methods; reentrant, for a subclass's ``_encode_plus``
    called inside ``tokenize``. (Kept in the backend's ``__dict__``, which its pickles leave out.)"""
    lock = backend.__dict__.get(_LOCK)
    if lock is None:
        with _LOCKING:
            lock = backend.__dict__.setdefault(_LOCK, threading.RLock())
            _LOCKED.add(backend)
    return lock


_LOCKING = threading.Lock()
_LOCKED: weakref.WeakSet[Any] = weakref.WeakSet()  # the backends that have a lock (_backend_lock)


def _renew_locks() -> None:
    """A forked child's own locks: a backend's lock held by another thread of the parent at the
    fork was held for ever in the child, whose next call hung (a bug hunt; unpatched, it runs)."""
    global _LOCKING
    _LOCKING = threading.Lock()
    for backend in list(_LOCKED):
        backend.__dict__[_LOCK] = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks)

# Arguments of TokenizersBackend._encode_plus that a plain call leaves at these values.
_PLAIN = {
    "is_split_into_words": False,
    "return_tensors": None,
    "return_overflowing_tokens": False,
    "return_special_tokens_mask": False,
    "return_offsets_mapping": False,
    "return_length": False,
    "return_token_type_ids": (None, False),
    # apply_chat_template(tokenize=True) passes it, False unless asked (transformers 5.23): every
    # chat encode took transformers' path, 1.2-1.55x the unpatched time (a bug hunt).
    "sanitize_control_tokens": (None, False),
}
_IGNORED = ("max_length", "stride", "pad_to_multiple_of", "padding_side", "verbose")  # only act with padding/truncation


def patch_transformers() -> None:
    """Make transformers' ``TokenizersBackend`` (Llama-3, Qwen2/2.5/3 fast tokenizers) use peek2.

    Raises:
        ImportError: transformers is not installed (``pip install "transformers==5.23.0"``).
    """
    try:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        raise ImportError(f"patch_transformers needs transformers: {install_hint('transformers')}") from None
    if "_encode_plus" in _ORIGINAL:
        return
    _EPOCH[0] += 1
    original = TokenizersBackend._encode_plus
    original_call = TokenizersBackend.__call__
    original_add_tokens = TokenizersBackend._add_tokens
    original_tokenize = TokenizersBackend.tokenize
    original_update_post_processor = TokenizersBackend.update_post_processor
    _ORIGINAL["update_post_processor"] = original_update_post_processor
    _ORIGINAL["_encode_plus"] = original
    _ORIGINAL["tokenize"] = original_tokenize
    _ORIGINAL["__call__"] = original_call
    _ORIGINAL["_add_tokens"] = original_add_tokens
    _ORIGINAL["own __call__"] = TokenizersBackend.__dict__.get("__call__")  # None: inherited
    _ORIGINAL["set_truncation_and_padding"] = TokenizersBackend.set_truncation_and_padding  # (read, not replaced)

    def _encode_plus(self: Any, text: Any, text_pair: Any = None, **kwargs: Any) -> Any:
        with _backend_lock(self._tokenizer):
            engine = _engine(self)
            if engine is None or text_pair is not None or _NEEDS_ENCODINGS.get():
                return original(self, text, text_pair, **kwargs)
            kind = _call_kind(self, text, kwargs)  # (one pass over the keywords: a short text's call is mostly glue)
            if kind == _PLAIN_CALL:
                return _plain_call(self, engine, text, kwargs)
            if kind == _SHAPED_CALL:
                shaped = _shaped_call(self, engine, text, kwargs)  # (None: a call it leaves to transformers)
                if shaped is not None:
                    return shaped
            return original(self, text, text_pair, **kwargs)

    def __call__(self: Any, text: Any = None, *args: Any, **kwargs: Any) -> Any:
        # ``tok(text)`` with at most these keywords: straight to peek2, without transformers'
        # argument handling (half the time of a sentence once peek2 encodes it). It resolves to
        # no padding, no truncation and no max_length, the plain case of ``_encode_plus``.
        # A subclass's own _encode_plus is called: through transformers' __call__.
        if (
            not args
            and kwargs.keys() <= _CALL_KEYWORDS
            and type(self)._encode_plus is _encode_plus
            and not getattr(self, "_in_target_context_manager", False)
        ):
            backend = self._tokenizer
            with backend.__dict__.get(_LOCK) or _backend_lock(backend):  # (the lookup inline: a plain call's cost)
                engine = _engine(self)
                if engine is not None and _is_text(text) and "token_type_ids" not in self.model_input_names:
                    switch = getattr(type(self), "_switch_to_input_mode", None)  # on the class: a missing
                    if switch is not None:  # attribute of the instance costs 2 us in transformers' __getattr__
                        switch(self)
                    return _plain_call(self, engine, text, kwargs)
        return original_call(self, text, *args, **kwargs)

    def tokenize(self: Any, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any) -> list[str]:
        # transformers' tokenize reads ``.tokens()`` of _encode_plus's result, which only the
        # backend's path has (a bug hunt: every ``tok.tokenize(text)`` raised ValueError).
        if type(self)._encode_plus is _encode_plus:
            with _backend_lock(self._tokenizer):
                return list(original(self, text, pair, add_special_tokens=add_special_tokens, **kwargs).tokens())
        token = _NEEDS_ENCODINGS.set(True)  # a subclass's own _encode_plus, as transformers calls it
        try:
            return list(self._encode_plus(text=text, text_pair=pair, add_special_tokens=add_special_tokens, **kwargs).tokens())
        finally:
            _NEEDS_ENCODINGS.reset(token)

    def _add_tokens(self: Any, new_tokens: Any, special_tokens: bool = False) -> Any:
        # (Under the backend's lock, as every change of it: a thread adding tokens while another's
        # call encoded with the plugin hung both; a bug hunt. Unpatched it runs.)
        backend = getattr(self, "_tokenizer", None)
        if backend is None:
            return original_add_tokens(self, new_tokens, special_tokens)
        with _backend_lock(backend):
            return _add_tokens_held(self, backend, new_tokens, special_tokens)

    def _add_tokens_held(self: Any, backend: Any, new_tokens: Any, special_tokens: bool) -> Any:
        if not backend.__dict__.get(_READDED) and _special_added_as_normal(backend, new_tokens, special_tokens):
            # tokenizers keeps a special token's content added again as a normal token in its set
            # of special tokens, while its saved form (which peek2 reads) calls it normal: "ar"
            # added as special, then as a token, and ``tok("start", split_special_tokens=True)``
            # matched "ar" inside "start" (a bug hunt). Such a backend takes its own path from then
            # on. (Added again as special, as transformers does at every load and as the eos token
            # made the pad token is, or a normal token made special: live and saved forms agree.)
            backend.__dict__[_READDED] = True
        try:
            return original_add_tokens(self, new_tokens, special_tokens)
        finally:
            # A new fingerprint for every wrapper of this backend (copy.copy shares it): rebuilt
            # at their next call. Counted after the add, so no engine is kept without the tokens.
            backend.__dict__[_ADDED] = backend.__dict__.get(_ADDED, 0) + 1

    def update_post_processor(self: Any) -> Any:
        # (add_bos_token / add_eos_token set the backend's post-processor: the same hang as above)
        backend = getattr(self, "_tokenizer", None)
        if backend is None:
            return original_update_post_processor(self)
        with _backend_lock(backend):
            return original_update_post_processor(self)

    TokenizersBackend._encode_plus = _encode_plus
    TokenizersBackend.__call__ = __call__
    TokenizersBackend._add_tokens = _add_tokens
    TokenizersBackend.tokenize = tokenize
    TokenizersBackend.update_post_processor = update_post_processor


def unpatch_transformers() -> None:
    """Undo ``patch_transformers``: new calls use transformers' own path, and the backends their
    own pre-tokenizers again (same results).

    (A backend left with the plugin met transformers' own calls, which take no lock: threads
    calling an unpatched tokenizer with offsets hung as before the backend's lock; a bug hunt.)"""
    original = _ORIGINAL.pop("_encode_plus", None)
    if original is not None:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend

        TokenizersBackend._encode_plus = original
        TokenizersBackend._add_tokens = _ORIGINAL.pop("_add_tokens")
        TokenizersBackend.tokenize = _ORIGINAL.pop("tokenize")
        TokenizersBackend.update_post_processor = _ORIGINAL.pop("update_post_processor")
        _ORIGINAL.pop("__call__")
        _ORIGINAL.pop("set_truncation_and_padding")
        own_call = _ORIGINAL.pop("own __call__")
        if own_call is None:
            del TokenizersBackend.__call__  # the base class's again
        else:
            TokenizersBackend.__call__ = own_call
        with _LOCKING:
            backends = list(_LOCKED)
        for backend in backends:
            with _backend_lock(backend):  # (not in the middle of a call that encodes with it)
                unpatch(backend)


def is_transformers_patched() -> bool:
    """True while ``patch_transformers`` is in effect."""
    return "_encode_plus" in _ORIGINAL


def _fingerprint(backend: Any) -> tuple[int, int, bytes]:
    # The post-processor moves with add_bos_token (0.8 us to read). Added tokens bump a count on
    # the backend in the patched ``_add_tokens`` instead: counting them here costs 4 us a call.
    # The epoch covers tokens added while transformers was unpatched.
    post = backend.post_processor
    return _EPOCH[0], backend.__dict__.get(_ADDED, 0), post.__getstate__() if post is not None else b""


def _special_added_as_normal(backend: Any, new_tokens: Any, special_tokens: bool) -> bool:
    """Whether ``new_tokens`` (str or ``AddedToken``, or one of them) adds a special token of
    ``backend`` again as a normal one: a str where ``special_tokens`` is false, an ``AddedToken``
    whose own ``special`` is (transformers adds its special tokens again at every load, as
    ``AddedToken(special=True)`` with ``special_tokens=False``)."""
    tokens = new_tokens if isinstance(new_tokens, (list, tuple)) else [new_tokens]
    normal: set[str] = set()
    for token in tokens:
        if isinstance(token, str):
            if not special_tokens:
                normal.add(token)
        elif isinstance(getattr(token, "content", None), str) and not getattr(token, "special", True):
            normal.add(token.content)
    return bool(normal) and any(token.special and token.content in normal for token in backend.get_added_tokens_decoder().values())


def _engine(self: Any) -> Tokenizer | None:
    """The peek2 Tokenizer standing for this transformers tokenizer, or None when unsupported."""
    backend = self._tokenizer
    if backend.__dict__.get(_READDED):
        return None
    fingerprint = _fingerprint(backend)
    state = _STATE.get(self)
    if state is not None and state[0] == fingerprint:
        return state[1]
    # The engines of this backend's last states (a copy.copy of the tokenizer shares it, and
    # add_eos_token or add_bos_token set back and forth gives back an earlier post-processor).
    known: collections.OrderedDict[tuple[int, int, bytes], Tokenizer | None] = backend.__dict__.setdefault(_KNOWN, collections.OrderedDict())
    with _LOCKING:
        engine = known.get(fingerprint, _UNKNOWN)
    if engine is _UNKNOWN:
        engine = _derived(known, fingerprint, backend)
        if engine is _UNKNOWN:
            engine = _made(backend)
        with _LOCKING:
            known[fingerprint] = engine
            while len(known) > ENGINES_KEPT:
                known.popitem(last=False)
    _STATE[self] = (fingerprint, engine)
    return cast("Tokenizer | None", engine)


_KNOWN = "_peek2_engines"  # on the backend: its last states' engines, by fingerprint
_UNKNOWN: Any = object()


def _derived(known: collections.OrderedDict[tuple[int, int, bytes], Tokenizer | None], fingerprint: tuple[int, int, bytes], backend: Any) -> Any:
    """The engine of the backend's state ``fingerprint`` made from the engine of an earlier state
    of the same epoch, in milliseconds: tokens added and a new post-processor (``add_eos_token``,
    ``add_bos_token``) leave the model as it was. ``_UNKNOWN`` where there is none, or where the
    full path must decide. (Made from the backend's JSON, the first call after ``add_tokens`` or
    a toggle of ``add_eos_token`` took 0.3-3 s, most of it writing that JSON; bug hunts.)"""
    with _LOCKING:
        earlier = [(f, e) for f, e in known.items() if f[0] == fingerprint[0] and e is not None]
    if not earlier:
        return _UNKNOWN
    before, engine = earlier[-1]
    changes: dict[str, Any] = {}
    if before[2] != fingerprint[2]:
        try:  # (the post-processor's state is its JSON, as the backend's own JSON writes it)
            changes = post_processor_fields(json.loads(fingerprint[2]) if fingerprint[2] else None, engine.spec.source)
        except (NotImplementedError, TokenizerFormatError, ValueError):
            return _UNKNOWN
    added: list[AddedToken] = []
    contents: set[str] = set()
    for token_id, token in sorted(backend.get_added_tokens_decoder().items()):
        content = token.content
        if content in contents:
            return _UNKNOWN  # (see _with_live_ids)
        contents.add(content)
        if content:  # (as a load leaves out an empty content)
            added.append(AddedToken(token_id, content, token.special, token.normalized, token.lstrip, token.rstrip, token.single_word))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            derived = engine._same_model(added_tokens=added, **changes)
        except (NotImplementedError, TokenizerFormatError):
            return _UNKNOWN  # (the full path gives the same refusal, or the backend's own answer)
    if any(issubclass(w.category, AmbiguousAddedTokensWarning) for w in caught):
        return _UNKNOWN  # (see _new_engine)
    return derived


def _made(backend: Any) -> Tokenizer | None:
    """The engine of the backend as it is, from its JSON (the engines last made are kept by it)."""
    engine: Tokenizer | None
    patched_here = False
    try:
        if patched_family(backend) is None:
            patch(backend)
            patched_here = True
        saved = _saved_form(backend)
        key = (hashlib.sha256(saved.encode("utf-8")).digest(), tuple(sorted((i, t.content) for i, t in backend.get_added_tokens_decoder().items())))
        with _LOCKING:
            known = _ENGINES.get(key, _ENGINES)
            if known is not _ENGINES:
                _ENGINES.move_to_end(key)
        if known is not _ENGINES:
            engine = known  # type: ignore[assignment]
        else:
            engine = _new_engine(saved, backend)
            with _LOCKING:
                _ENGINES[key] = engine
                while len(_ENGINES) > ENGINES_KEPT:
                    _ENGINES.popitem(last=False)
    except _Unsaveable:
        if patched_here:
            unpatch(backend)  # left alone, as it was
        engine = None
    except (NotImplementedError, UnsupportedPatternError, TokenizerFormatError):
        engine = None
    return engine


def _new_engine(saved: str, backend: Any) -> Tokenizer | None:
    with warnings.catch_warnings(record=True) as caught:  # (ids the file's numbering moves: the live ones are taken below)
        warnings.simplefilter("always")
        engine = Tokenizer.from_str(saved)
    if any(issubclass(w.category, AmbiguousAddedTokensWarning) for w in caught):
        # Added tokens equal once normalized ("\u00e9" and "e\u0301" with NFC): the backend
        # matches one or the other from one process to the next, where peek2 matches the
        # first, so only the backend's own path gives this process's answer (a bug hunt: "d\u00e9"
        # gave 151650 where transformers gave 165 in the same process, and .tokens() of the
        # lazily made encodings raised).
        return None
    return _with_live_ids(engine, backend)


# The engines last made, by the backend's saved form and live added tokens: a copy of a tokenizer
# (copy.copy, deepcopy, unpickling: a new transformers object), add_eos_token set back, or another
# load of the same folder made its engine again, 1-2.5 s each (a bug hunt). An engine depends on
# nothing else, and is shared safely (it is immutable).
ENGINES_KEPT = 3
_ENGINES: collections.OrderedDict[tuple[bytes, tuple[tuple[int, str], ...]], Tokenizer | None] = collections.OrderedDict()


class _Unsaveable(NotImplementedError):
    """The backend cannot write its JSON (a custom Python component): it is left alone."""


def _saved_form(backend: Any) -> str:
    """The backend's JSON (the original form: patch's to_str) without the truncation and padding
    a call left set, which plain calls turn off anyway (a bug hunt: tokens added after a call with
    ``truncation=True`` left the tokenizer on the slow path, from_str refusing them)."""
    try:
        saved: str = backend.to_str()
    except Exception as error:  # a custom normalizer or decoder: tokenizers raises a bare Exception
        raise _Unsaveable(str(error)) from None
    if backend.truncation is None and backend.padding is None:
        return saved
    data = json.loads(saved)
    data["truncation"] = None
    data["padding"] = None
    return json.dumps(data)


def _with_live_ids(engine: Tokenizer, backend: Any) -> Tokenizer | None:
    """``engine`` with the ids the live backend gives its added tokens. A token added at run time
    takes the next id after the largest added id there, where a load of the saved JSON numbers it
    after the largest new content's (a bug hunt, GPT-4o's file: 200019 live, 200000 reloaded).
    None (the backend's own path) where the two cannot be paired one to one."""
    live: dict[str, int] = {}
    for token_id, token in backend.get_added_tokens_decoder().items():
        if token.content in live:
            return None
        live[token.content] = token_id
    added = engine.spec.added_tokens
    if all(live.get(t.content) == t.id for t in added):
        return engine
    if len(added) != len(live) or len({t.content for t in added}) != len(added) or any(t.content not in live for t in added):
        return None
    # (no notices: the live ids replace the numbering they are about)
    spec = dataclasses.replace(engine.spec, added_tokens=[dataclasses.replace(t, id=live[t.content]) for t in added], notices=())
    return Tokenizer(spec)


_CALL_KEYWORDS = frozenset({"add_special_tokens", "return_attention_mask", "split_special_tokens"})


def _is_text(text: Any) -> bool:
    """A str or a non-empty list/tuple of str (a batch), not pre-tokenized input."""
    return isinstance(text, str) or (isinstance(text, (list, tuple)) and bool(text) and all(isinstance(t, str) for t in text))


_NAMES: tuple[Any, Any, Any] | None = None


def _names() -> tuple[Any, Any, Any]:
    """transformers' BatchEncoding, TruncationStrategy, PaddingStrategy (an import statement per call costs 0.5 us)."""
    global _NAMES
    if _NAMES is None:
        from transformers.tokenization_utils_base import BatchEncoding, TruncationStrategy
        from transformers.utils.generic import PaddingStrategy

        _NAMES = (BatchEncoding, TruncationStrategy, PaddingStrategy)
    return _NAMES


_PENDING = "_peek2_pending"  # on a plain call's result: what its encodings are made from, until they are
_MADE = "_peek2_encodings"  # on a plain call's result: its encodings, once made
_PLAIN_RESULT: list[Any] = []  # [the BatchEncoding subclass of plain calls' results] (made once)


def _plain_result_class() -> Any:
    """The ``BatchEncoding`` subclass of plain calls' results: ``encodings`` made at first use.

    A plain call gives ids without ``tokenizers.Encoding`` objects (building them is most of the
    cost peek2 saves), but ``.tokens()``, ``.word_ids()``, ``.char_to_token()``, ``result[0]``
    and the rest read them: a result answers them as transformers' own path does, by encoding its
    texts on the backend the first time one is asked for (a bug hunt: they raised "not available
    when using Python based tokenizers", and ``is_fast`` was False, ``n_sequences`` None).
    """
    if _PLAIN_RESULT:
        return _PLAIN_RESULT[0]
    BatchEncoding = _names()[0]

    class PlainCallEncoding(BatchEncoding):  # type: ignore[misc,valid-type]
        """A ``BatchEncoding`` whose ``encodings`` are the backend's for the same call, made when first read."""

        @property
        def _encodings(self) -> Any:
            state = self.__dict__
            pending = state.get(_PENDING)
            if pending is not None:
                state[_MADE] = _backend_encodings(*pending)  # (raises, and stays pending, if the tokenizer changed)
                state[_PENDING] = None
            return state.get(_MADE)

        @_encodings.setter
        def _encodings(self, encodings: Any) -> None:
            self.__dict__[_PENDING] = None
            self.__dict__[_MADE] = encodings

        @property
        def is_fast(self) -> bool:
            return self.__dict__.get(_PENDING) is not None or self._encodings is not None

        def __reduce_ex__(self, protocol: Any) -> Any:
            # Pickled and deep-copied as the BatchEncoding transformers' own path makes (with its
            # encodings): readable where peek2 is not installed.
            return BatchEncoding, (self.data, self._encodings)

    PlainCallEncoding.__module__ = BatchEncoding.__module__
    _PLAIN_RESULT.append(PlainCallEncoding)
    return PlainCallEncoding


# A call's truncation and padding as set_truncation_and_padding gives them to the backend (None:
# none), and the rows of ids the call returned, for its encodings (see _shaped_call).
Shaping = tuple[dict[str, Any] | None, dict[str, Any] | None, list[list[int]]]


def _backend_encodings(
    backend: Any, engine: Tokenizer, text: str | tuple[str, ...], add_special_tokens: bool, split_special_tokens: bool, shaping: Shaping | None = None
) -> list[Any]:
    """The ``tokenizers.Encoding`` objects transformers' own path makes for a call of ``text``.

    Made with the backend's truncation and padding those of the call (off for a plain call), then
    set back, and checked against the call's ids (``engine``'s for a plain call): a tokenizer
    changed since the call (tokens added, a post-processor changed) raises rather than
    describing other ids than the result's.
    """
    with _backend_lock(backend):
        return _backend_encodings_held(backend, engine, text, add_special_tokens, split_special_tokens, shaping)


def _backend_encodings_held(
    backend: Any, engine: Tokenizer, text: str | tuple[str, ...], add_special_tokens: bool, split_special_tokens: bool, shaping: Shaping | None
) -> list[Any]:
    texts = [text] if isinstance(text, str) else list(text)
    truncation, padding, special = backend.truncation, backend.padding, backend.encode_special_tokens
    call_truncation, call_padding = (None, None) if shaping is None else shaping[:2]
    try:
        if call_truncation is not None:
            backend.enable_truncation(**call_truncation)
        elif truncation is not None:
            backend.no_truncation()
        if call_padding is not None:
            backend.enable_padding(**call_padding)
        elif padding is not None:
            backend.no_padding()
        if special != split_special_tokens:  # (the backend is shared: changed only where the call differs)
            backend.encode_special_tokens = split_special_tokens
        encodings = list(backend.encode_batch(texts, add_special_tokens=add_special_tokens))
    finally:
        if backend.encode_special_tokens != special:
            backend.encode_special_tokens = special
        if truncation is not None:
            backend.enable_truncation(**truncation)
        elif call_truncation is not None:
            backend.no_truncation()
        if padding is not None:
            backend.enable_padding(**padding)
        elif call_padding is not None:
            backend.no_padding()
    for k, (encoding, one) in enumerate(zip(encodings, texts)):
        expected = engine.encode(one, add_special_tokens, split_special_tokens=split_special_tokens) if shaping is None else shaping[2][k]
        if encoding.ids != expected:
            raise RuntimeError(
                "the tokenizer changed since this call (tokens added, or its post-processor changed): "
                "its encodings (.tokens(), .word_ids(), ...) no longer describe these input_ids; call it again"
            )
    return encodings


_FAST_RESULT: list[bool] = []  # [True] when _result may skip BatchEncoding.__init__ (checked once)


def _result(data: dict[str, Any], pending: tuple[Any, ...], tensor_type: Any = None) -> Any:
    """``BatchEncoding(data, encodings)``: the object transformers makes for a plain call, its
    encodings (``pending``: what the backend makes them from) made when first read.

    ``BatchEncoding.__init__`` took 1.1 us of a 5.3 us call (``UserDict.update`` key by key, the
    encodings and tensor arguments); with no tensor type it only sets ``data``, ``_encodings`` and
    ``_n_sequences``, so they are set directly (0.2 us). The first call checks that this gives the
    attributes ``__init__`` gives; with another transformers it falls back.
    """
    cls = _plain_result_class()
    if tensor_type is not None:  # (converted by __init__, as transformers' path converts its own)
        result = cls(data, tensor_type=tensor_type)
        result.__dict__[_PENDING] = pending
        result._n_sequences = 1
        return result
    if not _FAST_RESULT:
        BatchEncoding = _names()[0]
        made = BatchEncoding.__new__(BatchEncoding)
        made.data, made._encodings, made._n_sequences = {}, None, None
        _FAST_RESULT.append(vars(made) == vars(BatchEncoding({})))
    if _FAST_RESULT[0]:
        result = cls.__new__(cls)
        result.data = data
    else:
        result = cls(data)
    result.__dict__[_PENDING] = pending
    result._n_sequences = 1  # (one text per row: what the encodings say, n_sequences of a plain call)
    return result


_PLAIN_VALUES = {key: allowed if isinstance(allowed, tuple) else (allowed,) for key, allowed in _PLAIN.items()}
_PLAIN_CALL, _SHAPED_CALL, _OTHER_CALL = 0, 1, 2


def _call_kind(self: Any, text: Any, kwargs: dict[str, Any]) -> int:
    """What ``_encode_plus``'s keywords ask for: a plain call (``_plain_call``), one that pads,
    truncates or returns arrays (``_shaped_call``), or another (transformers' own path)."""
    _, TruncationStrategy, PaddingStrategy = _names()
    if not _is_text(text):
        return _OTHER_CALL
    kind = _PLAIN_CALL
    for key, value in kwargs.items():
        allowed = _PLAIN_VALUES.get(key)
        if allowed is not None:
            # (identity: is_split_into_words=0 is refused by transformers' path, where == False took the plain one; a bug hunt)
            for plain in allowed:
                if value is plain:
                    break
            else:
                if key != "return_tensors":
                    return _OTHER_CALL
                kind = _SHAPED_CALL
        elif key == "padding_strategy":
            if value != PaddingStrategy.DO_NOT_PAD:
                kind = _SHAPED_CALL
        elif key == "truncation_strategy":
            if value != TruncationStrategy.DO_NOT_TRUNCATE:
                kind = _SHAPED_CALL
        elif key not in _IGNORED and key not in _CALL_KEYWORDS:
            return _OTHER_CALL  # an argument these paths do not know: transformers' own path
    if kwargs.get("return_token_type_ids") is None and "token_type_ids" in self.model_input_names:
        return _OTHER_CALL
    return kind


def _plain_call(self: Any, engine: Tokenizer, text: str | list[str], kwargs: dict[str, Any]) -> Any:
    # The same side effects on the backend as transformers' path, which calls
    # set_truncation_and_padding(DO_NOT_PAD, DO_NOT_TRUNCATE, ...). TokenizersBackend's only turns
    # off the truncation and padding a previous call left set: done here (0.08 us against 0.47 us
    # through the method); a subclass's own method is called.
    backend = self._tokenizer
    if type(self).set_truncation_and_padding is _ORIGINAL["set_truncation_and_padding"]:
        if backend.truncation is not None:
            backend.no_truncation()
        if backend.padding is not None:
            backend.no_padding()
    else:
        _, TruncationStrategy, PaddingStrategy = _names()
        self.set_truncation_and_padding(
            padding_strategy=PaddingStrategy.DO_NOT_PAD,
            truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE,
            max_length=kwargs.get("max_length"),
            stride=kwargs.get("stride", 0),
            pad_to_multiple_of=kwargs.get("pad_to_multiple_of"),
            padding_side=kwargs.get("padding_side"),
        )
    split_special_tokens = kwargs.get("split_special_tokens")
    if split_special_tokens is None:
        split_special_tokens = self.split_special_tokens
    if backend.encode_special_tokens != split_special_tokens:
        backend.encode_special_tokens = split_special_tokens  # (tokenizers refuses what is not a bool, as unpatched)
    # (0 equal to the backend's False is left there unchecked, as transformers leaves it: the
    # engine, which takes only a bool, raised TypeError; a bug hunt)
    split_special_tokens = bool(split_special_tokens)
    add_special_tokens = kwargs.get("add_special_tokens", True)
    mask = kwargs.get("return_attention_mask")
    if mask is None:
        mask = "attention_mask" in self.model_input_names
    max_length, verbose = kwargs.get("max_length"), kwargs.get("verbose", True)
    try:
        if isinstance(text, str):  # one text: no list of rows to build and unwrap (a third of the glue)
            row = engine.encode(text, add_special_tokens, split_special_tokens=split_special_tokens)
            self._eventual_warn_about_too_long_sequence(row, max_length, verbose)
            one = {"input_ids": row, "attention_mask": [1] * len(row)} if mask else {"input_ids": row}
            return _result(one, (backend, engine, text, add_special_tokens, split_special_tokens))
        ids = [engine.encode(t, add_special_tokens, split_special_tokens=split_special_tokens) for t in text]
    except ValueError as error:
        # A lone surrogate: transformers' own path raises TypeError (from tokenizers), and code
        # that catches it must keep catching it; peek2's message names the character and index.
        if any(first_surrogate(t) >= 0 for t in ([text] if isinstance(text, str) else text)):
            raise TypeError(str(error)) from None
        raise
    for row in ids:
        self._eventual_warn_about_too_long_sequence(row, max_length, verbose)
    data: dict[str, Any] = {"input_ids": ids}
    if mask:
        data["attention_mask"] = [[1] * len(row) for row in ids]
    # (the texts as they were: a list the caller changes after the call must not change its encodings)
    return _result(data, (backend, engine, tuple(text), add_special_tokens, split_special_tokens))


def _shaped_call(self: Any, engine: Tokenizer, text: Any, kwargs: dict[str, Any]) -> Any:
    """A call of one text or a batch that pads or truncates, answered from peek2's ids as the
    backend pads and truncates them; None (before any effect) for a call it leaves to transformers.

    transformers' own path sets the backend's truncation and padding (set_truncation_and_padding,
    whose settings are made here too: the backend is left as that path leaves it), then has the
    backend encode.
    That path with the Peek2 plugin (a Python pre-tokenizer the backend calls for every text) took
    1.3-1.8x the unpatched time of ``tok(batch, padding=True)`` and the like, where a plain call took 0.05x.
    What the backend does to one sequence a text (tokenizers' ``post_process`` and
    ``pad_encodings``, 0.23):
    - truncation takes the ids before the post-processor's special tokens down to ``max_length``
      less their number, from the right or the left (``truncation_side``), for ``longest_first``
      and ``only_first`` alike (one sequence); a ``max_length`` below their number is left to
      the backend (its subtraction does not stop at zero), as is a stride (checked there);
    - padding takes each row to the longest row's length or to ``max_length``
      (``padding="max_length"``), rounded up to ``pad_to_multiple_of``, with ``pad_token_id`` and
      attention 0 on ``padding_side``; a longer row stays as it is.
    """
    _, TruncationStrategy, PaddingStrategy = _names()
    if type(self).set_truncation_and_padding is not _ORIGINAL["set_truncation_and_padding"]:
        return None
    add_special_tokens = kwargs.get("add_special_tokens", True)
    padding = kwargs.get("padding_strategy", PaddingStrategy.DO_NOT_PAD)
    truncation = kwargs.get("truncation_strategy", TruncationStrategy.DO_NOT_TRUNCATE)
    max_length, stride, multiple = kwargs.get("max_length"), kwargs.get("stride", 0), kwargs.get("pad_to_multiple_of")
    padding_side = kwargs.get("padding_side")
    if type(add_special_tokens) is not bool or not isinstance(padding, PaddingStrategy) or not isinstance(truncation, TruncationStrategy):
        return None
    if max_length is not None and (type(max_length) is not int or max_length < 0):
        return None
    prefix, suffix = (engine._prefix_ids, engine._suffix_ids) if add_special_tokens else ([], [])
    added = len(prefix) + len(suffix)
    limit = -1  # the most ids a text keeps before its special tokens (-1: no truncation)
    truncation_target: dict[str, Any] | None = None
    if truncation != TruncationStrategy.DO_NOT_TRUNCATE:
        if truncation not in (TruncationStrategy.LONGEST_FIRST, TruncationStrategy.ONLY_FIRST) or max_length is None:
            return None
        if type(stride) is not int or stride != 0 or self.truncation_side not in ("right", "left"):
            return None
        limit = max_length - added
        if limit < 0:
            return None
        truncation_target = {"max_length": max_length, "stride": stride, "strategy": truncation.value, "direction": self.truncation_side}
    padding_target: dict[str, Any] | None = None
    if padding != PaddingStrategy.DO_NOT_PAD:
        side = padding_side if padding_side is not None else self.padding_side
        pad_id, pad_token = self.pad_token_id, self.pad_token
        if side not in ("right", "left") or type(pad_id) is not int or pad_id < 0 or not isinstance(pad_token, str):
            return None
        if multiple is not None and (type(multiple) is not int or multiple < 0):
            return None
        length = max_length if padding == PaddingStrategy.MAX_LENGTH else None
        padding_target = {
            "length": length, "direction": side, "pad_id": pad_id, "pad_token": pad_token,
            "pad_type_id": self.pad_token_type_id, "pad_to_multiple_of": multiple,
        }  # fmt: skip
    # What set_truncation_and_padding does (the original, checked above) with the targets made
    # here: its own call read pad_token_id, pad_token and the sides again (a third of a short
    # text's call; a bug hunt: tok("", padding=True) took 1.6x the unpatched time).
    backend = self._tokenizer
    if truncation_target is None:
        if backend.truncation is not None:
            backend.no_truncation()
    else:
        current = backend.truncation
        if current is None or {key: current.get(key) for key in truncation_target} != truncation_target:
            backend.enable_truncation(**truncation_target)
    if padding_target is None:
        if backend.padding is not None:
            backend.no_padding()
    elif backend.padding != padding_target:
        backend.enable_padding(**padding_target)
    split_special_tokens = kwargs.get("split_special_tokens")
    if split_special_tokens is None:
        split_special_tokens = self.split_special_tokens
    if backend.encode_special_tokens != split_special_tokens:
        backend.encode_special_tokens = split_special_tokens
    split_special_tokens = bool(split_special_tokens)
    texts = [text] if isinstance(text, str) else list(text)
    try:
        rows = [engine.encode(one, add_special_tokens, split_special_tokens=split_special_tokens) for one in texts]
    except ValueError as error:  # a lone surrogate: TypeError, as transformers' own path (see _plain_call)
        if any(first_surrogate(one) >= 0 for one in texts):
            raise TypeError(str(error)) from None
        raise
    if limit >= 0:
        right = self.truncation_side == "right"
        for k, row in enumerate(rows):
            keep = len(row) - added
            if keep > limit:
                content = row[len(prefix) : len(row) - len(suffix)]
                content = content[:limit] if right else content[keep - limit :]
                rows[k] = [*prefix, *content, *suffix]
    masks = [[1] * len(row) for row in rows]
    if padding_target is not None:
        target = padding_target["length"]
        if target is None:
            target = max(len(row) for row in rows)
        if multiple and target % multiple:
            target += multiple - target % multiple
        pad_id, left = padding_target["pad_id"], padding_target["direction"] == "left"
        for k, row in enumerate(rows):
            missing = target - len(row)
            if missing > 0:
                rows[k] = [pad_id] * missing + row if left else row + [pad_id] * missing
                masks[k] = [0] * missing + masks[k] if left else masks[k] + [0] * missing
    verbose = kwargs.get("verbose", True)
    for row in rows:
        self._eventual_warn_about_too_long_sequence(row, max_length, verbose)
    mask = kwargs.get("return_attention_mask")
    if mask is None:
        mask = "attention_mask" in self.model_input_names
    data: dict[str, Any] = {"input_ids": rows, "attention_mask": masks} if mask else {"input_ids": rows}
    tensor_type = kwargs.get("return_tensors")
    if isinstance(text, str) and tensor_type is None:  # one text: its row, not a batch of one
        data = {key: value[0] for key, value in data.items()}
    shaping: Shaping = (truncation_target, padding_target, [list(row) for row in rows])
    pending = (backend, engine, text if isinstance(text, str) else tuple(text), add_special_tokens, split_special_tokens, shaping)
    return _result(data, pending, tensor_type)
