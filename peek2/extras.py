"""What to install for a part of peek2 that needs an optional package, said the one way.

peek2 is installed from a checkout (it is not on PyPI: ``pip install 'peek2[corpus]'`` found
nothing, and would install whatever someone published under that name; a bug hunt), so a hint
names the packages themselves, then the extra for a checkout. ``EXTRAS`` is the
``[project.optional-dependencies]`` of pyproject.toml (tests/test_build.py checks them equal).
"""

from __future__ import annotations

import importlib
from typing import Any

EXTRAS: dict[str, tuple[str, ...]] = {
    "corpus": ("numpy>=1.24", "pyarrow>=14", "zstandard>=0.22"),
    "ray": ("numpy>=1.24", "pyarrow>=14", "zstandard>=0.22", "ray[data]>=2.51"),
    "transformers": ("transformers==5.23.0",),
    "datasets": ("datasets>=2.14",),
}

# The extra that brings each optional package imported by peek2.
EXTRA_OF_PACKAGE = {"numpy": "corpus", "pyarrow": "corpus", "zstandard": "corpus", "ray": "ray", "transformers": "transformers", "datasets": "datasets"}


def install_hint(extra: str) -> str:
    """``pip install "numpy>=1.24" ... (peek2's corpus extra: pip install ".[corpus]" in a peek2 checkout)``."""
    packages = " ".join(f'"{requirement}"' for requirement in EXTRAS[extra])
    return f'pip install {packages} (peek2\'s {extra} extra: pip install ".[{extra}]" in a peek2 checkout)'


def import_optional(name: str, needed_by: str) -> Any:
    """Module ``name``, or ModuleNotFoundError saying what needs it and what to install (the bare
    "No module named 'numpy'" named neither). A package that is there but fails to load (under
    ``ulimit -v``) raises its own error."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        package = name.split(".")[0]
        if error.name != package:
            raise
        raise ModuleNotFoundError(f"{needed_by} needs {package}: {package_hint(package)}", name=package) from None


def package_hint(package: str) -> str:
    """The hint for an optional package by its import name (``pip install NAME`` if no extra has it)."""
    extra = EXTRA_OF_PACKAGE.get(package)
    return install_hint(extra) if extra is not None else f"pip install {package}"
