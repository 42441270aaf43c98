"""Independent readers of the corpus formats, written from each format's published source (not
from peek2's writers): Megatron-Core's ``megatron/core/datasets/indexed_dataset.py``
(``_IndexReader``, ``IndexedDataset``), llm.c's ``dev/data/data_common.py`` (``write_datafile``)
and ``llmc/dataloader.h``, and Parquet through pyarrow. Each returns the documents' ids."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

MEGATRON_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}


def read_megatron(prefix: str) -> tuple[list[list[int]], np.dtype, list[int]]:
    """Documents of ``prefix.bin``/``.idx`` (each the concatenation of its sequences), the token
    dtype, and the document indices."""
    idx = Path(prefix + ".idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00", "bad header"
    (version,) = struct.unpack_from("<Q", idx, 9)
    assert version == 1
    code = idx[17]
    dtype = np.dtype(MEGATRON_DTYPES[code])
    sequence_count, document_count = struct.unpack_from("<QQ", idx, 18)
    offset = 34
    lengths = np.frombuffer(idx, dtype=np.int32, count=sequence_count, offset=offset)
    offset += lengths.nbytes
    pointers = np.frombuffer(idx, dtype=np.int64, count=sequence_count, offset=offset)
    offset += pointers.nbytes
    document_indices = np.frombuffer(idx, dtype=np.int64, count=document_count, offset=offset)
    offset += document_indices.nbytes
    assert offset == len(idx), "trailing bytes in the index"
    data = Path(prefix + ".bin").read_bytes()  # (mmap refuses an empty file)
    sequences = [np.frombuffer(data, dtype=dtype, count=int(n), offset=int(p)).tolist() for n, p in zip(lengths, pointers)]
    assert int(pointers[-1]) + int(lengths[-1]) * dtype.itemsize == len(data) if len(pointers) else len(data) == 0
    documents = []
    for start, end in zip(document_indices[:-1], document_indices[1:]):
        documents.append([t for s in sequences[start:end] for t in s])
    return documents, dtype, document_indices.tolist()


LLMC = {20240520: (1, np.uint16), 20240801: (7, np.uint32)}


def read_llmc(paths: list[str]) -> tuple[list[int], list[int], np.dtype]:
    """All ids of llm.c shards in order, each shard's count, and the dtype."""
    ids: list[int] = []
    counts = []
    dtype = None
    for path in paths:
        raw = Path(path).read_bytes()
        header = np.frombuffer(raw, dtype=np.int32, count=256)
        version, dtype = LLMC[int(header[0])]
        assert header[1] == version
        count = int(header[2])
        tokens = np.frombuffer(raw, dtype=dtype, offset=256 * 4)
        assert len(tokens) == count, f"{path}: header says {count} tokens, the file holds {len(tokens)}"
        ids.extend(tokens.tolist())
        counts.append(count)
    return ids, counts, np.dtype(dtype)


def split_llmc_documents(ids: list[int], delimiter: int) -> list[list[int]]:
    """Documents of an llm.c stream in which each starts with ``delimiter``."""
    assert ids and ids[0] == delimiter
    documents: list[list[int]] = []
    for token in ids:
        if token == delimiter:
            documents.append([])
        else:
            documents[-1].append(token)
    return documents


def read_parquet(path: str) -> tuple[list[list[int]], list[int], str, int]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.column_names == ["id", "input_ids"]
    meta = pq.ParquetFile(path).metadata
    value_type = str(table.schema.field("input_ids").type.value_type)
    return table.column("input_ids").to_pylist(), table.column("id").to_pylist(), value_type, meta.num_row_groups
