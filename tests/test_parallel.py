"""Tokenizers in other processes: a multiprocessing pool, datasets.map(num_proc=2), and XNLI through datasets.

A Tokenizer pickles by source (its file path), so each worker loads its own copy; the ids
must equal the reference's whatever process computed them.
"""

from __future__ import annotations

import itertools
import multiprocessing
from pathlib import Path

import datasets
import pytest
from tokenizers import Tokenizer as Reference

from compliance import xnli
from peek2.tokenizer import Tokenizer

LANGUAGES_SAMPLE = 40  # sentences per language


def sample_sentences(data_dir: Path) -> list[str]:
    by_language: dict[str, list[str]] = {}
    for row in xnli.iter_xnli_tsv(data_dir / "xnli", ("dev",)):
        bucket = by_language.setdefault(row.language, [])
        if len(bucket) < LANGUAGES_SAMPLE:
            bucket.append(row.premise)
    return [text for texts in by_language.values() for text in texts]


@pytest.fixture(scope="module")
def setup(data_dir: Path) -> tuple[Tokenizer, list[str], list[list[int]]]:
    path = data_dir / "tokenizers" / "qwen2" / "tokenizer.json"
    texts = sample_sentences(data_dir)
    reference = Reference.from_file(str(path))
    return Tokenizer.from_file(path), texts, [e.ids for e in reference.encode_batch(texts)]


def test_multiprocessing_pool(setup: tuple[Tokenizer, list[str], list[list[int]]]) -> None:
    tok, texts, expected = setup
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert pool.map(tok.encode, texts, chunksize=50) == expected
        assert pool.starmap(Tokenizer.count, zip(itertools.repeat(tok), texts)) == [len(ids) for ids in expected]


def test_datasets_map_num_proc(setup: tuple[Tokenizer, list[str], list[list[int]]], tmp_path: Path) -> None:
    tok, texts, expected = setup
    dataset = datasets.Dataset.from_dict({"text": texts})
    mapped = dataset.map(
        lambda batch: {"ids": tok.encode_batch(batch["text"])},
        batched=True,
        num_proc=2,
        cache_file_name=str(tmp_path / "mapped.arrow"),
    )
    assert mapped["ids"] == expected


def test_xnli_through_datasets_equals_the_tsv_files(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``iter_xnli_hf`` maps facebook/xnli's configurations, splits and columns like the TSV loader.

    The hub is out of reach here, so ``datasets.load_dataset`` is replaced by one that serves
    the same rows from the local TSV files in facebook/xnli's layout (one configuration per
    language, splits "test" and "validation", columns premise/hypothesis/label).
    """
    rows = list(xnli.iter_xnli_tsv(data_dir / "xnli"))
    calls: list[tuple[str, str, str]] = []

    def load_dataset(path: str, name: str, split: str) -> datasets.Dataset:
        calls.append((path, name, split))
        ours = "dev" if split == "validation" else split
        selected = [r for r in rows if r.language == name and r.split == ours]
        return datasets.Dataset.from_dict(
            {"premise": [r.premise for r in selected], "hypothesis": [r.hypothesis for r in selected],
             "label": [0] * len(selected)}
        )

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    assert list(xnli.iter_xnli_hf()) == rows
    assert calls[0] == ("facebook/xnli", "ar", "test") and ("facebook/xnli", "zh", "validation") in calls


FORK_DURING_A_FIRST_CALL = """
import importlib.machinery, os, signal, sys, threading, time
import peek2

class Slow(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "peek2.serving.incremental":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        real = spec.loader.exec_module
        def exec_module(module):
            time.sleep(1.0)  # another thread's first call is inside the import when the fork comes
            real(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Slow)
tok = peek2.Tokenizer.from_file(sys.argv[1])
threading.Thread(target=lambda: tok.prompt_cache().encode("hello"), daemon=True).start()
time.sleep(0.3)
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # (a child that waits for ever ends by this alarm)
    os._exit(0 if tok.prompt_cache().encode("hello world") == tok.encode("hello world") else 3)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_fork_during_another_threads_first_call_leaves_a_working_child(data_dir: Path, tmp_path: Path) -> None:
    """A fork while another thread was importing what its first ``prompt_cache()`` (or
    ``stream_encoder``, ``async_encode``, a named model) imports left the child waiting for ever
    at its own first call: the module's import lock stays held in the child by a thread it does
    not have (a bug hunt, 7 hangs in 15 forks). The fork now waits for that import."""
    import subprocess
    import sys

    script = tmp_path / "fork_during_import.py"
    script.write_text(FORK_DURING_A_FIRST_CALL, encoding="utf-8")
    path = data_dir / "tokenizers" / "llama3.1" / "tokenizer.json"
    result = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0", f"the child ended with {result.stdout.strip()} (-14: it waited for ever, ended by its alarm)"
