"""The load cache (peek2/formats/load_cache.py): a second load of the same content reads what the first
built, gives the same tokenizer, and anything wrong with the cache costs only speed."""

from __future__ import annotations

import gc
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from tokenizers import Tokenizer as Reference

import peek2.formats.hf_json
from peek2 import Tokenizer
from peek2.formats import load_cache
from peek2.formats import hf_json
from peek2.spec import RankedMerges

TEXT = "Hello world, it's peek2! <|begin_of_text|>  12345 日本語のテキスト\n\n  def f(x):\n\treturn x"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("PEEK2_CACHE_DIR", str(directory))
    monkeypatch.delenv("PEEK2_CACHE", raising=False)
    return directory


def entries(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.exists() else []


def no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: object) -> None:
        raise AssertionError(f"{path} parsed again: the cache was not used")

    monkeypatch.setattr(peek2.formats.hf_json, "load_file", refuse)


def test_second_load_reads_the_entry(cache: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = data_dir / "tokenizers" / "llama3.1" / "tokenizer.json"
    beside = sorted(path.parent.iterdir())
    first = Tokenizer.from_file(path)
    [entry] = entries(cache)  # one entry, no temporary file left
    assert entry.suffix == ".tables"
    parsed = hf_json.load_file(path)
    no_parse(monkeypatch)
    second = Tokenizer.from_file(path)
    assert second.spec == first.spec == parsed
    assert second.spec.source == os.fspath(path)
    # However the tokenizer was loaded, its merges are ids in one bytes object, not an object per
    # merge (peek2.spec.RankedMerges; the list, once read, holds the vocabulary's own tokens by id);
    # they read as the parsed pairs (the spec equality above).
    for loaded in (first, second):
        assert isinstance(loaded.spec.merges, RankedMerges)
        assert {type(o) for o in gc.get_referents(loaded.spec.merges)} <= {bytes, dict, list, type(None), type(RankedMerges)}
    assert list(second.spec.merges[:3]) == list(parsed.merges[:3]) and second.spec.merges[-1] == parsed.merges[-1]
    reference = Reference.from_file(str(path))
    for add in (True, False):
        assert second.encode(TEXT, add) == first.encode(TEXT, add) == reference.encode(TEXT, add_special_tokens=add).ids
    assert second.encode_with_offsets(TEXT).offsets == reference.encode(TEXT).offsets
    assert second.decode(second.encode(TEXT, False), False) == TEXT
    assert sorted(path.parent.iterdir()) == beside  # never written beside the file


def test_same_spec_as_parsing(cache: Path, data_dir: Path) -> None:
    path = data_dir / "tokenizers" / "qwen3" / "tokenizer.json"
    Tokenizer.from_file(path)
    cached = Tokenizer.from_file(path)
    assert cached.spec == hf_json.load_file(path)
    text = "e\u0301\u0323 Cafe\u0301 <think>x</think><|im_start|>user\nhi<|im_end|>"
    assert cached.encode(text) == Reference.from_file(str(path)).encode(text).ids


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other header", "wrong objects", "a changed token"])
def test_a_damaged_entry_is_rebuilt(cache: Path, data_dir: Path, damage: str) -> None:
    """(A bug hunt: a token changed in the entry, as a flipped bit changes it, loaded silently.)"""
    path = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    first = Tokenizer.from_file(path)
    expected = first.encode(TEXT)
    organized = first.encode(" organized", False)
    [entry] = entries(cache)
    content = entry.read_bytes()
    if damage == "a changed token":
        assert b" organized" in content  # (the vocabulary's bytes, then the UTF-8 tokens' text)
        entry.write_bytes(content.replace(b" organized", b" orfanized", 1))
    elif damage == "truncated":
        entry.write_bytes(content[: len(content) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"\x00" * 1000)
    elif damage == "other header":
        entry.write_bytes(b"peek2-load-cache 0 0.0.0 python2.7 0\n" + content.split(b"\n", 1)[1])
    else:
        import pickle

        entry.write_bytes(load_cache.header() + pickle.dumps(("not a spec", [1, 2, 3])))
    loaded = Tokenizer.from_file(path)
    assert loaded.encode(TEXT) == expected and loaded.decode(organized) == " organized"
    assert entry.read_bytes() == content  # rewritten whole


def test_an_entry_under_another_contents_name_is_not_read(cache: Path, data_dir: Path) -> None:
    """An entry names the content it was written for: Qwen3's entry copied over Llama-3.2's
    passed the header and the CRC and loaded as Llama-3.2 with Qwen3's ids (a bug hunt)."""
    llama = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    qwen = data_dir / "tokenizers" / "qwen3" / "tokenizer.json"
    expected = Tokenizer.from_file(llama).encode(TEXT)
    [llama_entry] = entries(cache)
    Tokenizer.from_file(qwen)
    [qwen_entry] = [entry for entry in entries(cache) if entry != llama_entry]
    shutil.copy(qwen_entry, llama_entry)
    assert Tokenizer.from_file(llama).encode(TEXT) == expected
    assert load_cache._read(llama_entry) is not None  # rewritten as its own


def test_entries_not_read_for_a_month_or_beyond_the_most_kept_are_removed(cache: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries were never removed (those of edited files and of older builds, never read again:
    213 MB on a developer's machine; a bug hunt). A write removes the entries not read for
    ``UNUSED_DAYS`` and the least recently read beyond ``MAX_ENTRIES``; a read keeps one fresh."""
    path = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    Tokenizer.from_file(path)
    [used] = entries(cache)
    month = time.time() - (load_cache.UNUSED_DAYS + 1) * 86400
    os.utime(used, (month, month))
    Tokenizer.from_file(path)  # a read: the entry stays
    assert time.time() - used.stat().st_mtime < 60
    others = ["tokenizer.json", "notes.tables", "a" * 63 + ".tables"]  # not entries: never removed
    for name in others:
        (cache / name).write_text("x")
    stale = cache / ("b" * 64 + ".tables")
    stale.write_text("x")
    os.utime(stale, (month, month))
    monkeypatch.setattr(load_cache, "MAX_ENTRIES", 4)
    recent = []
    for k in range(4):
        entry = cache / (f"{k}" * 64 + ".tables")
        entry.write_text("x")
        os.utime(entry, (time.time() - 1000 + k, time.time() - 1000 + k))
        recent.append(entry)
    Tokenizer.from_file(data_dir / "tokenizers" / "qwen3" / "tokenizer.json")  # a write
    left = {entry.name for entry in entries(cache)}
    assert not stale.exists() and used.exists() and set(others) <= left
    # 4 kept at most, besides the one just written: the two least recently read of the others went
    assert [entry.exists() for entry in recent] == [False, False, True, True]
    assert len([name for name in left if load_cache._ENTRY.fullmatch(name)]) == 4


@pytest.mark.parametrize("damage", ["a pipe", "a link to /dev/zero"])
def test_an_entry_that_is_not_a_file_is_rebuilt(cache: Path, data_dir: Path, damage: str) -> None:
    """An entry that is a pipe blocked the load for ever at its open, and one linked to /dev/zero
    was read until memory ran out (4.5 GB in 5 s; a bug hunt). The load runs in a child with a
    time limit, so that the old behaviour fails here instead of hanging the suite."""
    path = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    expected = Tokenizer.from_file(path).encode(TEXT)
    [entry] = entries(cache)
    entry.unlink()
    if damage == "a pipe":
        os.mkfifo(entry)
    else:
        entry.symlink_to("/dev/zero")
    script = f"from peek2 import Tokenizer; print(Tokenizer.from_file({str(path)!r}).encode({TEXT!r}))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(expected)
    assert entry.is_file() and not entry.is_symlink() and load_cache._read(entry) is not None  # replaced by a good entry


def test_changed_content_is_a_new_entry(cache: Path, data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    shutil.copy(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json", path)
    assert Tokenizer.from_file(path).encode("<|mine|>", False) != [128002]
    data = json.loads(path.read_text(encoding="utf-8"))
    for token in data["added_tokens"]:
        if token["id"] == 128002:
            token["content"] = "<|mine|>"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert Tokenizer.from_file(path).encode("<|mine|>", False) == [128002]
    assert len(entries(cache)) == 2


def test_unwritable_or_disabled_cache(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PEEK2_CACHE_DIR", str(blocker / "cache"))  # cannot be made
    expected = Reference.from_file(str(path)).encode(TEXT).ids
    assert Tokenizer.from_file(path).encode(TEXT) == expected
    monkeypatch.setenv("PEEK2_CACHE_DIR", str(tmp_path / "off"))
    monkeypatch.setenv("PEEK2_CACHE", "0")
    assert Tokenizer.from_file(path).encode(TEXT) == expected
    assert not (tmp_path / "off").exists()


def test_no_home_directory_or_a_relative_one_means_no_cache(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug hunt: with no home directory (HOME unset, a user without a passwd entry) every load
    raised "Could not determine home directory"; a relative XDG_CACHE_HOME put the cache under the
    working folder (the XDG specification says to ignore it), and an empty HOME in "/.cache".
    Another: a HOME that does not exist (``/nonexistent``) was made, with its .cache/peek2."""
    monkeypatch.delenv("PEEK2_CACHE_DIR", raising=False)
    monkeypatch.delenv("PEEK2_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load_cache.cache_dir() is None  # (a home that does not exist: /nonexistent of service accounts, where the cache made one)
    (tmp_path / "home").mkdir()
    assert load_cache.cache_dir() == tmp_path / "home" / ".cache" / "peek2"
    monkeypatch.setenv("HOME", "")
    assert load_cache.cache_dir() is None
    monkeypatch.delenv("XDG_CACHE_HOME")

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert load_cache.cache_dir() is None
    path = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    assert Tokenizer.from_file(path).encode(TEXT) == Reference.from_file(str(path)).encode(TEXT).ids
    assert not (tmp_path / "relative").exists()


def test_errors_are_those_of_the_file(cache: Path, tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "BPE", "vocab": {}, "merges": [', encoding="utf-8")
    for _ in range(2):  # (a file that fails leaves no entry)
        with pytest.raises(peek2.TokenizerFormatError, match="not valid JSON"):
            Tokenizer.from_file(bad)
    assert entries(cache) == []
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_file(tmp_path / "missing.json")


def test_other_loaders_key_by_their_options(cache: Path, data_dir: Path) -> None:
    gpt2 = data_dir / "tokenizers" / "gpt2"
    first = Tokenizer.from_gpt2_files(gpt2 / "encoder.json", gpt2 / "vocab.bpe")
    again = Tokenizer.from_gpt2_files(gpt2 / "encoder.json", gpt2 / "vocab.bpe")
    other = Tokenizer.from_gpt2_files(gpt2 / "encoder.json", gpt2 / "vocab.bpe", special_tokens={})
    assert again.spec == first.spec and again.encode("<|endoftext|> hi") == first.encode("<|endoftext|> hi")
    assert other.encode("<|endoftext|>") != first.encode("<|endoftext|>")
    rank_file = data_dir / "tokenizers" / "llama3.2" / "tokenizer.model"
    plain = Tokenizer.from_tiktoken(rank_file)
    special = Tokenizer.from_tiktoken(rank_file, special_tokens={"<|begin_of_text|>": 128000})
    assert Tokenizer.from_tiktoken(rank_file).encode(TEXT) == plain.encode(TEXT)
    assert special.encode("<|begin_of_text|>") == [128000] != plain.encode("<|begin_of_text|>")
    assert len(entries(cache)) == 4


def test_a_killed_writers_temporary_entry_is_removed(cache: Path, data_dir: Path) -> None:
    """A process killed while writing an entry leaves its temporary file (4-10 MB): the next write
    removes it once it is stale, and never a young one, which a live process may be writing."""
    cache.mkdir(parents=True)
    stale, young = cache / f".{'0123abcd' * 8}.x1_9ab.tmp", cache / f".{'4567ef01' * 8}.x2.tmp"
    # Nothing else is removed: the directory may be shared ($PEEK2_CACHE_DIR=/tmp; a bug hunt
    # found an editor's old ".notes.tmp" gone after a first load).
    others = [cache / ".notes.tmp", cache / ".0123abcd.x1.tmp", cache / f".{'0123abcd' * 8}.tmp"]
    for path in [stale, young, *others]:
        path.write_bytes(b"half an entry")
    old = time.time() - load_cache.STALE_SECONDS - 60
    for path in [stale, *others]:
        os.utime(path, (old, old))
    Tokenizer.from_file(data_dir / "tokenizers" / "llama3.2" / "tokenizer.json")
    assert not stale.exists() and young.exists()
    assert all(path.exists() for path in others)
    assert [p.suffix for p in entries(cache)].count(".tables") == 1


def test_a_tilde_in_the_cache_directory_is_the_home_directory(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug hunt: ``PEEK2_CACHE_DIR=~/peek2cache`` set where no shell expands it (Docker's ENV)
    made a directory named "~" in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PEEK2_CACHE_DIR", "~/peek2cache")
    monkeypatch.delenv("PEEK2_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    Tokenizer.from_file(data_dir / "tokenizers" / "llama3.2" / "tokenizer.json")
    assert not (tmp_path / "~").exists()
    assert [p.suffix for p in entries(tmp_path / "home" / "peek2cache")] == [".tables"]
    # One that cannot be expanded is no cache, not an error of every load (Path.expanduser raised).
    for variable, value in (("PEEK2_CACHE_DIR", "~nosuchuser_peek2/x"), ("XDG_CACHE_HOME", "~nosuchuser_peek2/c")):
        with monkeypatch.context() as env:
            env.delenv("PEEK2_CACHE_DIR")
            env.setenv(variable, value)
            assert load_cache.cache_dir() is None
            assert Tokenizer.from_file(data_dir / "tokenizers" / "llama3.2" / "tokenizer.json").encode("hi", False) == [6151]
    assert not (tmp_path / "~nosuchuser_peek2").exists()


def test_a_load_from_the_cache_warns_as_the_first_did(cache: Path, data_dir: Path, tmp_path: Path) -> None:
    """A bug hunt: the warning that a file's added-token ids are not the ones tokenizers gives
    them came only from the parse, so a load from the cache (another process's, later) was silent."""
    spec = json.loads((data_dir / "tokenizers" / "qwen2" / "tokenizer.json").read_text(encoding="utf-8"))
    spec["added_tokens"].append({"id": 999999, "content": "<|x|>", "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False})
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    message = re.escape(f"{path}: numbered as tokenizers numbers added tokens: added_tokens[3] '<|x|>' is id 151646, not the file's 999999")
    for _ in range(2):
        with pytest.warns(UserWarning, match=message):
            tok = Tokenizer.from_file(path)
    assert len(entries(cache)) == 1
    assert tok.encode("a<|x|>") == Reference.from_file(str(path)).encode("a<|x|>").ids
    # Not again where a pickle is loaded (each worker of a pool or of a datasets map).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = pickle.loads(pickle.dumps(tok))
    assert again.encode("a<|x|>") == tok.encode("a<|x|>")


def test_two_installs_in_turn_each_read_their_own_entry(cache: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug hunt: two installs of one peek2 version (a project's venv and a notebook's, or a
    compiled and a pure build), whose headers differ by their modules' times, rewrote the one
    entry of a file in turn: each load after the other's parsed the file again (Qwen3: 0.3 ->
    0.96 s). Each build has its entry; of one file, at most two builds' entries are kept."""
    path = data_dir / "tokenizers" / "llama3.2" / "tokenizer.json"
    expected = Reference.from_file(str(path)).encode(TEXT).ids
    headers = [load_cache.header().replace(b"\n", f" install{k}\n".encode()) for k in range(3)]
    for k in (0, 1):
        monkeypatch.setattr(load_cache, "_header", headers[k])
        assert Tokenizer.from_file(path).encode(TEXT) == expected  # (each build's first load writes its entry)
    with monkeypatch.context() as patch:
        no_parse(patch)
        for k in (0, 1, 0, 1):
            patch.setattr(load_cache, "_header", headers[k])
            assert Tokenizer.from_file(path).encode(TEXT) == expected
    assert len(entries(cache)) == 2
    monkeypatch.setattr(load_cache, "_header", headers[2])  # (a third build: the least recently read goes)
    assert Tokenizer.from_file(path).encode(TEXT) == expected
    assert len(entries(cache)) == 2
    monkeypatch.setattr(load_cache, "_header", headers[1])
    with monkeypatch.context() as patch:
        no_parse(patch)
        assert Tokenizer.from_file(path).encode(TEXT) == expected


def test_from_str_is_kept_as_a_files_load_is(cache: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``from_str`` parsed the text at every call: the transformers patch, which makes its engine
    from the backend's JSON, paid 1.0 s of its 1.25 s first call in every process. The text's
    load is kept in the cache as a file's is: the same text is read back, another is parsed."""
    path = data_dir / "tokenizers" / "qwen3" / "tokenizer.json"
    text = path.read_text(encoding="utf-8")
    expected = Reference.from_str(text).encode(TEXT).ids
    first = Tokenizer.from_str(text)
    assert first.encode(TEXT) == expected and first.spec.source == "<string>"
    assert len(entries(cache)) == 1
    with monkeypatch.context() as patch:

        def refuse(json_text: str) -> None:
            raise AssertionError("parsed again: the cache was not used")

        patch.setattr(peek2.formats.hf_json, "load_str", refuse)
        again = Tokenizer.from_str(text)
        assert again.encode(TEXT) == expected and again.spec.source == "<string>"
        assert again.encode_with_offsets(TEXT) == first.encode_with_offsets(TEXT)
    other = json.loads(text)
    other["added_tokens"] = other["added_tokens"][:-1]  # (another text: parsed, a second entry)
    assert Tokenizer.from_str(json.dumps(other)).encode(TEXT) == Reference.from_str(json.dumps(other)).encode(TEXT).ids
    assert len(entries(cache)) == 2
    Tokenizer.from_file(path)  # (a file's load of the same bytes has its own entry: another source and reading)
    assert len(entries(cache)) == 3
