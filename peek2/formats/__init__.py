"""Loaders: tokenizer files (tokenizer.json, tiktoken rank files) -> plain data for the engine."""
