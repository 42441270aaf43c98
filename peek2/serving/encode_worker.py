"""One encode in a process of its own, for ``peek2.serving.aio`` (which runs ``main`` with ``python -I
-c``, on its own import path: see ``aio._encode_in_worker``).

Reads one pickled ``(tokenizer, text, add_special_tokens, split_special_tokens)`` from standard
input (a tokenizer pickles as its file's path and content hash) and writes the pickled
``("ids", bytes)`` (the ids as unsigned 32-bit integers of ``IDS_TYPECODE``) or ``("error",
exception)`` to standard output. Nothing of the caller's program is imported (unlike
multiprocessing's spawn, which imports its ``__main__``).

The ids go as an array, not a list: unpickling a list of 3 million ids (Qwen3, 2 million combining
marks of two classes, a run no stream can cut) held the caller's event loop 60 ms in one step, and
its longest stall was 72-94 ms; the caller makes its list from the array in slices.
"""

from __future__ import annotations

import pickle
import sys
from array import array
from typing import Literal

IDS_TYPECODE: Literal["I", "L"] = "I" if array("I").itemsize == 4 else "L"
"""The ``array`` type code of the ids sent: unsigned, 32 bits (``L`` holds at least 32 where ``I`` does not)."""


def main() -> int:
    tok, text, add_special_tokens, split_special_tokens = pickle.load(sys.stdin.buffer)
    try:
        ids = tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens)
        result: tuple[str, object] = ("ids", array(IDS_TYPECODE, ids).tobytes())
    except Exception as error:  # handed to the caller, who raises it
        result = ("error", error)
    pickle.dump(result, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
