"""All of XNLI 1.0 (15 languages, test and dev, premise and hypothesis) against the reference.

Pre-tokenizer: pieces and offsets for every family. Tokenizer: ids with and without special
tokens, and decode, for the Llama-3 files (ignore_merges true: llama3, llama3.1; false:
llama3.2), the Qwen2 and Qwen3 files, GPT-4o's (o200k) and DeepSeek-V3's; offsets too for
the files whose post-processor leaves them untrimmed. The same runs as ``python -m compliance.xnli``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compliance.xnli import LANGUAGES, family_check, iter_xnli_tsv, run, tokenizer_check
from conftest import FAMILIES

EXPECTED_SENTENCES = 2 * (5010 + 2490)  # per language: premise and hypothesis of test and dev


def assert_complete(report_counts: dict, check: str) -> None:  # type: ignore[type-arg]
    for language in LANGUAGES:
        assert report_counts[(check, language)].sentences == EXPECTED_SENTENCES, language


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_xnli_pieces_and_offsets(data_dir: Path, family: str) -> None:
    report = run(iter_xnli_tsv(data_dir / "xnli"), {family: family_check(family)})
    assert_complete(report.counts, family)
    assert report.mismatches == 0, report.render()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["llama3", "llama3.1", "llama3.2", "qwen2", "qwen3", "gpt4o", "deepseek-v3", "gpt2"])
def test_xnli_ids_and_decode(data_dir: Path, model: str) -> None:
    # GPT-2 has no tokenizer.json here: its encoder.json + vocab.bpe, set up as HF's gpt2 file is.
    path = data_dir / "tokenizers" / model / ("encoder.json" if model == "gpt2" else "tokenizer.json")
    report = run(iter_xnli_tsv(data_dir / "xnli"), {model: tokenizer_check(str(path), offsets=True)})
    assert_complete(report.counts, model)
    assert report.mismatches == 0, report.render()
