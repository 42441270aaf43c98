"""The byte-pair merger and the tables it runs on.

- ``merger.py``: ``BytePairEncoder``, the compiled engine (the scanner's pieces, cached or merged);
- ``merge_table.py``: ``MergeTable``, pairs of ids to merge ranks behind a filter, and
  ``final_pairs``, the pairs merging can apply (compiled);
- ``piece_cache.py``: ``PieceCache``, recent pieces by a key computed from the text in place (compiled);
- ``vocab.py``: vocabulary and merges read into bytes, and the pair table of the merges (compiled);
- ``engine_tables.py``: everything the engine builds from a ``TokenizerSpec``, as plain data
  (kept on disk by ``peek2.formats.load_cache``);
- ``whole_chars.py``: tokens that are whole UTF-8 characters, for pieces the merger can skip;
- ``growing_piece.py``: which ids of a growing piece are final (streaming's rule 3);
- ``offsets.py`` and ``decode.py``: ids back to character spans and to bytes (compiled);
- ``huge_pages.py``: asks the kernel for huge pages under the large tables.

Nothing here imports the ``Tokenizer``, the loaders' file readers or the serving modules.
"""
