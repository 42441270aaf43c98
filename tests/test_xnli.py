"""XNLI 1.0 (15 languages, test and dev, premise and hypothesis) against the reference.

Pre-tokenizer: pieces and offsets for every family, on all of XNLI. Tokenizer: ids with and
without special tokens, and decode, for the Llama-3 files (ignore_merges true: llama3, llama3.1;
false: llama3.2), the Qwen2 and Qwen3 files, GPT-4o's (o200k), DeepSeek-V3's and GPT-2's;
offsets too for the files whose post-processor leaves them untrimmed. The id checks run one row
in ``PEEK2_XNLI_EVERY`` (default 4: every language and split, the sample CI runs within its time;
set 1 for all, or run ``python -m compliance.xnli``, the same checks on everything).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compliance.xnli import LANGUAGES, every_nth, family_check, iter_xnli_tsv, run, sampled_count, tokenizer_check
from conftest import FAMILIES, xnli_every

ROWS = {"test": 5010, "dev": 2490}  # per language


def assert_complete(report_counts: dict, check: str, every: int = 1) -> None:  # type: ignore[type-arg]
    expected = 2 * sum(sampled_count(rows, every) for rows in ROWS.values())  # premise and hypothesis
    for language in LANGUAGES:
        assert report_counts[(check, language)].sentences == expected, language


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
    every = xnli_every()
    report = run(every_nth(iter_xnli_tsv(data_dir / "xnli"), every), {model: tokenizer_check(str(path), offsets=True)})
    assert_complete(report.counts, model, every)
    assert report.mismatches == 0, report.render()
