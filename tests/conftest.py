"""Shared fixtures: the data folder (../shared/data by default), the families, the reference.

The data folder holds XNLI and the tokenizer.json files; tests never skip when it
is missing: they fail, naming the folder and the option that sets it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # noqa
    sys.path.insert(0, str(ROOT))  # compliance/ and tables/ are importable from the checkout

from compliance.reference import peek2_split as ours  # noqa: E402
from compliance.reference import reference_split  # noqa: E402

import peek2  # noqa: E402

# The suite's own load cache (peek2/formats/load_cache.py), empty at the start of each run and removed
# after it: tests neither read nor fill the user's.
if "PEEK2_CACHE_DIR" not in os.environ:
    os.environ["PEEK2_CACHE_DIR"] = tempfile.mkdtemp(prefix="peek2-test-cache-")
    atexit.register(shutil.rmtree, os.environ["PEEK2_CACHE_DIR"], True)

# The families tokenizers' Split can be the reference for (all but cl100k, tiktoken's own).
FAMILIES = [pytest.param(name, id=name) for name in peek2.FAMILIES if name not in peek2.TIKTOKEN_PATTERNS]
DEFAULT_DATA = ROOT.parent / "shared" / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--data",
        default=os.environ.get("PEEK2_DATA", str(DEFAULT_DATA)),
        help="folder with xnli/ and tokenizers/ (default: $PEEK2_DATA or ../shared/data)",
    )


@pytest.fixture(scope="session")
def data_dir(request: pytest.FixtureRequest) -> Path:
    path = Path(request.config.getoption("--data"))
    if not (path / "xnli").is_dir():
        pytest.fail(f"test data not found: {path}/xnli is missing (set --data or PEEK2_DATA)", pytrace=False)
    return path


def fuzz_examples(default: int) -> int:
    """Hypothesis budget: PEEK2_FUZZ_EXAMPLES overrides the test's default."""
    return int(os.environ.get("PEEK2_FUZZ_EXAMPLES", default))


def run_threads_switching_often(targets: list[Callable[[], object]], interval: float) -> None:
    """Run ``targets`` in threads to the end, the interpreter switching threads every ``interval``
    seconds meanwhile (a race's window met as on a busy machine, with no time limit)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        threads = [threading.Thread(target=target) for target in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(before)


def xnli_every() -> int:
    """The share of XNLI the id checks run: one row in PEEK2_XNLI_EVERY of each language and split
    (default 4, the sample CI runs within its time; 1 runs all of it, as ``python -m compliance.xnli`` does)."""
    return int(os.environ.get("PEEK2_XNLI_EVERY", 4))


__all__ = ["FAMILIES", "fuzz_examples", "ours", "reference_split", "xnli_every"]
