"""What happens to text before the scanner, in the reference's order.

- ``added_tokens.py``: the matcher that cuts added tokens out of the raw text (and out of the
  normalized text, for ``normalized: true`` tokens), leftmost-longest, with their strip rules;
- ``nfc.py``: NFC as the reference applies it (Qwen's normalizer), with the offsets it moves;
  ``nfc_late.py`` is its generated data (``tables/nfc.py``).
"""
