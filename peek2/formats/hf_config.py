"""What a model folder's ``tokenizer_config.json`` says that its ``tokenizer.json`` does not.

peek2 reads ``tokenizer.json`` alone, as ``tokenizers.Tokenizer.from_file`` does. transformers
reads both, and applies the config's own settings on top: added tokens declared only there
(``added_tokens_decoder``, the special tokens ``bos_token``, ``eos_token``, ...,
``additional_special_tokens``), a token made special there, ``split_special_tokens`` and
``add_prefix_space``. A folder whose two files disagree (a hand-edited config, a fine-tune saved
by a tool that wrote only the config) gave other ids than transformers, silently (a bug hunt):
``Tokenizer.from_pretrained`` of a folder now warns, naming each difference.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from peek2.spec import TokenizerSpec

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
"""The config's special tokens, each a content (a str, or a dict with ``content``) or null."""

SHOWN = 5
"""Differences named in the warning (then how many more)."""


class TokenizerConfigWarning(UserWarning):
    """A folder's tokenizer_config.json sets what its tokenizer.json does not (see differences)."""


def differences(config: object, spec: TokenizerSpec) -> list[str]:
    """What ``config`` (a parsed tokenizer_config.json) sets that ``spec`` does not have."""
    if not isinstance(config, dict):
        return []
    added = {token.id: token for token in spec.added_tokens}
    contents = {token.content for token in spec.added_tokens}
    found: list[str] = []
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, entry in decoder.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or not str(key).isdigit():
                continue
            content = entry["content"]
            token = added.get(int(key))
            if token is None:
                found.append(f"added token {content!r} with id {key}, not in tokenizer.json")
            elif token.content != content:
                found.append(f"id {key} is {content!r}, where tokenizer.json has {token.content!r}")
            elif isinstance(entry.get("special"), bool) and entry["special"] != token.special:
                found.append(f"{content!r} is {'' if entry['special'] else 'not '}special, where tokenizer.json has it {'' if token.special else 'not '}special")
    named: list[tuple[str, object]] = [(key, config.get(key)) for key in SPECIAL_TOKEN_KEYS]
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        named += [("additional_special_tokens", value) for value in extra]
    for key, value in named:
        content = value.get("content") if isinstance(value, dict) else value
        if isinstance(content, str) and content and content not in contents:
            found.append(f"{key} {content!r}, not an added token of tokenizer.json")
    if config.get("split_special_tokens") is True:
        found.append("split_special_tokens true (pass split_special_tokens=True to encode)")
    prefix_space = config.get("add_prefix_space")
    if isinstance(prefix_space, bool) and prefix_space != spec.prefix_space:
        found.append(f"add_prefix_space {str(prefix_space).lower()}, where tokenizer.json's pre-tokenizer has {str(spec.prefix_space).lower()}")
    return found


def warn_of_differences(tokenizer_json: Path, spec: TokenizerSpec) -> None:
    """Warn (``TokenizerConfigWarning``) where the tokenizer_config.json beside ``tokenizer_json``
    sets what ``spec`` (read from it) does not. A config that is missing or unreadable says nothing."""
    config_path = tokenizer_json.parent / "tokenizer_config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    found = differences(config, spec)
    if found:
        more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        warnings.warn(
            f"{config_path} sets what {tokenizer_json.name} does not, which transformers applies and peek2, reading "
            f"{tokenizer_json.name} alone, does not (ids may differ from transformers'): {'; '.join(found[:SHOWN])}{more}",
            TokenizerConfigWarning,
            stacklevel=3,
        )
