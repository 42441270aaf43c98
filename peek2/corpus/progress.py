"""Progress of a corpus run: a tqdm bar on a terminal, a plain line every ``interval`` seconds
otherwise (logs of batch jobs), nothing when quiet."""

from __future__ import annotations

import sys
import time
from typing import IO, Any


class Progress:
    """Writes that fail (a log on a full disk, a closed pipe) end the progress, not the run: a run
    whose outputs were whole ended with status 1, and one whose progress lines went into a pipe
    closed early was stopped with its work folder left (a bug hunt)."""

    def __init__(self, total_bytes: int, mode: str, interval: float = 30.0, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if self.stream is None:  # (standard error closed)
            mode = "quiet"
        elif mode == "auto":
            mode = "bar" if self.stream.isatty() else "lines"
        self.mode = mode  # "bar", "lines", "quiet"
        self.total = total_bytes
        self.interval = interval
        self.start = time.monotonic()
        self.last = self.start
        self.documents = 0
        self.tokens = 0
        self.done_bytes = 0
        self.bar: Any = None
        if mode == "bar":
            from tqdm import tqdm

            # (Decimal units: the lines' and the summary's MB; with 1024 the bar's "MB" were MiB.)
            self.bar = tqdm(total=total_bytes or None, unit="B", unit_scale=True, unit_divisor=1000, file=self.stream, desc="tokenize", dynamic_ncols=True)

    def skip(self, done_bytes: int, documents: int, tokens: int) -> None:
        """What a resumed run had done before (counted, not timed)."""
        self.done_bytes, self.documents, self.tokens = done_bytes, documents, tokens
        if self.bar is not None:
            self.bar.update(done_bytes)
        self.start_bytes, self.start_tokens = done_bytes, tokens

    start_bytes = 0
    start_tokens = 0

    def update(self, input_bytes: int, documents: int, tokens: int) -> None:
        self.done_bytes += input_bytes
        self.documents += documents
        self.tokens += tokens
        now = time.monotonic()
        seconds = max(now - self.start, 1e-9)
        rate = (self.tokens - self.start_tokens) / seconds
        if self.bar is not None:
            try:
                self.bar.set_postfix_str(f"{self.documents:,} docs, {rate / 1e6:.2f}M tokens/s", refresh=False)
                self.bar.update(input_bytes)
            except OSError:
                self._stop()
        elif self.mode == "lines" and now - self.last >= self.interval:
            self.last = now
            mb_s = (self.done_bytes - self.start_bytes) / seconds / 1e6
            eta = ""
            if self.total and mb_s > 0:
                eta = f", ETA {max(self.total - self.done_bytes, 0) / 1e6 / mb_s:.0f} s"
            share = f" ({100 * self.done_bytes / self.total:.1f}%)" if self.total else ""
            try:
                print(
                    f"peek2 tokenize: {self.done_bytes / 1e6:,.1f} MB{share}, {self.documents:,} documents, "
                    f"{self.tokens:,} tokens, {mb_s:.1f} MB/s, {rate / 1e6:.2f}M tokens/s{eta}",
                    file=self.stream,
                    flush=True,
                )
            except OSError:
                self._stop()

    def _stop(self) -> None:
        """No more progress (its stream cannot be written); the run goes on."""
        self.bar = None
        self.mode = "quiet"

    def close(self) -> None:
        if self.bar is not None:
            try:
                self.bar.close()
            except OSError:
                pass
            self.bar = None
