"""Build: compile the hot modules with mypyc (the default), or nothing with PEEK2_PURE_BUILD=1.

Compilation failures are errors, never a silent fallback to pure Python: the
only pure build is the explicit one. ``pip install -e .`` compiles in place
(setuptools runs build_ext --inplace for editable installs).
"""

import os
import sys

from setuptools import setup

# Sorted so that the generated C is deterministic. One compilation unit, so calls
# and Final reads across these modules are early-bound.
HOT_MODULES = sorted(
    [
        "peek2/bpe/decode.py",
        "peek2/bpe/growing_piece.py",
        "peek2/bpe/merge_table.py",
        "peek2/bpe/merger.py",
        "peek2/bpe/piece_cache.py",
        "peek2/bpe/token_prefixes.py",
        "peek2/bpe/offsets.py",
        "peek2/bpe/vocab.py",
        "peek2/bpe/whole_chars.py",
        "peek2/normalize/added_tokens.py",
        "peek2/normalize/aligned.py",
        "peek2/normalize/scalar_set.py",
        "peek2/plugin/cuts.py",
        "peek2/pretokenize/families.py",
        "peek2/pretokenize/pattern.py",
        "peek2/pretokenize/scanner.py",
        "peek2/pretokenize/tables.py",
        "peek2/serving/stream_engine.py",
    ]
)

if os.environ.get("PEEK2_PURE_BUILD") == "1":
    ext_modules = []
else:
    from mypyc.build import mypycify

    ext_modules = mypycify(
        ["--strict", "--warn-unreachable", *HOT_MODULES],
        opt_level=os.environ.get("MYPYC_OPT_LEVEL", "3"),
        debug_level=os.environ.get("MYPYC_DEBUG_LEVEL", "1"),
        group_name="peek2",
    )

    if sys.platform.startswith("linux"):  # GCC (clang assumes this already)
        # The generated functions are exported symbols of a shared object, so GCC must assume they
        # may be interposed: every call between them went through the PLT and none was inlined
        # (the piece cache's slot function, the piece key). They are never interposed.
        # Functions on 64-byte lines and loops on 32-byte ones: where a hot loop falls otherwise
        # depends on the code before it in the one generated file. A change elsewhere in the
        # merger (stop 53) moved ``_merge_symbols`` 32 bytes, with its code byte for byte the same,
        # and ``merge_whole`` of 2,040 repeated spaces went from 33 to 41-47 ms a hundred (best of
        # 5, alternating processes); aligned, 32.6-32.8 ms. bench_mixed.py and bench_hunt_cases.py's
        # rank-file and long-word cases within the noise of the build without these flags.
        for extension in ext_modules:
            extension.extra_compile_args += ["-fno-semantic-interposition", "-falign-functions=64", "-falign-loops=32"]

setup(ext_modules=ext_modules)
