"""Serving: encoding text as it arrives, prompts that grow, and asyncio.

- ``streaming.py``: ``StreamEncoder`` and ``StreamDecoder`` (``tok.stream_encoder()``), and the
  rules that say which ids are final; ``stream_engine.py`` applies them (compiled);
- ``incremental.py``: ``PromptCache`` and ``PromptSession`` (re-encode only what changed);
- ``aio.py``: ``async_encode`` and friends, in bounded slices; ``encode_worker.py`` is the process
  a text of one enormous piece moves to.

These use a ``Tokenizer``; the ``Tokenizer`` reaches them through its thin delegates only.
"""
