"""The checks of what the batch and decode calls are given, shared by the ``Tokenizer`` facade and
``peek2.serving.aio`` (which may not import the facade at run time), so both take and refuse the
same inputs with the same messages."""

from __future__ import annotations

import operator
from typing import Any, Iterable


def check_texts(texts: object, call: str) -> None:
    """A batch call's refusal of ``texts`` as a whole (``call`` names it); each text is checked as it is encoded."""
    if isinstance(texts, (str, bytes, bytearray, memoryview, set, frozenset, dict)) or not isinstance(texts, Iterable):
        # (a set or a dict has no order to give the ids in: tokenizers refuses them too)
        kind = "a single str" if isinstance(texts, str) else type(texts).__name__
        raise TypeError(f"{call} expects a sequence of str, not {kind}")


def text_error(index: int, error: Exception) -> Exception:
    """``error``, raised by one text of a batch, naming which."""
    return type(error)(f"texts[{index}]: {error}")


def check_ids(ids: object) -> None:
    """decode's refusals of ``ids`` as a whole (each id is checked as it is decoded)."""
    if isinstance(ids, (str, bytes, bytearray, set, frozenset, dict)) or not isinstance(ids, Iterable):
        # (a set or a dict has no order to decode in: tokenizers refuses them too)
        raise TypeError(f"ids must be a sequence of int, not {type(ids).__name__}")
    if is_array(ids) and getattr(getattr(ids, "dtype", None), "kind", "i") not in "iuO":
        raise TypeError(f"ids must be integers, not an array of {getattr(ids, 'dtype')}")
    if is_array(ids) and getattr(ids, "ndim", 1) != 1:
        # (a 2-D array was refused for its first row: "ids must be int, not list"; a bug hunt)
        raise TypeError(f"ids must be a sequence of int, not a {getattr(ids, 'ndim')}-d {type(ids).__name__}")


def is_array(ids: object) -> bool:
    """A NumPy array (or anything with ``tolist``), turned into Python ints in one C call."""
    return hasattr(ids, "tolist") and hasattr(ids, "dtype")


def check_count(value: object, name: str, low: int, high: int | None = None, unit: str = "") -> None:
    """A count argument: TypeError for anything but an int (a bool too), ValueError out of
    ``low``..``high`` (``high`` None: no upper bound). (Both were ValueError: ``max_prompts=None``
    is a wrong type, not a wrong value; a bug hunt.)"""
    bounds = f">= {low}" if high is None else f"from {low} to {high:,}"
    what = f"{name} must be an int {bounds}{f' ({unit})' if unit else ''}"
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what}, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{what}, not {value!r}")


def plain_int(value: Any) -> Any:
    """``value`` as a Python int where it is a NumPy integer (not a NumPy bool); anything else as
    it is, for the caller to check: NumPy integers are integers, as everywhere in peek2."""
    if (
        type(value).__module__ == "numpy"
        and hasattr(value, "__index__")
        and type(value).__name__ not in ("bool", "bool_")
        and getattr(value, "ndim", 0) == 0  # (an array of ids is not one)
    ):
        return operator.index(value)
    return value
