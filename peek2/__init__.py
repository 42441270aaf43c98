"""peek2: a regex-free, mypyc-compiled Peek2 pre-tokenizer for byte-level BPE models.

>>> import peek2
>>> peek2.split("Hello world's 123!")
['Hello', ' world', "'s", ' ', '123', '!']

Set ``PEEK2_PURE=1`` before importing to run the plain-Python modules even where
compiled ones are installed (for debugging, profiling, and comparing the two).
"""

from __future__ import annotations

import signal
import sys


def _located_as_main() -> bool:
    """Whether Python is importing this package to run ``python -m peek2`` (``sys.argv[0]`` is
    "-m" while it locates the module): Ctrl-C during the imports then ends the command quietly, as
    in the ``peek2`` console script (``peek2_command.py``), and ``peek2/__main__.py`` restores
    Python's handler once ``peek2.cli`` is imported (it printed a traceback through importlib; a
    bug hunt)."""
    if sys.argv[:1] != ["-m"]:
        return False
    args = getattr(sys, "orig_argv", [])[1:]
    k = 0
    while k < len(args):
        arg = args[k]
        if arg == "--check-hash-based-pycs":
            k += 2  # (its value follows)
            continue
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            return False  # a script, a long option, stdin: not "-m peek2"
        for at in range(1, len(arg)):
            option = arg[at]
            if option in "WX":  # (its value is the rest of the argument, or the next one: "-Xfrozen_modules=off")
                k += 1 if at + 1 < len(arg) else 2
                break
            if option == "c":
                return False
            if option == "m":
                rest = arg[at + 1 :]
                return (rest or (args[k + 1] if k + 1 < len(args) else "")) == "peek2"
        else:
            k += 1
    return False


if _located_as_main() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, signal.SIG_DFL)

import importlib
import importlib.machinery
import importlib.util
import os
from types import ModuleType
from typing import Optional, Sequence

__version__ = "0.1.0"

# Modules that setup.py compiles with mypyc; __init__ stays uncompiled so this switch works.
COMPILED_MODULES = (
    "peek2.bpe.decode",
    "peek2.bpe.growing_piece",
    "peek2.bpe.merge_table",
    "peek2.bpe.merger",
    "peek2.bpe.piece_cache",
    "peek2.bpe.offsets",
    "peek2.bpe.token_prefixes",
    "peek2.bpe.vocab",
    "peek2.bpe.whole_chars",
    "peek2.normalize.added_tokens",
    "peek2.normalize.aligned",
    "peek2.normalize.scalar_set",
    "peek2.plugin.cuts",
    "peek2.pretokenize.families",
    "peek2.pretokenize.pattern",
    "peek2.pretokenize.scanner",
    "peek2.pretokenize.tables",
    "peek2.serving.stream_engine",
)


class _PureFinder:
    """Meta-path finder that loads peek2's compiled modules from their .py sources."""

    @staticmethod
    def find_spec(
        name: str, path: Optional[Sequence[str]] = None, target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if name not in COMPILED_MODULES:
            return None
        source = os.path.join(os.path.dirname(__file__), *name.split(".")[1:]) + ".py"
        return importlib.util.spec_from_file_location(name, source)


PURE = os.environ.get("PEEK2_PURE", "") == "1"
if PURE:
    sys.meta_path.insert(0, _PureFinder())

# This is the public API of peek2.
from peek2.pretokenize.families import FAMILIES as FAMILIES  # noqa: E402
from peek2.pretokenize.families import PATTERNS as PATTERNS  # noqa: E402
from peek2.pretokenize.families import SEQUENCES as SEQUENCES  # noqa: E402
from peek2.pretokenize.families import TIKTOKEN_PATTERNS as TIKTOKEN_PATTERNS  # noqa: E402
from peek2.pretokenize.families import UnsupportedPatternError as UnsupportedPatternError  # noqa: E402
from peek2.pretokenize.pattern import Peek2Pattern as Peek2Pattern  # noqa: E402
from peek2.pretokenize.public import split as split  # noqa: E402
from peek2.pretokenize.public import split_offsets as split_offsets  # noqa: E402
from peek2.spec import TokenizerFormatError as TokenizerFormatError  # noqa: E402
from peek2.tokenizer import AmbiguousAddedTokensWarning as AmbiguousAddedTokensWarning  # noqa: E402
from peek2.tokenizer import Encoding as Encoding  # noqa: E402
from peek2.tokenizer import Tokenizer as Tokenizer  # noqa: E402
from peek2.tokenizer import count as count  # noqa: E402
from peek2.tokenizer import decode as decode  # noqa: E402
from peek2.tokenizer import encode as encode  # noqa: E402
# The tokenizers plugin and the transformers patch (they import tokenizers/transformers only when called).
from peek2.plugin import Peek2 as Peek2  # noqa: E402
from peek2.plugin import patch as patch  # noqa: E402
from peek2.plugin import unpatch as unpatch  # noqa: E402
from peek2.plugin.transformers_patch import patch_transformers as patch_transformers  # noqa: E402
from peek2.plugin.transformers_patch import unpatch_transformers as unpatch_transformers  # noqa: E402


def _is_extension(module_name: str) -> bool:
    origin = getattr(importlib.import_module(module_name), "__file__", None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


COMPILED: bool = all([_is_extension(name) for name in COMPILED_MODULES])  # (imports each one)
"""True when every hot module is the mypyc-compiled extension (False in pure mode)."""


def _warn_slow_twin() -> None:
    """Say once that the uncompiled modules run, unless PEEK2_PURE=1 or a PEEK2_PURE_BUILD=1 install asked for them.

    The usual cause: Python started in a source checkout, whose ``peek2/`` comes first on sys.path,
    while the compiled build is installed elsewhere (``pip install .``).
    """
    import warnings
    from importlib import metadata

    here = os.path.dirname(os.path.abspath(__file__))
    hint = "build the extensions (pip install -e .), or set PEEK2_PURE=1 to run the pure modules on purpose"
    try:
        for distribution in metadata.distributions(name="peek2"):  # (in sys.path's order)
            wheel = distribution.read_text("WHEEL")
            if wheel is None:
                # A checkout's peek2.egg-info, left by its build: not an install. Taken for one, it
                # hid the compiled build installed elsewhere, and the hint said to build.
                continue
            if "Root-Is-Purelib: true" in wheel:
                return  # a build without extensions, PEEK2_PURE_BUILD=1's: chosen (it warned at every import)
            built = [f for f in distribution.files or () if str(f).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
            if built:
                installed = os.path.dirname(os.path.abspath(str(distribution.locate_file(built[0]))))
                if installed != here:
                    hint = (
                        f"the compiled build is installed in {installed}; run from outside {os.path.dirname(here)}, whose "
                        "peek2/ comes first on sys.path, or set PEEK2_PURE=1 to run the pure modules on purpose"
                    )
            break
    except OSError:
        pass
    warnings.warn(f"peek2 is running its uncompiled modules from {here} (about 50x slower): {hint}", RuntimeWarning, stacklevel=3)


if not COMPILED and not PURE:
    _warn_slow_twin()
