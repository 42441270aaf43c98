"""The byte-level alphabet of GPT-2 style BPE: each byte is written as one printable character.

``tokenizer.json`` files store tokens and merges in this alphabet ("Ġhello" is b" hello");
peek2 converts them to raw bytes once, at load time, and works on bytes after that.
"""

from __future__ import annotations

import codecs
from typing import Final


def _byte_to_char() -> list[str]:
    # Printable Latin-1 bytes stand for themselves; the others are shifted to U+0100 and up.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = [""] * 256
    shift = 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + shift)
            shift += 1
    return chars


BYTE_TO_CHAR: Final = _byte_to_char()
CHAR_TO_BYTE: Final = {char: byte for byte, char in enumerate(BYTE_TO_CHAR)}
# The alphabet as a charmap codec's tables: encode and decode in C, where a list of one lookup a
# character took twice as long (0.53 -> 0.27 us a token of Llama-3's vocabulary; token_to_id and
# the load of GPT-2's encoder.json call it once a token).
_ENCODING_MAP: Final = codecs.charmap_build("".join(BYTE_TO_CHAR))
_DECODING_TABLE: Final = "".join(BYTE_TO_CHAR)


def to_bytes(token: str) -> bytes | None:
    """The raw bytes a byte-level token stands for, or None if a character is outside the alphabet.

    >>> to_bytes("Ġhello")
    b' hello'
    """
    try:
        return codecs.charmap_encode(token, "strict", _ENCODING_MAP)[0]
    except UnicodeEncodeError:  # (a character outside the alphabet)
        return None


def to_chars(data: bytes) -> str:
    """The byte-level spelling of raw bytes.

    >>> to_chars(b" hi")
    'Ġhi'
    """
    return codecs.charmap_decode(data, "strict", _DECODING_TABLE)[0]
