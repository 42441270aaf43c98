"""The package's layout: each stage in its own subpackage, and imports that go one way.

The engine (``pretokenize``, ``normalize``, ``bpe``) never imports the ``Tokenizer`` facade, the
loaders' file readers, the serving modules or the integrations; the serving modules name the
``Tokenizer`` for type checking only, so that importing them never needs the facade first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import peek2

PACKAGE = Path(peek2.__file__).parent
ENGINE = ("pretokenize", "normalize", "bpe")
# What the engine may use besides itself: the spec loaders hand it, and the byte-level alphabet.
ENGINE_MAY_USE = ("peek2.spec", "peek2.formats.byte_level")


def imports(path: Path, runtime_only: bool) -> set[str]:
    """The peek2 modules ``path`` imports (``runtime_only``: not those under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                skipped.update(id(child) for child in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("peek2"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("peek2"))
    return found


def test_the_engine_imports_only_itself() -> None:
    for package in ENGINE:
        for path in sorted((PACKAGE / package).glob("*.py")):
            for module in imports(path, runtime_only=False):
                inside = any(module == f"peek2.{p}" or module.startswith(f"peek2.{p}.") for p in ENGINE)
                allowed = inside or any(module == m or module.startswith(m + ".") for m in ENGINE_MAY_USE)
                assert allowed, f"{path.relative_to(PACKAGE.parent)} imports {module}"


def test_serving_names_the_facade_for_type_checking_only() -> None:
    for path in sorted((PACKAGE / "serving").glob("*.py")):
        assert not any(m.startswith("peek2.tokenizer") for m in imports(path, runtime_only=True)), path.name
    # The loaders' disk cache builds the engine's tables, not a Tokenizer.
    assert not any(m.startswith("peek2.tokenizer") for m in imports(PACKAGE / "formats" / "load_cache.py", runtime_only=False))


def test_compiled_modules_live_in_their_stage() -> None:
    for name in peek2.COMPILED_MODULES:
        assert name.split(".")[1] in (*ENGINE, "serving", "plugin"), name
