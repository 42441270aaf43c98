"""The engine behind one lock where it runs as plain Python (``PEEK2_PURE=1``, a ``PEEK2_PURE_BUILD=1`` install).

Compiled, a call into the engine holds the GIL from its start to its end: mypyc code runs no
bytecode, so threads that share a tokenizer never meet inside it (``BytePairEncoder._run`` keeps
its ids buffer apart for the few places where Python code does run in the middle). As plain
Python, the interpreter switches threads between any two bytecodes, and two threads encoding
with one tokenizer wrote into each other's scratch arrays and ids buffer: silently wrong ids (3,342
of 4,500 calls of three threads, a thread test of ``peek2.bpe.growing_piece.LongPieces``). Here
every method call of the engine holds one reentrant lock, so the plain-Python path gives the
compiled path's ids under threads too; its speed was never the point.
"""

from __future__ import annotations

import threading
from typing import Any

from peek2.bpe import merger


def engine_is_compiled() -> bool:
    """Whether ``peek2.bpe.merger`` is the mypyc-compiled extension."""
    return not (merger.__file__ or "").endswith(".py")


class LockedEngine:
    """A ``BytePairEncoder`` whose methods run one call at a time, and whose attributes are its own."""

    def __init__(self, engine: merger.BytePairEncoder) -> None:
        object.__setattr__(self, "_engine", engine)
        object.__setattr__(self, "_lock", threading.RLock())  # (reentrant: LongPieces calls back into the engine)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._engine, name)
        if not callable(value) or name == "long_pieces":
            return value
        lock = self._lock

        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return value(*args, **kwargs)

        return locked

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._engine, name, value)
