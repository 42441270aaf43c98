"""The peek2 command line: encode, decode, split, and clear errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tokenizers import Tokenizer as Reference


def peek2(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "peek2", *args], input=stdin, capture_output=True, text=True)


def test_encode_decode_roundtrip(data_dir: Path) -> None:
    path = str(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")
    text = "Hello world, it's 2026!\n" * 3
    result = peek2("encode", "--tokenizer", path, "--json", stdin=text)
    assert result.returncode == 0, result.stderr
    ids = json.loads(result.stdout)
    assert ids == Reference.from_file(path).encode(text).ids
    back = peek2("decode", "--tokenizer", path, "--skip-special-tokens", stdin=" ".join(map(str, ids)))
    assert back.returncode == 0 and back.stdout == text


def test_encode_large_file_in_chunks_equals_whole(tmp_path: Path, data_dir: Path) -> None:
    # Above the chunk size the CLI encodes in pieces cut after a newline before a letter.
    path = str(data_dir / "tokenizers" / "qwen2" / "tokenizer.json")
    text = "".join(f"Line {k}:  some text\n\n  more\r\n" for k in range(60_000))
    source = tmp_path / "big.txt"
    source.write_text(text, encoding="utf-8", newline="")
    result = peek2("encode", "--tokenizer", path, "--json", str(source))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == Reference.from_file(path).encode(text).ids


def test_split_prints_pieces() -> None:
    result = peek2("split", "--pattern", "qwen2", stdin="a 12")
    assert [json.loads(line) for line in result.stdout.splitlines()] == ["a", " ", "1", "2"]


def test_errors_are_clear(tmp_path: Path) -> None:
    missing = peek2("encode", "--tokenizer", str(tmp_path / "none.json"), stdin="x")
    assert missing.returncode == 2 and "not found" in missing.stderr
    unreadable = peek2("encode", str(tmp_path / "none.txt"))
    assert unreadable.returncode == 2 and "cannot read" in unreadable.stderr
    unknown = peek2("encode", "--model", "nope", stdin="x")
    assert unknown.returncode == 2 and "not a named model" in unknown.stderr
    pattern = peek2("split", "--pattern", "gpt2", stdin="x")
    assert pattern.returncode == 2 and "supported families" in pattern.stderr
    bad_ids = peek2("decode", "--model", "llama3", stdin="1 two 3")
    assert bad_ids.returncode == 2 and "decode expects ids" in bad_ids.stderr
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    not_utf8 = peek2("split", str(binary))
    assert not_utf8.returncode == 2 and "not UTF-8" in not_utf8.stderr


def test_version_says_compiled() -> None:
    result = peek2("--version")
    assert result.returncode == 0 and "compiled:" in result.stdout
