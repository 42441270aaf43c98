"""The committed tables are exactly what tables/generate.py writes, and they are compact."""

from __future__ import annotations

import importlib.metadata

from tables import generate

import peek2.pretokenize.tables as tables


def test_regenerated_tables_are_identical() -> None:
    assert importlib.metadata.version("unicodedata2") == "16.0.0", "pip install unicodedata2==16.0.0"
    assert generate.OUTPUT.read_text(encoding="utf-8") == generate.render()


def test_tables_are_two_stage_and_compact() -> None:
    assert len(tables.STAGE1) == (0x10FFFF >> tables.SHIFT) + 1
    assert len(tables.STAGE2) < 64 * 1024
    assert tables.UNICODE_VERSION == generate.UNICODE_VERSION


def test_table_lookup_matches_generator() -> None:
    for cp in list(range(0, 0x3000)) + [0x17F, 0x3000, 0xD800, 0xDFFF, 0x1F600, 0xE0001, 0x10FFFF]:
        block = tables.STAGE1[cp >> tables.SHIFT]
        assert tables.STAGE2[(block << tables.SHIFT) | (cp & tables.MASK)] == generate.scalar_class(cp), hex(cp)


def test_first_of_each_category_as_every_scalar_read() -> None:
    """A stream's probes (one scalar of each category) come from ``first_of_each_category``,
    which skips blocks of the first stage already read: the same scalars as reading every one."""
    import peek2
    from peek2.pretokenize.families import find_family
    from peek2.pretokenize.scanner import category, first_of_each_category

    for name in peek2.FAMILIES:
        stage2 = find_family(name).stage2
        ascii_kinds = {category(cp, stage2) for cp in range(128)}
        expected: list[str] = []
        seen = set(ascii_kinds)
        for cp in range(0x80, 0x110000):
            if not 0xD800 <= cp < 0xE000 and category(cp, stage2) not in seen:
                seen.add(category(cp, stage2))
                expected.append(chr(cp))
        got_seen = set(ascii_kinds)
        assert first_of_each_category(stage2, got_seen) == expected, name
        assert got_seen == seen, name
