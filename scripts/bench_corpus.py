"""Corpus tokenization, whole processes: ``peek2 tokenize`` against the pipelines people write today.

    python scripts/bench_corpus.py --mb 1000 --runs 3        # the issue's 1 GB corpus
    python scripts/bench_corpus.py --mb 250 --only peek2     # peak memory on a smaller corpus

The corpus is generated reproducibly (``scripts/corpus_documents.py``: XNLI paragraphs of 15
languages, multi-script text, standard-library source, chat transcripts, HTML, runs, empty
documents) as JSONL. Each engine writes the same Megatron ``.bin``/``.idx`` (Llama-3.1, ids
without special tokens, end-of-text appended to non-empty documents), and the script checks that
every engine's files are byte-identical to peek2's before printing a figure:

- ``peek2 W``: ``peek2 tokenize --workers W --format megatron --append-eos``
- ``megatron W``: Megatron-LM's ``tools/preprocess_data.py`` loop: ``multiprocessing.Pool(W)``,
  ``imap(encode, lines, 32)``, a ``tokenizers.Tokenizer`` a worker, the builder's lists of
  lengths and the ``.idx`` written at the end
- ``datasets W``: ``load_dataset("json")``, ``map(batched=True, num_proc=W)`` with
  ``tokenizers``' ``encode_batch_fast``, then the ``.bin``/``.idx`` written from the mapped column
  (``TOKENIZERS_PARALLELISM=false`` for every engine: W workers use W cores)
- ``ray``: ``peek2 tokenize --engine ray`` on a local Ray started in the process (``num_cpus=2``):
  Ray's own start and stop are timed with the run
- ``ray-cluster``: ``peek2 tokenize --engine ray --ray-address auto`` on a local cluster started
  before the run (``ray start --head --num-cpus 2``, then 10 s to settle) and stopped after it,
  untimed, as a job is run on a cluster that is already up; peak memory is the job's process tree (the driver), without
  the cluster's daemons and actors
- ``ray-cluster-used``: the same on a cluster that has run one job of the same kind before (an
  untimed run on a corpus of one document). Ray Data creates its actors of a cluster (statistics,
  usage, the autoscaling coordinator, actor locations: detached, so they outlive the job) at the
  first job that needs them, and the first job pays for starting their worker processes beside
  its own actors; a cluster that has served a Ray Data job before has them

Times are wall seconds of the whole process (start-up, tokenizer load and writing included),
the median of ``--runs``; peak memory is the largest sum of the resident sizes of the process and
all its descendants, sampled every 0.1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from corpus_documents import DEFAULT_DATA, write_jsonl  # noqa: E402

TOKENIZER = ROOT.parent / "shared" / "data" / "tokenizers" / "llama3.1" / "tokenizer.json"
EOD = 128001

MEGATRON = r'''
import json, multiprocessing, struct, sys
import numpy as np
import tokenizers

corpus, tokenizer_path, prefix, workers, eod = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def init():
    global tok
    tok = tokenizers.Tokenizer.from_file(tokenizer_path)

def encode(line):
    text = json.loads(line)["text"]
    ids = tok.encode(text, add_special_tokens=False).ids
    if ids:
        ids.append(eod)
    return ids

if __name__ == "__main__":
    lengths, documents = [], [0]
    with open(corpus, encoding="utf-8") as fin, open(prefix + ".bin", "wb") as data, multiprocessing.Pool(workers, initializer=init) as pool:
        for ids in pool.imap(encode, fin, 32):
            data.write(np.array(ids, dtype=np.int32).tobytes())
            if ids:
                lengths.append(len(ids))
            documents.append(len(lengths))
    pointers = np.concatenate(([0], np.cumsum(np.array(lengths, dtype=np.int64) * 4)[:-1])) if lengths else np.zeros(0, np.int64)
    with open(prefix + ".idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
        idx.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(documents)))
        idx.write(np.array(lengths, dtype=np.int32).tobytes())
        idx.write(pointers.astype(np.int64).tobytes())
        idx.write(np.array(documents, dtype=np.int64).tobytes())
'''

DATASETS = r'''
import struct, sys
import numpy as np
import datasets
import tokenizers

corpus, tokenizer_path, prefix, workers, eod, cache = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
datasets.disable_progress_bars()
tok = tokenizers.Tokenizer.from_file(tokenizer_path)

def encode(batch):
    out = []
    for encoding in tok.encode_batch_fast(batch["text"], add_special_tokens=False):
        ids = encoding.ids
        if ids:
            ids.append(eod)
        out.append(ids)
    return {"ids": out}

if __name__ == "__main__":
    ds = datasets.load_dataset("json", data_files=corpus, split="train", cache_dir=cache)
    ds = ds.map(encode, batched=True, num_proc=workers, remove_columns=ds.column_names)
    lengths = []
    with open(prefix + ".bin", "wb") as data:
        for batch in ds.with_format("arrow").iter(batch_size=10_000):
            column = batch.column("ids").combine_chunks()
            data.write(column.values.to_numpy().astype(np.int32).tobytes())
            lengths.append(np.diff(column.offsets.to_numpy()))
    lengths = np.concatenate(lengths).astype(np.int64)
    nonzero = lengths[lengths > 0]
    pointers = np.concatenate(([0], np.cumsum(nonzero * 4)[:-1])) if len(nonzero) else np.zeros(0, np.int64)
    documents = np.concatenate(([0], np.cumsum(lengths > 0)))
    with open(prefix + ".idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
        idx.write(struct.pack("<Q", len(nonzero)) + struct.pack("<Q", len(documents)))
        idx.write(nonzero.astype(np.int32).tobytes())
        idx.write(pointers.astype(np.int64).tobytes())
        idx.write(documents.astype(np.int64).tobytes())
'''

RAY = r'''
import sys
import ray
import peek2.corpus

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
peek2.corpus.tokenize(sys.argv[1], tokenizer=sys.argv[2], output=sys.argv[3], format="megatron", append_eos=True, engine="ray", quiet=True, force=True)
ray.shutdown()
'''


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
        stack.extend(children.get(current, []))
    return total


CLUSTER_SETTLE = 10.0


def ray_cluster(start: bool) -> None:
    """Start (``ray start --head``, 2 CPUs) or stop the local cluster of the ``ray-cluster`` engine.

    A started cluster is given ``CLUSTER_SETTLE`` seconds to finish its own start (its agents and
    first workers) before the job is timed: the job of a cluster that is up finds it idle."""
    ray = str(Path(sys.executable).parent / "ray")
    command = [ray, "start", "--head", "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats"] if start else [ray, "stop"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if start:
        time.sleep(CLUSTER_SETTLE)


def timed(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak tree RSS of a command (which must succeed)."""
    start = time.monotonic()
    # One core a worker in every engine: tokenizers' own thread pool off (as "same workers" means).
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = process.communicate()
    seconds = time.monotonic() - start
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{err[-3000:]}")
    return seconds, peak


def files(prefix: str) -> tuple[bytes, bytes]:
    return Path(prefix + ".bin").read_bytes(), Path(prefix + ".idx").read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=1000.0, help="corpus size in MB (default 1000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each engine (median; default 3)")
    parser.add_argument("--only", action="append", help="engines to run (peek2, megatron, datasets, ray, ray-cluster, ray-cluster-used; default all)")
    parser.add_argument("--workers", type=int, action="append", help="worker counts (default 1 and 2)")
    parser.add_argument("--corpus", type=Path, default=None, help="the JSONL corpus (default: generated in a temporary folder)")
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the xnli folder")
    args = parser.parse_args()
    engines = args.only or ["peek2", "megatron", "datasets", "ray", "ray-cluster", "ray-cluster-used"]
    worker_counts = args.workers or [1, 2]
    work = Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    try:
        corpus = args.corpus
        if corpus is None:
            corpus = work / "corpus.jsonl"
            count = write_jsonl(corpus, int(args.mb * 1e6), 0, args.data)
            print(f"corpus: {corpus.stat().st_size / 1e6:,.0f} MB, {count:,} documents", flush=True)
        size_mb = corpus.stat().st_size / 1e6
        first_job = work / "first_job.jsonl"  # (ray-cluster-used: the untimed job before the timed one)
        first_job.write_text('{"text": "Hello"}\n', encoding="utf-8")
        runs: list[tuple[str, list[str], str]] = []
        for engine in engines:
            for w in worker_counts if engine in ("peek2", "megatron", "datasets") else [2]:
                prefix = str(work / f"{engine}{w}")
                if engine == "peek2":
                    command = [sys.executable, "-m", "peek2", "tokenize", str(corpus), "--tokenizer", str(args.tokenizer), "--output", prefix,
                               "--format", "megatron", "--append-eos", "--workers", str(w), "--quiet", "--force"]
                    out = prefix + "_text_document"
                elif engine == "megatron":
                    command = [sys.executable, "-c", MEGATRON, str(corpus), str(args.tokenizer), prefix, str(w), str(EOD)]
                    out = prefix
                elif engine == "datasets":
                    command = [sys.executable, "-c", DATASETS, str(corpus), str(args.tokenizer), prefix, str(w), str(EOD), str(work / "hf_cache")]
                    out = prefix
                elif engine == "ray":
                    command = [sys.executable, "-c", RAY, str(corpus), str(args.tokenizer), prefix]
                    out = prefix + "_text_document"
                else:
                    command = [sys.executable, "-m", "peek2", "tokenize", str(corpus), "--tokenizer", str(args.tokenizer), "--output", prefix,
                               "--format", "megatron", "--append-eos", "--engine", "ray", "--ray-address", "auto", "--quiet", "--force"]
                    out = prefix + "_text_document"
                names = {"ray": "ray (2 CPUs)", "ray-cluster": "ray (cluster up, 2 CPUs)", "ray-cluster-used": "ray (cluster up, after a first job, 2 CPUs)"}
                runs.append((names.get(engine, f"{engine} {w}"), command, out))
        results: dict[str, list[tuple[float, int]]] = {name: [] for name, _, _ in runs}
        reference: tuple[bytes, bytes] | None = None
        for round_ in range(args.runs):  # interleaved: each round runs every engine once
            for name, command, out in runs:
                shutil.rmtree(work / "hf_cache", ignore_errors=True)
                cluster = name.startswith("ray (cluster")
                if cluster:
                    ray_cluster(start=True)
                    if "after a first job" in name:
                        timed([*command[:4], str(first_job), *command[5:8], str(work / "first_job"), *command[9:]])
                try:
                    results[name].append(timed(command))
                finally:
                    if cluster:
                        ray_cluster(start=False)
                produced = files(out)
                if reference is None:
                    reference = produced
                elif produced != reference:
                    raise SystemExit(f"{name}: its .bin/.idx differ from {runs[0][0]}'s")
                print(f"  round {round_ + 1} {name}: {results[name][-1][0]:.1f} s", flush=True)
        base = {name: statistics.median(s for s, _ in values) for name, values in results.items()}
        print(f"\n{size_mb:,.0f} MB JSONL, {args.tokenizer.parent.name}, megatron format, median of {args.runs} (same .bin/.idx from every engine)")
        print(f"| engine | seconds | MB/s | peak RSS |")
        print("| --- | --- | --- | --- |")
        for name, values in results.items():
            print(f"| {name} | {base[name]:.1f} | {size_mb / base[name]:.1f} | {max(r for _, r in values) / 1e9:.2f} GB |")
        for w in worker_counts:
            if f"peek2 {w}" in base:
                for other in ("megatron", "datasets"):
                    if f"{other} {w}" in base:
                        print(f"peek2 {w} against {other} {w}: {base[f'{other} {w}'] / base[f'peek2 {w}']:.1f}x")
        if "peek2 1" in base and "peek2 2" in base:
            print(f"peek2 1 -> 2 workers: {base['peek2 1'] / base['peek2 2']:.2f}x")
        for name in ("ray (2 CPUs)", "ray (cluster up, 2 CPUs)", "ray (cluster up, after a first job, 2 CPUs)"):
            if name in base and "peek2 2" in base:
                print(f"{name} against peek2 2: {base['peek2 2'] / base[name]:.2f}x")
        print(json.dumps({name: {"seconds": base[name], "peak_rss": max(r for _, r in v)} for name, v in results.items()}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
