"""Peek2 inside HuggingFace ``tokenizers`` and ``transformers``.

- ``pre_tokenizer.py``: ``Peek2()``, ``Peek2Split`` and ``patch``/``unpatch`` of a ``tokenizers.Tokenizer``;
- ``cuts.py``: makes the ``NormalizedString`` pieces with few crossings (compiled);
- ``transformers_patch.py``: ``patch_transformers``, the fast path of ``transformers`` tokenizers.
"""

from peek2.plugin.pre_tokenizer import CHUNK_CHARS as CHUNK_CHARS
from peek2.plugin.pre_tokenizer import Peek2 as Peek2
from peek2.plugin.pre_tokenizer import Peek2Split as Peek2Split
from peek2.plugin.pre_tokenizer import patch as patch
from peek2.plugin.pre_tokenizer import patched_family as patched_family
from peek2.plugin.pre_tokenizer import pipeline_family as pipeline_family
from peek2.plugin.pre_tokenizer import unpatch as unpatch
