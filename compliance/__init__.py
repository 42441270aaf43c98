"""Bit-exact compliance runs of peek2 against HuggingFace tokenizers (the reference)."""
