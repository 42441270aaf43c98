"""One encode in a process of its own, for ``peek2.serving.aio`` (which runs ``main`` with ``python -I
-c``, on its own import path: see ``aio._encode_in_worker``).

Reads one pickled ``(tokenizer, text, add_special_tokens, split_special_tokens)`` from standard
input (a tokenizer pickles as its file's path and content hash) and writes the pickled
``("ids", list)`` or ``("error", exception)`` to standard output. Nothing of the caller's program
is imported (unlike multiprocessing's spawn, which imports its ``__main__``).
"""

from __future__ import annotations

import pickle
import sys


def main() -> int:
    tok, text, add_special_tokens, split_special_tokens = pickle.load(sys.stdin.buffer)
    try:
        result: tuple[str, object] = ("ids", tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens))
    except Exception as error:  # handed to the caller, who raises it
        result = ("error", error)
    pickle.dump(result, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
