"""Transparent huge pages for the engine's large tables (Linux): fewer TLB misses on random reads.

An encode reads a few large tables at random: the merge table (8 MB for Llama-3), the
vocabulary keyed for lookups in place (4 MB), the filters of both (384 KB), the table of
whole characters and the byte-pair table (512 KB each), the pair cache and the piece cache.
With 4 KB pages they span thousands of pages, more than the TLB holds, so many of those reads
also walk the page tables (in a virtual machine, a walk of two levels of tables). ``advise``
asks the kernel to back each table with 2 MB pages: ``madvise(MADV_HUGEPAGE)``, then
``MADV_COLLAPSE`` (Linux 6.1 and later) so that it happens at once rather than whenever
``khugepaged`` gets there. Contents and addresses stay the same. A table's span is rounded out
to 2 MB boundaries, so the memory next to it may be backed by huge pages too: at most 2 MB more
resident memory at each end.

``MADV_COLLAPSE`` copies the tables into huge pages, which takes time (about 60 ms of a load of
Qwen3's or Llama-3's file, a third of a load from the load cache): it runs in a thread of its own
(``ctypes`` lets go of the GIL during the call), so that a load returns without waiting for it
and the copy runs beside the caller's first encodes. The thread holds the tables until it ends.
A fork waits for it first (``os.register_at_fork``): a child then starts with no thread of
peek2 running (Python 3.12 warns of a fork in a process with threads), and with the tables
already collapsed. ``wait()`` waits for it too (a benchmark that times what follows a load).

Measured (process time of an encode of 300K characters, Llama-3, piece cache emptied first):
before the merge filter (``peek2.bpe.merge_table.MergeTable``), in 6 alternating processes a side, best
of 7 each: XNLI -7%, Chinese -9%, 6,000 XNLI sentences -5%, English unchanged. With it, two
tokenizers in one process alternated 20 times (median of the paired ratios): XNLI, sentences
and English -2 to -3%, Chinese -1%. Collapsing 16-20 MB for Llama-3 took a load ~60 ms more while
it ran in the caller's thread; in a thread of its own, a load of Qwen3's file with no load cache,
fresh processes alternated: 0.52-0.55 s -> 0.47-0.49 s (0.47 s with ``PEEK2_HUGE_PAGES=0``),
from the load cache 0.18-0.20 s -> 0.17-0.18 s.
The ids' shared int objects (``peek2.bpe.merger.shared_ints``) gained nothing and are left alone.

Nothing happens off Linux, where the kernel refuses (transparent huge pages set to "never",
an older kernel: then only the advice is given), without ``ctypes``, or when the environment
sets ``PEEK2_HUGE_PAGES=0``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

try:
    import ctypes
except ImportError:  # a Python built without _ctypes: no huge pages, nothing else changes
    ctypes = None  # type: ignore[assignment]

HUGE_PAGE = 2 << 20
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25

ENV_SWITCH = "PEEK2_HUGE_PAGES"


if ctypes is not None:

    class _Buffer(ctypes.Structure):
        """CPython's ``Py_buffer``, to read the address of a buffer-protocol object."""

        _fields_ = [
            ("buf", ctypes.c_void_p),
            ("obj", ctypes.c_void_p),
            ("len", ctypes.c_ssize_t),
            ("itemsize", ctypes.c_ssize_t),
            ("readonly", ctypes.c_int),
            ("ndim", ctypes.c_int),
            ("format", ctypes.c_char_p),
            ("shape", ctypes.c_void_p),
            ("strides", ctypes.c_void_p),
            ("suboffsets", ctypes.c_void_p),
            ("internal", ctypes.c_void_p),
        ]


_madvise: Any = None  # libc's madvise, or False where it is not to be used


def _libc_madvise() -> Any:
    global _madvise
    if _madvise is None:
        _madvise = False
        if ctypes is not None and sys.platform.startswith("linux") and os.environ.get(ENV_SWITCH, "1") != "0":
            try:
                madvise = ctypes.CDLL(None, use_errno=True).madvise
                madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                madvise.restype = ctypes.c_int
                _madvise = madvise
            except (OSError, AttributeError):
                pass
    return _madvise


def _span(table: object) -> tuple[int, int]:
    """(address, size in bytes) of a buffer-protocol object's memory."""
    view = _Buffer()
    if ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(table), ctypes.byref(view), 0) != 0:
        raise TypeError(f"{type(table).__name__} does not expose a buffer")
    try:
        return view.buf or 0, view.len
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


def advise(tables: list[object], min_bytes: int = 256 << 10) -> int:
    """Ask for huge pages under each table of at least ``min_bytes``; returns the bytes advised (0 if none).

    ``tables`` are objects with the buffer protocol (``vec[i64]``, ``bytes``...), kept alive by
    the caller. Never raises for a kernel's refusal: huge pages are an optimisation only.
    """
    if ctypes is None:
        return 0  # type: ignore[unreachable]  # (mypy sees the import succeed)
    spans: list[tuple[int, int]] = []
    for table in tables:
        address, size = _span(table)
        if address and size >= min_bytes:
            start = address & ~(HUGE_PAGE - 1)
            end = (address + size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
            spans.append((start, end))
    madvise = _libc_madvise()
    if not madvise:
        return 0
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    advised: list[tuple[int, int]] = []
    for start, end in merged:
        if madvise(start, end - start, MADV_HUGEPAGE) == 0:
            advised.append((start, end))
    if advised:
        collapse = threading.Thread(target=_collapse, args=(madvise, advised, list(tables)), name="peek2-huge-pages", daemon=True)
        with _lock:
            _collapsing[:] = [thread for thread in _collapsing if thread.is_alive()]
            try:
                collapse.start()
            except RuntimeError:  # no thread to be had (its stack, under ulimit -v): khugepaged will collapse them
                pass
            else:
                _collapsing.append(collapse)
    return sum(end - start for start, end in advised)


_lock = threading.Lock()
_collapsing: list[threading.Thread] = []


def _collapse(madvise: Any, spans: list[tuple[int, int]], tables: list[object]) -> None:
    """Collapse ``spans`` into huge pages now; ``tables`` (their owners) stay alive meanwhile."""
    for start, end in spans:
        madvise(start, end - start, MADV_COLLAPSE)  # refused before Linux 6.1: khugepaged will do it


def wait() -> None:
    """Wait until the tables advised so far are collapsed (or the kernel refused), and their
    threads have ended."""
    with _lock:
        threads = list(_collapsing)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=wait)
