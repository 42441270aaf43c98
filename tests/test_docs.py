"""Every example in README.md and docs/*.md runs (issue 23 item 15).

Each ```python block runs as a script of its own (top-level ``await`` allowed) in a fresh folder
holding the files the examples name: ``tokenizer.json`` (Llama-3.1), ``tokenizer.model`` (Llama-3.2's
rank file), a model folder ``Llama-3.1-8B/``, GPT-2's ``gpt2/encoder.json`` and ``gpt2/vocab.bpe``, and ``corpus.jsonl`` (200 short documents). Blocks with ``>>>`` prompts are doctests and run
through doctest (tests/test_api.py runs README's). Each ``peek2 ...`` command line of a ```sh block
runs in the same folder (what comes before ``&&`` installs, and is the CI's own set-up step).
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(language: str) -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((page.name, line, match.group(2)))
    return found


PYTHON = [b for b in blocks("python") if ">>>" not in b[2]]
DOCTESTS = [b for b in blocks("python") if ">>>" in b[2]]
COMMANDS = [
    (page, line, command.split("&&")[-1].split(" #")[0].strip())
    for page, line, body in blocks("sh")
    for command in body.splitlines()
    if re.search(r"(^|\| )peek2 ", command.split("&&")[-1])
]


@pytest.fixture()
def folder(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json", tmp_path / "tokenizer.json")
    shutil.copy(data_dir / "tokenizers" / "llama3.2" / "tokenizer.model", tmp_path / "tokenizer.model")
    shutil.copytree(data_dir / "tokenizers" / "llama3.1", tmp_path / "Llama-3.1-8B")
    shutil.copytree(data_dir / "tokenizers" / "gpt2", tmp_path / "gpt2")
    # A small corpus for docs/corpus.md: prose, code, a chat turn, an empty document.
    texts = ["Hello world, it's peek2!", "def f(x):\n    return x * 2\n", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "", "Grüße 世界"]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts * 40), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PEEK2_DOCS_DATA", str(data_dir))
    return tmp_path


@pytest.mark.parametrize("page, line, code", PYTHON, ids=[f"{p}:{n}" for p, n, _ in PYTHON])
def test_python_example_runs(folder: Path, page: str, line: int, code: str) -> None:
    import peek2

    compiled = compile(code, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        result = eval(compiled, namespace)  # a coroutine when the block awaits
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    finally:
        peek2.unpatch_transformers()


@pytest.mark.parametrize("page, line, code", DOCTESTS, ids=[f"{p}:{n}" for p, n, _ in DOCTESTS])
def test_doctest_example_runs(folder: Path, page: str, line: int, code: str) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(code, {}, f"{page}:{line}", page, line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


@pytest.mark.parametrize("page, line, command", COMMANDS, ids=[f"{p}:{n}" for p, n, _ in COMMANDS])
def test_command_example_runs(folder: Path, page: str, line: int, command: str) -> None:
    bin_dir = os.path.dirname(sys.executable)
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")},
    )
    assert result.returncode == 0, f"{command}\n{result.stderr}"
    if " tokenize " in f" {command} ":  # writes files, and a summary beside them
        prefix = command.split("--output ")[1].split()[0]
        assert (folder / (prefix + ".summary.json")).is_file(), command
    else:
        assert result.stdout.strip(), command


def test_examples_found() -> None:
    assert len(PYTHON) >= 4 and COMMANDS, (len(PYTHON), COMMANDS)
