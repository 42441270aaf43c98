"""One unit of a corpus's documents to ids: parse and check each document, encode them all.

``encode_unit`` runs where the ids are made: in the local engine's worker processes
(``peek2.corpus.run``) and in the Ray engine's actors (``peek2.corpus.ray_engine``), so that both
read a JSON line, name a bad one and count blank lines alike.
"""

from __future__ import annotations

import decimal
import json
from dataclasses import dataclass
from typing import Any

import numpy
from librt.strings import BytesWriter

from peek2.corpus.inputs import CorpusInputError, Unit, unreadable
from peek2.tokenizer import Tokenizer

JSON_SPACE = " \t\r\n"  # JSON's white space (RFC 8259), what may stand around a value


@dataclass(frozen=True)
class Options:
    format: str
    text_key: str
    append_eos: bool
    eos_id: int
    add_special_tokens: bool
    shard_size: int
    unit_bytes: int
    dtype: str
    skip_bad: bool
    empty_length: int = 0  # the ids an empty document is written as (delimiters, special tokens)
    split_special_tokens: bool = False  # an added token's text in a document is text, not the token


@dataclass
class UnitResult:
    ids: bytes
    lengths: Any  # numpy int64, one a document written
    rejects: list[tuple[int, int, str]]  # (source, line or row, reason)
    blank_lines: int
    newlines: int = 0  # JSONL: the newlines of the unit (where the next unit's lines start)


class BadDocument(Exception):
    """A document the worker refuses (without ``skip_bad``): where and why. The reading process
    names it (``location``): it knows where the unit's lines start, which the worker may not."""

    def __init__(self, source: int, line: int, reason: str) -> None:
        super().__init__(source, line, reason)
        self.source, self.line, self.reason = source, line, reason


def location(paths: list[str], kind: str, source: int, line: int) -> str:
    """Where a document is, as errors and rejects name it: ``file:line``, ``file row N`` or the file."""
    if kind == "jsonl" or (kind == "text" and line):
        return f"{paths[source]}:{line}"
    if kind == "arrow":
        return f"{paths[source]} row {line}"
    return paths[source]


def encode_unit(unit: Unit, tokenizer: Tokenizer, options: Options, paths: list[str]) -> UnitResult:
    """Parse, check and encode the documents of one unit."""
    texts: list[str] = []
    where: list[tuple[int, int]] = []
    rejects: list[tuple[int, int, str]] = []
    blank = 0

    def bad(source: int, line: int, reason: str) -> None:
        if not options.skip_bad:
            raise BadDocument(source, line, reason)
        rejects.append((source, line, reason))

    newlines = 0

    if unit.kind == "jsonl":
        payload = unit.payload
        if not isinstance(payload, bytes):  # (path, start, end) in an uncompressed file
            path, start, end = payload
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    payload = handle.read(end - start)
            except OSError as error:
                raise unreadable(path, error) from None
            if len(payload) != end - start:
                raise CorpusInputError(f"{path}: changed while it was read (shorter than before)")
        lines = payload.split(b"\n")
        newlines = len(lines) - 1
        if payload.endswith(b"\n"):
            lines.pop()
        key = options.text_key
        first_line = unit.line or 1  # (0: not counted by the reader, numbered from 1 here)
        file_start = unit.line == 1 or (not isinstance(unit.payload, bytes) and unit.payload[1] == 0)
        for k, raw in enumerate(lines):
            line = first_line + k
            try:
                decoded = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                bad(unit.source, line, f"invalid UTF-8 (byte 0x{raw[error.start]:02X} at byte {error.start} of the line)")
                continue
            if k == 0 and file_start and decoded.startswith("\ufeff"):
                decoded = decoded[1:]  # (a byte order mark, as Windows tools write: JSON parsers may ignore it, RFC 8259)
            if not decoded.strip(JSON_SPACE):  # (JSON's white space only: a line of U+00A0 is malformed, not blank)
                blank += 1
                continue
            try:
                record = _json_line(decoded)
            except ValueError as error:
                bad(unit.source, line, f"malformed JSON: {error}")
                continue
            except RecursionError:
                bad(unit.source, line, "malformed JSON: nested too deeply for Python's json")
                continue
            if not isinstance(record, dict):
                bad(unit.source, line, f"a JSON {_json_kind(record)}, not an object")
                continue
            if key not in record:
                bad(unit.source, line, f"no field {key!r}")
                continue
            text = record[key]
            if not isinstance(text, str):
                bad(unit.source, line, f"field {key!r} is {'null' if text is None else 'a JSON ' + _json_kind(text)}, not a string")
                continue
            texts.append(text)
            where.append((unit.source, line))
    elif unit.kind == "arrow":
        for k, text in enumerate(_arrow_texts(unit.payload)):
            if isinstance(text, UnicodeDecodeError):
                bad(unit.source, unit.line + k, f"invalid UTF-8 (byte 0x{text.object[text.start]:02X} at byte {text.start} of the value)")
                continue
            if text is None:
                bad(unit.source, unit.line + k, f"column {options.text_key!r} is null")
                continue
            texts.append(text)
            where.append((unit.source, unit.line + k))
    else:
        for source, data in unit.payload:
            try:
                # (a byte order mark starting the file is no text, as in JSONL: it was kept as
                # U+FEFF, the document's first token; a bug hunt)
                texts.append(data.decode("utf-8").removeprefix("\ufeff"))
            except UnicodeDecodeError as error:
                line = data.count(b"\n", 0, error.start) + 1
                bad(source, line, f"invalid UTF-8 (byte 0x{data[error.start]:02X} at byte offset {error.start})")
                continue
            where.append((source, 0))
    wide = options.dtype != "uint16"
    first_id = options.eos_id if options.format == "llmc" else -1
    last_id = options.eos_id if options.append_eos else -1
    out = BytesWriter()
    try:
        lengths = tokenizer._write_flat(texts, out, wide, options.add_special_tokens, options.split_special_tokens, first_id, last_id)
    except ValueError:  # a lone surrogate (from a JSON escape): find it, one document at a time
        out = BytesWriter()
        lengths = []
        for text, (source, line) in zip(texts, where):
            mark = len(out)
            try:
                lengths.extend(tokenizer._write_flat([text], out, wide, options.add_special_tokens, options.split_special_tokens, first_id, last_id))
            except ValueError as error:
                out.truncate(mark)
                bad(source, line, str(error).replace("texts[0]: ", ""))
    # In input order: a lone surrogate is found by the encode, after every parse error of the unit,
    # so that the rejects file's order followed where units end (other on the Ray engine; a bug hunt).
    rejects.sort(key=lambda reject: (reject[0], reject[1]))
    return UnitResult(out.getvalue(), numpy.array(lengths, dtype=numpy.int64), rejects, blank, newlines)


def _arrow_texts(column: Any) -> list[Any]:
    """The values of an Arrow string column; a value that is not UTF-8 (Parquet does not check)
    as its UnicodeDecodeError, so that the row is named (or skipped with skip_bad)."""
    try:
        return column.to_pylist()  # type: ignore[no-any-return]
    except UnicodeDecodeError:
        values: list[Any] = []
        for k in range(len(column)):
            value = column[k]
            if not value.is_valid:
                values.append(None)
                continue
            data = value.as_buffer().to_pybytes()
            try:
                values.append(data.decode("utf-8"))
            except UnicodeDecodeError as error:
                values.append(error)
        return values


def _json_line(line: str) -> object:
    """A JSON line's value (ValueError if it is not JSON).

    RFC 8259 sets no limit to a number's digits, but Python's ``int`` refuses to read more than
    ``sys.get_int_max_str_digits()`` (4,300) of them: a valid line with such a number in some other
    field was refused as malformed (a bug hunt). Such a line is read again with its integers as
    ``Decimal`` (no limit; only the text field is used)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        raise
    except ValueError:  # (the digit limit: the only other ValueError json.loads raises)
        return json.loads(line, parse_int=decimal.Decimal)


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (Python's said "a JSON NoneType"; a bug hunt)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float, decimal.Decimal)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else type(value).__name__
