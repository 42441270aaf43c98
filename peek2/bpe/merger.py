"""The byte-pair merger: pieces of text -> token ids, by merge rank, with a bounded piece cache.

Compiled with mypyc; keep to primitive types and native classes; see "Performance notes".

For each piece from the Peek2 scanner (``peek2.pretokenize.scanner.piece_end``, called directly:
same compilation unit), in order:
1. a piece seen recently comes from the ``PieceCache`` (``peek2.bpe.piece_cache``: at most ``cache_size`` pieces of at
   most ``CACHE_MAX_CHARS`` characters; emptied when full), found by a key computed from
   the text in place, so a hit allocates nothing (a short piece's key is the piece itself,
   so most hits compare nothing either);
2. a piece that is a whole vocabulary token is that token: with ``ignore_merges`` any token,
   without it a token whose bytes merge into it (all but those ``final_pairs`` finds);
3. otherwise its UTF-8 bytes (made from the code points in place) start as one symbol each
   (a two- or three-byte character whose token can stand for its bytes starts as that token:
   ``peek2.bpe.whole_chars`` says when, and why the ids stay the same) and the adjacent pair of
   lowest merge rank is merged, leftmost first, until no pair merges: HuggingFace's BPE and
   tiktoken's rule. Pieces of up to 128K symbols (fewer than ``HEAP_MIN_BYTES``) find the best
   pair through minima of blocks of 8 pairs, and from 256 symbols on minima of 8 of those, and
   so on up to at most 8 at the top (O(log n) a merge, branch-free, in reused arrays grown up to
   32K symbols, a longer piece's of its own); a piece of more than ``LONG_PIECE_BYTES`` goes
   to ``long_pieces``, which merges it a block of 32 KB at a time where no later byte can move
   the block's ids (bounded memory), so one enormous piece (a million times "a") stays fast.
   The heap over a linked list of symbols (n log n) is left for a piece that ``long_pieces``
   does not take (none of a tokenizer's: a BytePairEncoder alone).

The ids of a text are gathered in a native buffer and handed out as one list made at its final
size, of shared int objects (``shared_ints``).

Merges are stored in a ``MergeTable`` (``peek2.bpe.merge_table``: open addressing in a packed array): key
``left * PAIR_STRIDE + right``, value ``rank << ID_BITS | merged_id``; comparing values
compares ranks.

Performance notes (scripts/bench_encode.py, compiled; of the engine as a whole, so the piece
cache's keys and the merge table's filter and final pairs are measured here too):
- The cache is looked up first, before the whole-token dict: a lookup in the 128k-entry
  vocabulary costs about as much as scanning the piece (cache misses in a 4 MB table),
  one in a cache of the few thousand recent pieces half that (XNLI en, 60 vs 100 MB/s
  of lookups alone).
- The cache is not a dict of str: a dict needs the piece sliced out (an allocation) and
  hashed (siphash) before the lookup; hashing the code points in place and comparing in
  place makes a hit allocation-free (see bench_encode.py for the effect). Comparing a hit
  with the stored piece, code point by code point, was a quarter of the instructions on
  English; a piece of up to 7 code points below 256 (3 below 65,536, 2 of any) is keyed by
  the code points themselves, which needs no comparison: English 1.09x, XNLI 1.05x. Such a
  piece is read once, packed as it is read (a hash and a packing pass before): English
  instructions -11% under callgrind (cgx-style run of ``_run`` only, 200K characters, cold).
  Words of other scripts (4 to 7 code points in one block of 128, "_block_piece_key") are
  keyed exactly too: XNLI -3.7%, XNLI sentences -1% estimated cycles (encode of 300K
  characters and of 6,000 sentences, cold), Chinese +0.2% (its pieces fail the block test).
  Pieces of 8 ASCII code points (6.5% of English pieces, a third of those longer than 7; o200k's
  " however") are packed 7 bits each: o200k English (300K characters, cold, callgrind)
  instructions -2.1%, data reads -3.5%.
  The same keys of an ASCII piece are made from bytes, 8 at a time (``ascii_key``, now ``latin1_key``,
  which takes Latin-1 windows too: ``peek2.pretokenize.scanner``'s notes): ``_run`` takes
  the text's ASCII bytes once (a whole text, or windows of 4,096 code points of a
  longer one that is not ASCII), because mypyc's ``ord(text[k])`` works out the str's kind and
  data pointer again at each code point (the loop's loads stall on it: a third of ``piece_key``'s
  samples). o200k English (300K characters, cold, callgrind): instructions 51.2M -> 43.4M (-15%);
  texts of other scripts pay the windows' tests and the longer loop: XNLI +1.6%, 6,000 XNLI
  sentences one by one +1% (their fifth that is ASCII gains); ``python scripts/bench_families.py``,
  o200k against tiktoken, English 1.99x -> 2.17x, sentences 1.98x -> 2.33x, XNLI 2.33x (one run
  each, the same day). ``str.isascii`` is called through its descriptor (``_is_ascii``): mypyc
  has no primitive for it, and the method call looks the name up (187 -> 70 instructions).
  A longer piece is confirmed by comparing its code points packed into words (7 or 3 a word,
  packed by the loop that hashes it) with the words stored after its ids, not by comparing
  the stored str code point by code point: English -3.9%, code -3.4% estimated cycles, and
  in whole-process A/B runs (encode of each 1 MB corpus, cold, process time, 7 alternating
  rounds) 6-13% faster on all four corpora, more than callgrind's cache model shows: a hit no
  longer reads a str object from a random address, and no str per piece is kept or freed.
- Pair keys are ints, not tuples: no tuple per lookup, and int hashing is trivial.
- A random access into a multi-MB table costs more than one into the L2-sized tables (256-512
  KB), hence the 512 KB ``byte_pairs`` table for the first pairs of a piece (XNLI merges 669 ->
  466 ns a piece), hash and value side by side in the cache's one array, the vocabulary keyed
  like the cache (no slice, no siphash: English misses 1.3 -> 0.8 us), and reused scratch
  arrays instead of appends. Sampling the compiled encode of XNLI (``perf record -e cpu-clock``,
  which is real time, unlike callgrind's cache model) put 29% of the time in ``_pair_value``,
  nearly all of it waiting on its three loads (pair cache, merge table, then the merged id of
  the rank in a 2 MB array): a miss there costs ~130 ns on this shared machine, not the 40
  cycles the model charges. Hence the filters below, huge pages for the tables
  (``peek2.bpe.huge_pages``: 2-3% in paired runs), and key and value of the merge table in one
  16-byte slot (no dependent load of the merged id; 8 MB instead of 4 + 2 MB). Before the
  filter the slot was mixed (6,000 XNLI sentences -6%, Chinese +7-10%: the misses probed twice
  the bytes); after it, best of 8 alternating processes: XNLI -7%, sentences -3%, Chinese
  -2.6%, English -7% (300K characters, cold cache); callgrind's last-level misses of the
  sentences -7%, Chinese unchanged.
- Finding the best pair is branch-bound, not memory-bound: a scan for the minimum over the
  piece's pair values mispredicts on the data. ``_merge_blocks`` tags each value with its
  position (one integer comparison gives rank, then leftmost) and takes minima with ``min``
  (compiled to a conditional move), over blocks of 8 instead of the whole piece, without
  shifting arrays after a merge. Against the former scan-and-shift (300K CJK characters
  encoded twice, cold, under callgrind): instructions 726M -> 533M, branch mispredictions
  5.7M -> 4.4M; merging the 17k distinct pieces of the CJK corpus 49.5 -> 35.3 ms, CJK
  encode 17.2 -> 22.3 MB/s (0.82x -> 1.18x tiktoken in scripts/bench_encode.py). Then blocks
  padded to 8 values, refreshed by a fixed tree of ``min`` (no loop), and ``_at`` without a
  branch: estimated cycles (callgrind, cold) CJK -7%, XNLI -4.5%, XNLI sentences -5%. Refreshing
  the three touched blocks unconditionally instead of testing which changed: +8-12%, reverted.
  A full tree
  of minima (O(log n) a merge) was worse: the walk to the root is a loop per merge, and CJK
  instructions rose 356M -> 593M, mispredictions 3.0M -> 6.9M (200K characters): not kept.
- setup.py compiles with ``-fno-semantic-interposition`` (Linux): without it GCC called every
  function of this module through the PLT and inlined none (``cache_slot``); with it, under
  callgrind, English, XNLI and CJK run 4-7% fewer estimated cycles.
- ``_pair_value``'s direct-mapped cache of 16,384 recent pairs (256 KB) in front of the 4 MB
  merge table, with the merged id in the cached value (no ``merged[rank]`` access on a hit):
  XNLI 20 -> 29 MB/s, CJK 10 -> 14 MB/s. Cached multi-token results live in one flat array,
  not a list each: the garbage collector was 8% of CJK time visiting those lists.
- Most lookups find no merge (300K characters: Chinese 168K of 212K, XNLI 42K of 85K), and
  most of those miss the pair cache too. ``MergeTable.filter``, two bits a pair in one 64-bit
  word of a 256 KB array, answers them before the pair cache and the merge table are read. Process time of an encode (300K characters, cold cache; two
  tokenizers in one process, with and without the filter, alternated 20 times; median of the
  paired ratios): Chinese -28%, XNLI -10%, 6,000 XNLI sentences -7%, English +2% (its few
  lookups mostly merge, and pay for the filter). 128 KB and 512 KB filters: the same within
  noise. An earlier one-hash 512 KB filter "made no measurable difference" in whole-process
  runs whose spread (0.68-0.92x) hid a gain of this size: alternate inside one process. The
  filter's hash (``_filter_hash``) matters: with one multiply, 20% of the non-merging pairs met
  in text passed (one left token with many right ones); with two and a shift, 5.6%, the rate
  of random keys: last-level misses of 6,000 sentences -10% under callgrind.
- With ``ignore_merges``, a new piece is first looked up among the vocabulary's tokens (a 4 MB
  table): two lookups in three find nothing (XNLI). ``token_filter`` (the same two bits a key,
  128 KB) answers most of those: paired runs as for the merge filter, XNLI -5%, XNLI sentences
  -5%, Chinese -9%, English -2.5% (64 and 256 KB: the same within noise).
- The ids go out as shared int objects (``shared_ints``: the ints 0 .. vocabulary size - 1,
  made once a process, 4 MB for Llama-3) and are gathered in a native buffer (``out_ids``,
  kept between calls up to ``OUT_IDS_KEPT``) that ``encode_list`` turns into a list made at its
  final size: no int made or freed per id, no ``list.append`` and no regrowth of a list that
  reaches megabytes (Chinese: 24% of the estimated cycles were int objects, appends and list
  copies). Estimated cycles, here with a 2 MB last-level cache (this machine's L2) at 40 cycles
  a miss, encode plus freeing the ids, 300K characters, cold: English -2.7%, XNLI -9.5%, Chinese
  -17.5%; process time of a cold encode of the 1 MB Chinese corpus (4 alternating rounds, best
  of 15) 31.6-32.6 -> 23.6-26.9 ms with ``_merge_text`` below. Before, only ids below 8,192
  were shared (256 KB of ints that stay in L2), because sharing every id had measured slower
  (English 58 -> 43 MB/s, attributed to random increfs into 4 MB of ints); on this build and
  this cache model it is not: L2 misses fell (Chinese 1.37M -> 0.92M), as the hot ids are few
  and a fresh int costs an allocation, a free and a data-dependent branch. Checked again after
  the filters, in paired runs inside one process (fresh ints above id 8,192, shared below, against
  all shared): 6,000 XNLI sentences +-0, XNLI +4%, Chinese +12%, English -2%: all shared stays.
  That holds for one long text; a short list is the other way round. ``encode_batch`` of
  documents of a few hundred ids each (``scripts/bench_mixed.py``'s sets) spent 9% of its time
  in the increfs of ``encode_list_prefix``, nearly all of it waiting on the int objects of
  ids scattered over 4 MB (``perf annotate``), and more in the garbage collector's visits of
  the same objects through the lists. A list of at most ``FRESH_INTS_MAX_IDS`` ids now makes
  its ids from ``FRESH_INTS_FROM`` up as new ints, which sit together in memory just written
  (a longer list keeps all shared: 4,096 new ints are 128 KB). Paired in one process (the rule
  switched at each call, 15 rounds, best runs; Llama-3.1): the mixed documents 19.3 -> 20.4
  MB/s, 20,000 XNLI sentences one by one 16.8 -> 18.1, XNLI as one text 26.0 -> 26.3 (its list
  is long: unchanged, the control). Making every id above 256 new: the same within the noise.
  A batch's result holds the new ints (32 bytes each, 1.2M of the 2.1M ids of 8 MB of mixed
  documents: 39 MB beside the lists' 17 MB); the other engines make an int for every id.
- ``_merge_text`` makes the UTF-8 bytes from the code points in place: no slice of the piece,
  no ``str.encode``, no bytes object: estimated cycles English -0.7%, XNLI -2.1%, Chinese -6.8%.
- ``PlainEncode``: ``Tokenizer.encode`` compiled for text without added tokens, installed as
  the instance's ``encode``: 0.30-0.37 -> 0.07 us a call over the engine; 6,000 XNLI sentences
  one by one -10% (paired runs: the interpreted method against it, in one process).
- Without ``ignore_merges`` a new piece is looked up among the tokens whose bytes merge into
  themselves (all but ``not_self_merging``; every token of the GPT-4o, Llama-3.2, DeepSeek-V3,
  Qwen and GPT-2 files): a hit needs
  no merge. Paired runs as below (the lookup off and on): DeepSeek-V3 English -12.6%, code -4.8%,
  XNLI -1%, Chinese +1.9% (its pieces are rarely tokens); Qwen3 English -7%, code -7%, Chinese
  +1.9%; GPT-4o's file English -12.7%, XNLI -6.6%, sentences -7.8%, Chinese +3.6%. A load without
  the load cache pays 0.07-0.1 s for the list, and every load 40-50 ms to key the 128-200K tokens.
- Only the pairs that can apply are in the table (``final_pairs``): Llama-3's files list 280K
  merges for 128K tokens, ``converter_merges`` 446K pairs for o200k's 200K; 128K and 200K remain,
  so the table is 4 and 8 MB instead of 8 and 16, and the filter half as full. Encode with the
  cache emptied before each run, paired runs in one process (9 a side, median of the ratios; the
  table with every pair against the final pairs only): o200k_base XNLI -5.9%, Chinese -12%,
  sentences one by one -6.3%, English -0.9%, code -2.3%; Llama-3.1 XNLI -2.9%, Chinese -6.8%,
  sentences -2.8%, English -1%, code -3%. A load without the load cache pays 0.05 s for it.
- HEAP_MIN_BYTES went from 256 to 2048 (positions in the block values from 8 bits to 11). The
  block minima cost a scan of n / 8 minima a merge, which stayed below the heap's cost up to
  about 3,000 symbols; the heap (no byte-pair table, no whole characters, four arrays made per
  piece) cost 2.8x a byte at 256 what the blocks cost at 255. Words of random letters, 300 KB,
  Llama-3.2, tiktoken from its tokenizer.model in the same run, the piece cache emptied before
  each of 5 runs (medians): 256 letters 0.0361 -> 0.0132 s (tiktoken 0.044), 1,000 letters
  0.0386 -> 0.0195 s, 2,000 letters 0.045 -> 0.029 s (1.05x -> 1.58x tiktoken); at 4,000 the
  blocks took 0.049 s against the heap's 0.046 s. A bug hunt had found such words (DNA, long
  lowercase runs, lines of punctuation) at 0.67-0.85x tiktoken on a busy machine.
- The heap's pop goes bottom-up (one comparison a level, then the last entry rises from a leaf),
  and its four arrays are kept from piece to piece (``HeapScratch``): a bug hunt found one piece of
  4,000 characters (a run of letters, spaces, dots, Cyrillic, emoji) at 0.70-0.80x tiktoken with a
  rank file (cl100k_base; the sift-down was 65% of the time), and of 40,000 at 0.80-0.95x. Now
  0.80-0.94x and 0.96-1.08x (CPU medians of 5 interleaved runs, the piece cache emptied before each).
- The heap looks its pairs up as the blocks do: the first in ``byte_pairs``, the others through
  ``_pair_value`` (the filter, then the recent pairs) instead of the merge table each time
  (``MergeTable.get`` was 28% of a one-piece encode of 4,000 letters). Pieces of random letters
  (a bug hunt's; 200K characters a call, CPU medians of 5, the piece cache emptied, cl100k_base
  against tiktoken): 2,048 letters 0.81x -> 0.97x, 5,000 0.77x -> 0.96x, 20,000 1.03x, 40,000
  0.85x -> 1.06x; o200k_base 5,000 0.75x -> 0.99x; r50k_base 5,000 0.85x -> 1.03x. Llama-3.2's
  file, 300K characters of words of 4,000 letters: 0.046-0.049 -> 0.036 s.
- Tiers of block minima (``TIER_FROM``): from 32 blocks (256 symbols) on, ``_merge_symbols`` also
  keeps the minimum of every 8 blocks, and a merge scans those (n / 64) instead of every block's
  (n / 8, a chain of dependent ``min``). ``merge_whole`` of one piece, Llama-3.1, best of 7, old
  and new build in alternating processes: 2,040 spaces 328 -> 102-111 us, 2,040 times "a" 292 ->
  91-100 us, 1,000 times "a" 80 -> 37-39 us, 2,000 random letters 173 -> 63-68 us, 500 random
  letters 18.1 -> 12.9 us, 250 times "a" 9.1 -> 7.9 us; words of 3-12 letters 276-297 ns against
  283-290 ns (the same). Tiers from 16 blocks gained nothing more at 130 symbols. A rank file
  (Llama-3.2's tokenizer.model) on one piece of 2,040 times "a": 0.97x -> 2.85x tiktoken; a stream of
  GPT-4o's file fed 100K spaces a character at a time, whose long run is merged in pieces of
  about 2,040 spaces (``peek2.serving.stream_engine``'s rule 3): 0.91x -> 1.27-1.30x tokenizers'
  one encode of the whole. With tiers the blocks beat the heap at 4,000 symbols too, so
  HEAP_MIN_BYTES went from 2048 to 4096 (positions in the block values from 11 bits to 12; the
  four scratch arrays 64 -> 128 KB): ``merge_whole`` of 4,000 times "a" 517 -> 239 us, 4,000 random
  letters 340 -> 168 us; the rank file on one piece of 3,000 / 4,000 / 4,095 times "a" 1.20x /
  1.13x / 1.15x -> 2.63x / 2.39x / 2.13x tiktoken (5,000, still the heap: 1.12-1.13x).
- A tree of minima (``_climb``): from 32 blocks on, minima of 8 blocks, minima of 8 of those, and
  so on until at most 8 remain, which a merge scans; a merge refreshes the minima above the
  blocks it changed, up to the first that stays the same. The heap cost 2.6x a byte what the
  blocks cost (4,100 spaces 173 ns a byte against 67 at 4,000), so HEAP_MIN_BYTES went from 4096
  to 65,537 (a LongPieces block of 64 KB merges in the blocks; positions 17 bits; the scratch
  arrays kept from piece to piece grow up to 32K symbols, 1 MB; a longer piece borrows arrays
  that are dropped after it, ``BytePairEncoder._room``: kept at 64K, they left 2 MB with every
  engine that met a long run, which a prompt cache's memory test counted; borrowed, 40,000 and
  65,536 spaces merge in the same 2.2 and 3.4 ms).
  ``merge_whole``, Llama-3.1, best of 7, old and new build in alternating processes: 2,040 spaces
  102-104 -> 88 us, 4,000 times "a" 239-267 -> 159-160 us, 4,000 random "acgt" 177-200 -> 124-128
  us, 40,000 spaces 7.6-7.8 -> 2.1 ms, 40,000 random "acgt" 4.9 -> 1.7-1.9 ms, 65,536 spaces 12.3
  -> 3.4 ms; words of 8-1,000 random letters within 0.985-1.05x (noise of the day), the corpora
  of ``scripts/corpora.py`` with the piece cache emptied the same within the day's noise. A rank
  file (Llama-3.2's tokenizer.model) on one piece against tiktoken (``python
  scripts/bench_hunt_cases.py --runs 5 --only rank``): 40,000 spaces 1.04x -> 3.50x, 40,000 "ж"
  1.16x -> 3.38x, 4,000 spaces 2.27x -> 3.10x, 4,000 times "a" 1.80x -> 2.46x.
- HEAP_MIN_BYTES went from 65,537 to 131,073 (positions 18 bits), above LONG_PIECE_BYTES: a
  piece of 64K-128K bytes had gone to the heap whole, the only one that still did, so one run
  of a character cost more at 80,000 than at 160,000 (cut by ``long_pieces`` into blocks).
  Llama-3.2, ``encode``, best of 3, CPU time: 80,000 "=" 15.0 -> 4.7 ms, spaces 15.6 -> 4.8,
  "a" 12.1 -> 4.1 (``tokenizers`` 22-26 ms; 40,000 and 160,000 unchanged, 2.0-2.4 and 7.7-9.2
  ms); ``tests/test_merge_table.py`` checks 30,000 -> 120,000 (10-14x the time before, 4x now).
- Pieces go to the heap when they start as more than HEAP_MIN_BYTES - 1 symbols, not bytes
  (``_merge_text`` counts them): with whole characters, a Thai word of o200k's pattern (one piece
  of 90-180 characters, 270-540 bytes) merges in the blocks, with the pair cache and the filter.
  With whole Thai characters for o200k (``peek2.bpe.whole_chars``), the 1,332 Thai sentences of
  the sentences corpus, encoded one by one: 9.8 -> 7.5 ms (1,332 calls timed each, best of two
  passes); the sentences corpus, o200k_base against tiktoken: 1.70x -> 1.80x (``python
  scripts/bench_families.py --runs 5``).
- The piece cache's size (``peek2.tokenizer.DEFAULT_CACHE_SIZE``). 65,536 or 262,144 pieces had
  measured slower than 16,384 when every run started with an empty cache, on one megabyte of
  text: such a run meets few pieces again after thousands of others. A worker of a corpus
  does: 8 MB sets of new mixed documents (``scripts/bench_mixed.py``'s, 105K distinct pieces a
  set, 20% of its bytes in their first occurrences), encoded one after another by tokenizers
  of each size in one process, paired, after two sets: 131,072 pieces 1.16x, 524,288 1.44x,
  1,048,576 1.55x the speed of 16,384 (which empties itself 6 times a set). Started empty, on
  the 1 MB corpora and the 20,000 sentences (9 paired runs): 1,048,576 against 16,384 within
  0.97-1.09x. The default is 1,048,576; the slots grow with the pieces (a megabyte of text
  keeps 0.5-1 MB of them), and ``MULTI_WORDS_MAX`` bounds the ids.
- Admission by length class (``PieceCache.admit``): a class of piece lengths whose pieces came
  again less than one time in 8 over its last 1,024 misses caches one miss in 8. Random CJK
  words (every piece new, many ids each with GPT-2's ranks), 400K characters, CPU medians of 5
  with the cache emptied first: 48.3 -> 28.2 ms (no cache at all: 26.8 ms; tiktoken 44-48 ms);
  ``scripts/bench_hunt_cases.py --only rank``'s case 1.53x -> 2.54x tiktoken. The 1 MB corpora
  (xnli, english, code, cjk) within the noise (32.4/14.1/15.8/22.1 -> 32.1/13.6/15.7/20.7 ms),
  and ``scripts/bench_mixed.py --mb 4 --runs 3`` (a worker's steady state) 36.4-38.5 MB/s before,
  36.4-37.4 after.
- Tried and reverted: the shared ints made on first use instead of all at once, so that the ids a text
  uses often sit together (1M characters of XNLI, Chinese, English, three alternating
  processes of each build: within the noise).
- Whole characters (``_merge_text``; ``_merge_whole_chars`` before): in the Chinese corpus 88%
  of the merges only join the three bytes of a character. A piece of more than 2 UTF-8 bytes
  a character starts from its characters' tokens where ``peek2.bpe.whole_chars`` allows it (93% of
  the Chinese, 86% of the Thai characters; since ``_merge_text``, every listed character that
  fits, in any piece): estimated cycles (300K characters, cold) Chinese 346 -> 241 M
  (-30%), XNLI of 15 languages -4.6%, 6,000 XNLI sentences -4.9%; English and code untouched
  (ASCII pieces keep the byte path). Pieces of two-byte characters (Cyrillic, Greek, Arabic,
  accented Latin) first kept the byte path: one merge saved a character did not pay for the
  character loop and the neighbour checks (Russian, Arabic sentences +-1% when routed
  through it). Once ``_merge_text`` made the bytes from the code points (the same loop for
  both), taking two-byte characters whole too paid: estimated cycles (60K characters of one
  XNLI language, cold, 2 MB last level) Russian -7%, Arabic -6%, Greek -10%, French, German,
  Turkish, Vietnamese unchanged; XNLI of 15 languages -2.8%. The neighbour check's pair set first took its slot from ``_slot`` of the
  packed pair, which sees only the second code point: long probe chains, 8% of all XNLI
  instructions; ``_pair_slot`` mixes both. Conditional expressions in the character loop
  were boxed by mypyc (``x if c else y`` is an ``int``): written as statements.
  The neighbour checks then probed the ``after`` pairs (512 KB for DeepSeek-V3, whose CJK
  characters pair with 4.6 following characters or blocks on average) for 65% of the Chinese
  characters, and found one in 73 of 361,292 probes: ``CodePointPairs.has`` was 12% of a cold
  DeepSeek-V3 encode of Chinese (``perf record -e cpu-clock``). A Bloom filter of each
  character's pairs in its entry's spare bits (28 bits ``after``, 8 ``before``) answers 85% of
  those probes (96% for Llama-3): ``has`` 12% -> 3.6%; callgrind (300K characters of Chinese,
  cold, 2 MB last level) instructions -2.3%, last-level read misses -13%; the fastest of 8
  alternated processes of each build, DeepSeek-V3 Chinese -4.5%, Llama-3.1 XNLI -2%.
  Two bits a pair in the ``after`` filter would leave 69% of its probes (counted on the
  distinct pieces of the Chinese corpus: 19.3K of 27.9K) with a second, independent multiply
  per check; two bits of one product leave 88% (they are correlated). About 1% of the encode,
  not taken.
- Tried and reverted: ``_run`` scanning one piece ahead and reading that piece's cache slot
  before this piece's lookup, so that the slot's read (74% of ``_run``'s samples in a cold
  encode of the 20,000 sentences with o200k, ``perf annotate``) would not wait behind the
  branches on the slot before it. Callgrind: o200k English +5.5% instructions (43.4M ->
  45.8M, two key buffers swapped, a lookahead per piece); the fastest of 8 alternated
  processes of each build (CPU time, best of 7 in each): slower everywhere (o200k sentences
  104.8 -> 110.8 ms, English 22.0 -> 24.4, Llama-3.1 XNLI 50.9 -> 54.3), DeepSeek-V3 Chinese
  unchanged. The out-of-order core already overlaps those reads.
"""

from __future__ import annotations

from typing import Any, Callable, Final

from librt.strings import BytesWriter, read_i64_le, write_i16_le, write_i32_le
from librt.vecs import append, vec
from mypy_extensions import i16, i32, i64

from peek2.pretokenize.scanner import latin1_piece_end, latin1_stage, piece_end, reads_latin1_pieces, surrogate_error
from peek2.bpe.merge_table import ID_BITS, ID_MASK, NO_MERGE, PAIR_STRIDE, MergeTable, filter_word_bits, fold_key
from peek2.bpe.piece_cache import CACHE_MAX_CHARS, EXACT_KEY, KEY_WORDS, PieceCache, cache_slot, latin1_key, piece_key

POS_MASK: Final = 0xFFFFFFFF
HEAP_MIN_BYTES: Final = (1 << 17) + 1  # every piece up to LONG_PIECE_BYTES merges in the blocks
BLOCKS_FIRST_ROOM: Final = 4096  # the symbols the block scratch holds until a longer piece comes
BLOCKS_KEPT_ROOM: Final = 1 << 15  # ... and at most, kept from piece to piece (BytePairEncoder._room)
LONG_PIECE_BYTES: Final = 1 << 17  # a piece longer than this goes to ``BytePairEncoder.long_pieces``
LATIN1_WINDOW: Final = 4096  # _run: code points a window of the text checked for Latin-1 (see _latin1_window)
LATIN1_PROBE: Final = 64  # ... of which these first
PAIR_CACHE_MASK: Final = (1 << 14) - 1  # 16,384 recent pairs, 256 KB
TOKEN_FILTER_WORDS: Final = 1 << 14  # the vocabulary's filter (ignore_merges): 128 KB
OUT_IDS_KEPT: Final = 1 << 20  # a larger ids buffer (8 MB) is dropped after the call
FRESH_INTS_MAX_IDS: Final = 4096  # encode_list: a list of at most this many ids ...
FRESH_INTS_FROM: Final = 8192  # ... makes its ids from this one up as new ints (the rest: shared_ints)
# WholeChars entries: a token id and, above it, where the character may not enter as that token.
WHOLE_NOT_AFTER_ASCII: Final = 1 << ID_BITS
WHOLE_NOT_AFTER_LISTED: Final = 2 << ID_BITS  # ... after a character paired with it in ``before``
WHOLE_NOT_BEFORE_ASCII: Final = 4 << ID_BITS
WHOLE_NOT_BEFORE_LISTED: Final = 8 << ID_BITS  # ... before a character paired with it in ``after``
WHOLE_NOT_BEFORE_BLOCK: Final = 16 << ID_BITS  # ... before a character of a block paired with it in ``after``
WHOLE_NOT_AFTER_TAIL: Final = 32 << ID_BITS  # ... after a character whose last byte ``before`` pairs with it
WHOLE_BLOCKS: Final = 0x110000  # ``after`` pairs a character with WHOLE_BLOCKS + (code point >> 6) for a block,
# ``before`` pairs WHOLE_BLOCKS + (code point & 63) (the last byte of a character of two bytes or more) with one
WHOLE_CHARS: Final = 65_536  # WholeChars covers the code points below this (2 and 3 UTF-8 bytes)
# Above the flags, two Bloom filters of the character's pairs (built by WholeChars): a clear bit
# answers "not paired" without probing ``after`` (28 bits) or ``before`` (8 bits).
WHOLE_AFTER_BLOOM: Final = ID_BITS + 6
WHOLE_AFTER_BLOOM_BITS: Final = 28
WHOLE_BEFORE_BLOOM: Final = WHOLE_AFTER_BLOOM + WHOLE_AFTER_BLOOM_BITS
WHOLE_BEFORE_BLOOM_BITS: Final = 8  # (bits 26-61: an entry stays positive)


# str.isascii called through its descriptor: mypyc has no primitive for it, and its method call
# looks the name up each time (a third of the cost of a short text's test).
_is_ascii: Final[Callable[[str], bool]] = str.isascii
_SHARED_INTS: Final[list[tuple[Any, ...]]] = [()]  # the one tuple, replaced when it grows
_NO_IDS: Final[list[int]] = []  # an empty head for encode_list (never changed)


def shared_ints(count: int) -> tuple[Any, ...]:
    """The int objects 0 .. count - 1, made once a process (one tuple, made larger for a larger vocabulary).

    The ids of a long text are these objects (see the performance notes): no int is made for an
    id, and none is freed with the list (a short list makes its rarer ids as new ints). A tuple,
    not a list: the garbage collector stops tracking a tuple of ints at its first pass, where it
    walks a list of 128K ints at every full collection (see ``peek2.tokenizer``'s notes on
    collections).
    """
    ints = _SHARED_INTS[0]
    if len(ints) < count:
        ints = ints + tuple(range(len(ints), count))
        _SHARED_INTS[0] = ints
    return ints


def _latin1_window(text: str, start: i64, end: i64) -> bytes:
    """``text[start:end]`` as Latin-1 bytes for ``latin1_piece_end``, or empty when a scalar of it is
    above U+00FF or is U+00AA or U+00BA (Lo: a letter of both the cased shape's classes, which
    the byte loops do not know).

    A few scalars spread over the range are read first, and then the first ``LATIN1_PROBE``: a
    text of another script is rejected there, before any slice or encoding of the range."""
    step: i64 = (end - start) // 4 + 1
    k: i64 = start + step // 2
    while k < end:
        if ord(text[k]) > 0xFF:
            return b""
        k += step
    probe = text[start : min(end, start + LATIN1_PROBE)]
    if not _is_ascii(probe) and len(probe.encode("latin-1", "ignore")) != len(probe):
        return b""
    part = text[start:end] if end - start > LATIN1_PROBE else probe
    if _is_ascii(part):
        return part.encode("ascii")
    data = part.encode("latin-1", "ignore")
    if len(data) != end - start or data.find(b"\xaa") >= 0 or data.find(b"\xba") >= 0:
        return b""
    return data


class CodePointPairs:
    """A set of pairs of code points (``first << 21 | second``), as open addressing in a packed array."""

    def __init__(self, pairs: list[int]) -> None:
        slots: i64 = 2
        while slots < 2 * len(pairs) + 2:
            slots *= 2
        mask: i64 = slots - 1
        table = vec[i64]([0] * slots)
        for pair in pairs:
            key: i64 = pair + 1
            slot = _pair_slot(pair >> 21, pair & 0x1FFFFF, mask)
            while table[slot] != 0 and table[slot] != key:
                slot = (slot + 1) & mask
            table[slot] = key
        self.mask: Final = mask
        self.table: Final = table

    def has(self, first: i64, second: i64) -> bool:
        table = self.table
        mask = self.mask
        key = ((first << 21) | second) + 1
        slot = _pair_slot(first, second, mask)
        while True:
            found = table[slot]
            if found == key:
                return True
            if found == 0:
                return False
            slot = (slot + 1) & mask


def _pair_slot(first: i64, second: i64, mask: i64) -> i64:
    # Both code points mixed in (``_slot`` of the packed pair would see only the second one).
    mixed = (first * 0x10001 + second) & 0xFFFFFFF
    return ((mixed * 0x9E3779B1) >> 24) & mask  # product below 2**60


class WholeChars:
    """Characters that enter a merge as their own token instead of their UTF-8 bytes.

    ``entries[c]`` (c below WHOLE_CHARS) is -1, or the token id of ``chr(c)`` with WHOLE_NOT_*
    flags above it: the neighbours next to which the character must enter as bytes. Which
    characters qualify, and why the ids stay those of byte-level BPE, is ``peek2.bpe.whole_chars``.
    Above the flags, Bloom filters of the character's pairs in ``after`` and ``before`` spare
    most probes of those tables (see the performance notes).
    """

    def __init__(self, entries: list[int], before: list[int], after: list[int]) -> None:
        # (Python ints here: mypyc emits ``1 << n`` of i64 operands as a C int shift, wrong past bit 31.)
        values = list(entries)
        for pair in after:
            c = pair >> 21
            if values[c] >= 0:
                values[c] |= 1 << (WHOLE_AFTER_BLOOM + int(_bloom_bit(pair & 0x1FFFFF, WHOLE_AFTER_BLOOM_BITS)))
        for pair in before:
            c = pair & 0x1FFFFF
            if values[c] >= 0:
                values[c] |= 1 << (WHOLE_BEFORE_BLOOM + int(_bloom_bit(pair >> 21, WHOLE_BEFORE_BLOOM_BITS)))
        table = vec[i64](values)
        self.entries: Final = table
        self.before: Final = CodePointPairs(before)  # (previous character, c): c enters as bytes
        self.after: Final = CodePointPairs(after)  # (c, next character): c enters as bytes
        self.count: Final[i64] = len([e for e in entries if e >= 0])

    def fits(self, entry: i64, previous: i64, c: i64, following: i64) -> bool:
        """Whether ``c`` (with ``entry``) enters as its token between ``previous`` and ``following``
        (-1 at the ends of the piece)."""
        if previous >= 0:
            if entry & WHOLE_NOT_AFTER_ASCII and previous < 128:
                return False
            before_bloom = entry >> WHOLE_BEFORE_BLOOM
            if (
                entry & WHOLE_NOT_AFTER_LISTED
                and (before_bloom >> _bloom_bit(previous, WHOLE_BEFORE_BLOOM_BITS)) & 1
                and self.before.has(previous, c)
            ):
                return False
            if entry & WHOLE_NOT_AFTER_TAIL and previous >= 128:
                tail = WHOLE_BLOCKS + (previous & 63)
                if (before_bloom >> _bloom_bit(tail, WHOLE_BEFORE_BLOOM_BITS)) & 1 and self.before.has(tail, c):
                    return False
        if following >= 0:
            if entry & WHOLE_NOT_BEFORE_ASCII and following < 128:
                return False
            after_bloom = entry >> WHOLE_AFTER_BLOOM
            if (
                entry & WHOLE_NOT_BEFORE_LISTED
                and (after_bloom >> _bloom_bit(following, WHOLE_AFTER_BLOOM_BITS)) & 1
                and self.after.has(c, following)
            ):
                return False
            if entry & WHOLE_NOT_BEFORE_BLOCK:
                block = WHOLE_BLOCKS + (following >> 6)
                if (after_bloom >> _bloom_bit(block, WHOLE_AFTER_BLOOM_BITS)) & 1 and self.after.has(c, block):
                    return False
        return True


def _bloom_bit(key: i64, bits: i64) -> i64:
    """Which of ``bits`` bits a code point (or WHOLE_BLOCKS + a block or tail) sets in a WholeChars
    Bloom filter: the product's bits 16-31 scaled to the range (no division)."""
    return ((((key * 0x9E3779B1) >> 16) & 0xFFFF) * bits) >> 16  # key below 2**22: no overflow


class BytePairEncoder:
    """Encodes text (after special-token splitting and normalization) into ids."""

    def __init__(
        self,
        byte_ids: vec[i64],
        merges: MergeTable,
        whole_tokens: dict[str, int],
        ignore_merges: bool,
        stage2: bytes,
        rules: int,
        cache_size: int,
        whole: WholeChars,
        not_self_merging: list[int] | None = None,
    ) -> None:
        self.byte_ids: Final = byte_ids
        self.whole: Final = whole
        self.merges: Final = merges
        self.whole_tokens: Final = whole_tokens
        self.ignore_merges: Final = ignore_merges
        self.stage2: Final = stage2
        self.latin1_stage: Final = latin1_stage(stage2)  # (latin1_piece_end's table)
        self.rules: Final = rules
        self.cache_size: Final = cache_size
        self.cache: Final = PieceCache(cache_size)
        top = max(max(byte_ids), merges.top_id, max(whole_tokens.values(), default=0))
        self.shared: Final[tuple[Any, ...]] = shared_ints(top + 1)  # every id this engine can give
        # The vocabulary's tokens keyed like the cache, so that a piece that is a token is found
        # in place (a dict needs the piece sliced out and hashed first): every token with
        # ignore_merges, else those whose bytes merge into them (all but ``not_self_merging``;
        # None: not known, no lookup), whose piece needs no merging either.
        left_out: set[int] | None = None
        if not ignore_merges and not_self_merging:
            left_out = set(not_self_merging)
        self.token_lookup: Final = ignore_merges or not_self_merging is not None
        tokens = PieceCache(len(whole_tokens) if self.token_lookup else 0, True)
        self.key_words: Final = vec[i64]([0] * KEY_WORDS)  # the words of the last piece_key
        words = self.key_words
        # The tokens' filter, like MergeTable's: most pieces looked up are not tokens.
        filter_words: i64 = TOKEN_FILTER_WORDS if self.token_lookup else 1
        token_filter = vec[i64]([0] * filter_words)
        if self.token_lookup:
            one = vec[i64]([0])  # (one buffer for every token's id: a vec and a list a token were a third of this loop)
            for token, token_id in whole_tokens.items():
                if 0 < len(token) <= CACHE_MAX_CHARS and (left_out is None or token_id not in left_out):
                    key = piece_key(token, 0, len(token), words)
                    one[0] = token_id
                    tokens.add(key, words, one, 1)
                    word, bits = filter_word_bits(fold_key(key), filter_words - 1)
                    token_filter[word] |= bits
        self.tokens: Final = tokens
        self.token_filter: Final = token_filter
        # Rank of every pair of single-byte tokens, looked up by the two bytes.
        byte_pairs = vec[i64]()
        for pair in range(1 << 16):
            value = merges.get(byte_ids[pair >> 8] * PAIR_STRIDE + byte_ids[pair & 0xFF])
            byte_pairs = append(byte_pairs, value)
        self.byte_pairs: Final = byte_pairs
        self.pairs: Final = vec[i64]([0] * (2 * (PAIR_CACHE_MASK + 1)))
        # (grown for a longer piece by _room: not Final)
        self.scratch_ids = vec[i64]([0] * BLOCKS_FIRST_ROOM)
        self.scratch_values = vec[i64]([0] * BLOCKS_FIRST_ROOM)
        self.heap_scratch: Final = HeapScratch()
        self.scratch = MergeScratch(BLOCKS_FIRST_ROOM)
        # The scratch kept from piece to piece, while a longer piece borrows arrays of its own (_room)
        self.kept_ids = self.scratch_ids
        self.kept_values = self.scratch_values
        self.kept_scratch = self.scratch
        self.out_ids = vec[i64]([0] * 1024)  # the ids of the text being encoded (see encode_list)
        # Merges a piece of more than LONG_PIECE_BYTES bytes in blocks (``peek2.bpe.growing_piece``'s
        # ``LongPieces.block``, set by the tokenizer; None: in one heap, ~48 bytes of memory a byte):
        # ``long_pieces(data, at)`` is ``(end, ids)``, the ids of ``data[at:end]``, which no later
        # byte changes (``end == len(data)``: the last block).
        self.long_pieces: Callable[[bytes, int], tuple[int, list[int]]] | None = None

    def tables(self) -> list[object]:
        """The arrays an encode reads at random (for ``peek2.bpe.huge_pages``), largest first."""
        whole = self.whole
        return [
            self.merges.table,
            self.merges.filter,
            self.token_filter,
            self.tokens.entries,
            self.tokens.multi,
            whole.entries,
            self.byte_pairs,
            self.cache.entries,
            self.pairs,
            whole.before.table,
            whole.after.table,
        ]

    def encode(self, text: str, out: list[int]) -> None:
        """Append the ids of ``text`` to ``out``."""
        self.encode_prefix(text, len(text), out)

    def encode_prefix(self, text: str, end: i64, out: list[int]) -> None:
        """Append the ids of the pieces of ``text`` before ``end``, a piece boundary of ``text``.

        Not the ids of ``text[:end]`` as a text of its own: the scanner sees all of ``text``, and
        where a whitespace run ends a piece depends on the character after the run (``\\s+(?!\\S)``):
        ``" \\xa0!"`` is cut ``" "``, ``"\\xa0"``, ``"!"``, while ``" \\xa0"`` alone is one piece.

        Raises:
            IndexError: ``end`` is outside ``text``.
            ValueError: a piece of ``text`` runs across ``end``.
        """
        # Appended one by one, not extended from a list of the ids: no list made and freed per call.
        # Streaming XNLI in 1 KB and 64 KB chunks: estimated cycles -0.8% and -1.6% (callgrind).
        count = self._run(text, end, True)
        ids = self._take_ids()
        shared = self.shared
        for k in range(count):
            out.append(shared[ids[k]])
        self._give_back(ids)

    def encode_spans(self, text: str, spans: list[tuple[int, int, int]], out: list[int]) -> None:
        """Append the ids of ``text`` cut by an added-token matcher's ``spans``: ``(start, stop,
        id)``, an added token's id, or -1 for text encoded as a text of its own."""
        for start, stop, token_id in spans:
            if token_id >= 0:
                out.append(token_id)
            else:
                self.encode(text[start:stop], out)

    def encode_cut(self, cut: list[str], ids: dict[str, int], out: list[int]) -> None:
        """Append the ids of a text an added-token matcher has cut (``AddedTokenMatcher.cut``):
        text segments and the contents of added tokens in turn, each content's id in ``ids``."""
        count: i64 = len(cut)
        k: i64 = 0
        while k < count:
            part = cut[k]
            if k & 1:
                out.append(ids[part])
            elif part:
                self.encode(part, out)
            k += 1

    def count_cut(self, cut: list[str]) -> int:
        """The number of ids ``encode_cut`` would append for ``cut``."""
        count: i64 = len(cut)
        total: i64 = 0
        k: i64 = 0
        while k < count:
            part = cut[k]
            if k & 1:
                total += 1
            elif part:
                total += self._run(part, len(part), False)
            k += 1
        return total

    def encode_list(self, text: str, head: list[int]) -> list[int]:
        """A new list: ``head``, then the ids of ``text``.

        Made at its final size (no growth: the ids are gathered in ``out_ids`` first).
        """
        return self.encode_list_prefix(text, len(text), head)

    def encode_list_prefix(self, text: str, end: i64, head: list[int]) -> list[int]:
        """A new list: ``head``, then the ids ``encode_prefix(text, end)`` appends (raises as it does)."""
        count = self._run(text, end, True)
        ids = self._take_ids()
        shared = self.shared
        size: i64 = len(head)
        result: list[Any] = [None] * (size + count)
        for k in range(size):
            result[k] = head[k]
        if count <= FRESH_INTS_MAX_IDS:
            # A short list (a document of a batch, a sentence) makes its rarer ids as new ints: see
            # the performance notes on shared ints.
            for k in range(count):
                token_id = ids[k]
                if token_id < FRESH_INTS_FROM:
                    result[size + k] = shared[token_id]
                else:
                    result[size + k] = token_id
        else:
            for k in range(count):
                token_id = ids[k]
                result[size + k] = shared[token_id]
        self._give_back(ids)
        return result

    def write_ids(self, text: str, out: BytesWriter, wide: bool) -> i64:
        """Write the ids of ``text`` to ``out`` as little-endian int32 if ``wide``, else uint16; returns their number.

        For arrays of ids (``Tokenizer.encode_batch_flat``, ``peek2.corpus``): no list and no
        list slot a id. The caller checks that uint16 holds every id of the vocabulary.
        """
        count = self._run(text, len(text), True)
        ids = self._take_ids()
        if wide:
            for k in range(count):
                write_i32_le(out, i32(ids[k]))
        else:
            for k in range(count):
                value = ids[k]
                if value >= 32768:  # the same two bytes as uint16 (this typeshed has no write_u16_le)
                    value -= 65536
                write_i16_le(out, i16(value))
        self._give_back(ids)
        return count

    def count(self, text: str) -> int:
        """The number of ids ``encode`` would append, without keeping them."""
        return self._run(text, len(text), False)

    def _take_ids(self) -> vec[i64]:
        # The ids buffer leaves the engine while the caller's list is made: making a list may run
        # the garbage collector, whose finalizers may encode with this engine (or let a thread do so).
        ids = self.out_ids
        self.out_ids = _NO_BUFFER
        return ids

    def _give_back(self, ids: vec[i64]) -> None:
        if len(ids) <= OUT_IDS_KEPT:
            self.out_ids = ids  # else dropped: an enormous text's buffer is not kept

    def _run(self, text: str, stop: i64, keep: bool) -> i64:
        """Encode the pieces of ``text`` before ``stop`` into ``out_ids`` if ``keep``; returns the number of ids."""
        stage2 = self.stage2
        rules: i64 = self.rules
        cache = self.cache
        words = self.key_words
        # The ids buffer is out of the engine until the end: Python code may run in the middle
        # (``long_pieces``; a garbage collector's finalizer), and another thread encode with this
        # engine meanwhile, into a buffer of its own (a thread test of LongPieces).
        out_ids = self.out_ids
        self.out_ids = _NO_BUFFER
        n: i64 = len(text)  # the scanner sees all of the text (see encode_prefix)
        if not 0 <= stop <= n:
            raise IndexError(f"end {stop} outside a text of {n} characters")
        guess: i64 = stop // 4 + 64  # a first guess (English 0.22 ids a character)
        if keep and len(out_ids) < guess:
            out_ids = _grown(out_ids, 0, guess)
        room: i64 = len(out_ids)
        i: i64 = 0
        count: i64 = 0
        # Windows of the text: the Latin-1 bytes of the one at window_start (empty if a scalar of
        # it is not Latin-1), whose pieces ending by latin1_end are keyed from them (latin1_key).
        # An ASCII text is one window; any other is tested LATIN1_WINDOW code points at a time.
        latin1_pieces = reads_latin1_pieces(rules)
        latin1 = self.latin1_stage
        window = b""
        window_start: i64 = 0
        window_end: i64 = 0
        latin1_end: i64 = -1
        if _is_ascii(text):
            window = text.encode("ascii")
            window_end = n
            latin1_end = n - 8
        while i < stop:
            end: i64 = -1
            if latin1_pieces and i >= window_start and i - window_start < len(window):
                end = latin1_piece_end(text, window, window_start, i, n, latin1, rules)  # (-1: whitespace, or not known)
            if end < 0:
                end = piece_end(text, i, n, stage2, rules)
            key: i64 = 0  # i64, not int: the slot arithmetic below must stay native
            if end - i <= CACHE_MAX_CHARS:
                if end > latin1_end and end > window_end:
                    window_start = i
                    window_end = min(n, i + LATIN1_WINDOW)
                    window = _latin1_window(text, i, window_end)
                    latin1_end = window_start + len(window) - 8
                if end <= latin1_end:
                    key = latin1_key(window, i - window_start, end - i, words)
                else:
                    key = piece_key(text, i, end, words)
            value: i64 = -1
            found = False
            if key != 0:
                entries = cache.entries  # (both read again per piece: an add may have grown them)
                mask = cache.mask
                slot = cache_slot(key, mask)
                stored = entries[2 * slot]
                while stored != 0:
                    if stored == key and (key >= EXACT_KEY or cache.holds(entries[2 * slot + 1], key, words)):
                        value = entries[2 * slot + 1]
                        found = True
                        break
                    slot = (slot + 1) & mask
                    stored = entries[2 * slot]
            if found:
                cache.hit(end - i)
            if found and value >= 0:
                if keep:
                    if count >= room:
                        out_ids = _grown(out_ids, count, count + 1)
                        room = len(out_ids)
                    out_ids[count] = value
                count += 1
            elif found:
                size = cache.size_of(value)
                if keep:
                    if count + size > room:
                        out_ids = _grown(out_ids, count, count + size)
                        room = len(out_ids)
                    cache.copy_ids(value, out_ids, count)
                count += size
            else:
                ids, size = self._compute(text, i, end, key)
                if size < 0:  # a long piece: its blocks go to out_ids (or are counted) one by one
                    out_ids, count = self._long_piece(text, i, end, out_ids, count, keep)
                    room = len(out_ids)
                    i = end
                    continue
                if keep:
                    if count + size > room:
                        out_ids = _grown(out_ids, count, count + size)
                        room = len(out_ids)
                    for k in range(size):
                        out_ids[count + k] = ids[k]
                count += size
            i = end
        if i != stop:
            raise ValueError(f"a piece of the text runs across {stop} (to {i}): not a piece boundary")
        self.out_ids = out_ids
        return count

    def _compute(self, text: str, start: i64, end: i64, key: i64) -> tuple[vec[i64], i64]:
        """The ids of text[start:end] (not in the cache) as ``(ids, size)``: ``ids[:size]``, in
        scratch space that the next call reuses. The piece is cached unless ``key`` is 0 (too long).
        ``size`` is -1 for a piece that may be longer than LONG_PIECE_BYTES bytes: ``_long_piece``
        merges it (never cached: its key is 0).
        """
        cache = self.cache
        if self.token_lookup:
            token: i64 = -1
            single = self.scratch_values
            if key != 0:
                tokens = self.tokens
                slot = -1
                token_filter = self.token_filter
                word, bits = filter_word_bits(fold_key(key), len(token_filter) - 1)
                if token_filter[word] & bits == bits:
                    slot = tokens.find(key, self.key_words)
                if slot >= 0:
                    token = tokens.first_id(slot)
                    single[0] = token
                    if cache.admit(end - start):
                        cache.add(key, self.key_words, single, 1)
            elif self.ignore_merges:  # (a piece too long for the table: rare; merged otherwise)
                token = self.whole_tokens.get(text[start:end], -1)
            if token >= 0:
                single[0] = token
                return single, 1
        size: i64 = -1
        if end - start < HEAP_MIN_BYTES and not self._too_long(text, start, end):
            size = _merge_text(self, text, start, end)  # -1: more than HEAP_MIN_BYTES - 1 symbols
        ids = self.scratch_ids  # (after _merge_text: it may have grown them, or borrowed others)
        if len(ids) > BLOCKS_KEPT_ROOM:
            self._give_back_room()  # (``ids`` stays the caller's until the next call)
        if size < 0:
            if 4 * (end - start) > LONG_PIECE_BYTES and self.long_pieces is not None:
                return ids, -1
            merged = _merge_heap(text[start:end].encode("utf-8"), self)
            size = len(merged)
            ids = vec[i64](merged)
        if key != 0 and cache.admit(end - start):
            cache.add(key, self.key_words, ids, size)
        return ids, size

    def _long_piece(self, text: str, start: i64, end: i64, out_ids: vec[i64], count: i64, keep: bool) -> tuple[vec[i64], i64]:
        """The ids of the piece text[start:end] after ``out_ids[:count]`` if ``keep`` (grown as
        needed), else only counted; returns the buffer and the new count.

        A block's ids go to the buffer as they come: gathering the piece's ids in a list first
        cost a list slot, an int and a copy per id (``count("ab" * 2_000_000)``: +92 MB of peak
        memory, ~47 bytes an id), where a count needs none of them.
        """
        data = text[start:end].encode("utf-8")
        n: i64 = len(data)
        at: i64 = 0
        while at < n:
            long_pieces = self.long_pieces
            if n > LONG_PIECE_BYTES and long_pieces is not None:
                block = long_pieces(data, at)  # (Python code: see _run on threads)
                stop: i64 = block[0]
                merged = block[1]
            else:
                stop = n
                merged = _merge_heap(data[at:] if at else data, self)
            size: i64 = len(merged)
            if keep:
                if count + size > len(out_ids):
                    out_ids = _grown(out_ids, count, count + size)
                for k in range(size):
                    out_ids[count + k] = merged[k]
            count += size
            if stop <= at:
                raise RuntimeError(f"long_pieces made no progress at byte {at} of {n}")
            at = stop
        return out_ids, count

    def _merge_short(self, data: bytes) -> i64:
        """Merge a piece of fewer than HEAP_MIN_BYTES bytes into ``scratch_ids``; returns the number of ids."""
        self._room(len(data))
        return _merge_blocks(
            data, self.byte_ids, self.byte_pairs, self.merges, self.pairs, self.scratch_ids, self.scratch_values, self.scratch
        )

    def _room(self, symbols: i64) -> None:
        """Scratch for the blocks' merge of up to ``symbols`` symbols (at most HEAP_MIN_BYTES - 1):
        the kept arrays, grown to a power of two once a piece needs it, up to BLOCKS_KEPT_ROOM
        symbols (1 MB, four arrays); a longer piece borrows arrays of its own, which
        ``_give_back_room`` drops (kept, a 64 KB block of a long run left 2 MB with every engine
        that met one: a prompt cache's memory bound counted them)."""
        room: i64 = len(self.kept_ids)
        need: i64 = min(symbols, HEAP_MIN_BYTES) + 8  # (+ padding to whole blocks)
        if need <= len(self.scratch_ids):
            return
        while room < need:
            room *= 2
        if room > BLOCKS_KEPT_ROOM:
            # Borrowed: made for this piece and dropped after it, so of the size it needs (a power
            # of two made, zeroed and faulted in up to twice that: "<|" * 17,000, 34,000 symbols
            # in arrays of 65,536, cost 0.72 ms against 0.57 for 32,000 in the kept ones).
            room = (need + 63) & ~63
        if room <= BLOCKS_KEPT_ROOM:
            self.kept_scratch.grow(room)
            self.kept_values = _zeros(room)
            self.kept_ids = _zeros(room)
            self._give_back_room()
            return
        self.scratch = MergeScratch(room)
        self.scratch_values = _zeros(room)
        self.scratch_ids = _zeros(room)  # (last: the room _merge_text reads)

    def _give_back_room(self) -> None:
        """The kept scratch again, after a piece that borrowed more (see ``_room``)."""
        self.scratch = self.kept_scratch
        self.scratch_values = self.kept_values
        self.scratch_ids = self.kept_ids

    def piece_ids(self, piece: str) -> list[int]:
        """The ids of one piece (not cached)."""
        ids, size = self._compute(piece, 0, len(piece), 0)
        if size < 0:
            ids, size = self._long_piece(piece, 0, len(piece), vec[i64](), 0, True)
        return [ids[k] for k in range(size)]

    def merge(self, data: bytes) -> list[int]:
        """The ids of one piece's bytes after all merges (the whole-token rule not applied); one
        of more than LONG_PIECE_BYTES bytes is merged in blocks (``long_pieces``), as ``encode``
        merges it: a stream or a session fed one enormous chunk merges its growing piece here."""
        long_pieces = self.long_pieces
        if len(data) <= LONG_PIECE_BYTES or long_pieces is None:
            return self.merge_whole(data)
        ids: list[int] = []
        at: i64 = 0
        while at < len(data):
            block = long_pieces(data, at)
            if block[0] <= at:
                raise RuntimeError(f"long_pieces made no progress at byte {at} of {len(data)}")
            ids += block[1]
            at = block[0]
        return ids

    def _too_long(self, text: str, start: i64, end: i64) -> bool:
        """Whether the piece text[start:end], of more than 32K characters, surely starts as too many
        symbols for the blocks: its bytes do, and neither its first nor its middle character may
        enter whole. (80,000 Hangul jamo, 240 KB, built 131,072 symbols in borrowed arrays before
        ``_merge_text`` gave up: a quarter of the piece's time.)"""
        if 4 * (end - start) < HEAP_MIN_BYTES or self.long_pieces is None:
            return False
        if _utf8_length(text, start, end) < HEAP_MIN_BYTES:
            return False
        return not (self._may_be_whole(ord(text[start])) or self._may_be_whole(ord(text[(start + end) >> 1])))

    def _may_be_whole(self, c: i64) -> bool:
        """Whether the character ``c`` enters a merge as its token somewhere (``self.whole``)."""
        return self.whole.count > 0 and c < WHOLE_CHARS and self.whole.entries[c] >= 0

    def merge_whole(self, data: bytes) -> list[int]:
        """``merge`` in one heap, however long ``data`` is (what ``long_pieces`` merges its blocks with)."""
        if len(data) == 0:
            return []
        if len(data) < HEAP_MIN_BYTES:
            size: i64 = -1
            if not data.isascii():
                # Whole characters where they fit (the same ids: ``peek2.bpe.whole_chars``), as
                # ``encode`` merges a piece: a block of ``long_pieces`` merged its bytes one by one
                # (a run of 131,073 "é" cost 2.75x one of 131,072; of 150,000 "中", 5.3x). Only
                # where its first or middle character may enter whole: read from the text, a
                # character that never does cost more than its bytes (Hangul jamo, 2.7x).
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:  # (a block cut inside a character, by a caller)
                    text = ""
                if text and (self._may_be_whole(ord(text[0])) or self._may_be_whole(ord(text[len(text) >> 1]))):
                    size = _merge_text(self, text, 0, len(text))
            if size < 0:
                size = self._merge_short(data)
            ids = self.scratch_ids
            # (the shared int objects, as _merge_heap gives them: a block of 64 KB holds up to 64K
            # ids, which new ints made 36 bytes each, kept where the caller keeps the ids)
            shared = self.shared
            merged = [shared[ids[k]] for k in range(size)]
            if len(ids) > BLOCKS_KEPT_ROOM:
                self._give_back_room()
            return merged
        return _merge_heap(data, self)


def as_flag(value: object, name: str) -> bool:
    """A bool argument: a bool or a NumPy bool (as tokenizers takes); anything else is refused (a
    string "false" was true in some calls; a bug hunt)."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise TypeError(f"{name} must be a bool, not {type(value).__name__} ({value!r})")


class PlainEncode:
    """``Tokenizer.encode`` as a compiled callable, for the usual call: no added token in the text.

    A ``Tokenizer`` installs one as its instance's ``encode`` (see ``Tokenizer.__init__``): an
    interpreted method cost about 0.3 us a call over the engine (10% of an XNLI sentence). Text
    where an added token may occur (one of ``needles`` is in it) goes to ``fallback``, the
    interpreted ``Tokenizer.encode``, with the same arguments.
    """

    def __init__(
        self,
        engine: BytePairEncoder,
        needles: list[tuple[str, str]],
        non_ascii_fallback: bool,
        normalize: Any,
        ascii_is_normal: bool,
        prefix: list[int],
        suffix: list[int],
        fallback: Any,
        any_token: Any = None,
        prefix_space: bool = False,
    ) -> None:
        self.engine: Final = engine
        self.needles: Final = needles  # (first character, the start of an added token)
        self.non_ascii_fallback: Final = non_ascii_fallback  # added tokens matched after normalizing
        self.normalize: Final = normalize  # None: no normalizer
        self.ascii_is_normal: Final = ascii_is_normal
        self.prefix: Final = prefix
        self.suffix: Final = suffix
        self.fallback: Final = fallback
        self.any_token: Final = any_token  # None, or whether a whole added token occurs (see Tokenizer._plain)
        self.prefix_space: Final = prefix_space  # a ByteLevel's add_prefix_space (see TokenizerSpec)

    def __reduce__(self) -> tuple[object, tuple[object, str]]:
        # Pickled as the tokenizer's attribute, like a bound method (``pool.map(tok.encode, ...)``):
        # the tokenizer pickles by its source.
        return (getattr, (self.fallback.__self__, "encode"))

    def __call__(self, text: object, add_special_tokens: object = True, *, split_special_tokens: object = False) -> list[int]:
        """The ids of ``text``, exactly as ``tokenizers.Tokenizer.encode(text, add_special_tokens).ids``.

        ``Tokenizer.encode``, compiled: see that method for the arguments and exceptions.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        # (object, not bool, parameters: a compiled bool refused NumPy's, which tokenizers takes)
        if add_special_tokens is not True and add_special_tokens is not False:
            add_special_tokens = as_flag(add_special_tokens, "add_special_tokens")
        if split_special_tokens is not True and split_special_tokens is not False:
            split_special_tokens = as_flag(split_special_tokens, "split_special_tokens")
        if self.non_ascii_fallback and not text.isascii():
            return self.fallback(text, add_special_tokens, split_special_tokens=split_special_tokens)  # type: ignore[no-any-return]
        for first, needle in self.needles:
            if first in text and needle in text:
                if self.any_token is None or self.any_token(text):
                    return self.fallback(text, add_special_tokens, split_special_tokens=split_special_tokens)  # type: ignore[no-any-return]
                break  # it only starts like an added token: the plain path
        head = self.prefix if add_special_tokens is True else _NO_IDS
        out = _encode_plain(self.engine, text, self.normalize, self.ascii_is_normal, self.prefix_space, head)
        if add_special_tokens is True and self.suffix:
            out.extend(self.suffix)
        return out


class OrdinaryEncode:
    """``Tokenizer.encode_ordinary`` as a compiled callable (tiktoken's name for the call that
    matches no special token): every added token's string is text. A ``Tokenizer`` installs one
    as its instance's ``encode_ordinary``, as it does ``PlainEncode``."""

    def __init__(self, engine: BytePairEncoder, normalize: Any, ascii_is_normal: bool, prefix_space: bool, owner: Any) -> None:
        self.engine: Final = engine
        self.normalize: Final = normalize  # None: no normalizer
        self.ascii_is_normal: Final = ascii_is_normal
        self.prefix_space: Final = prefix_space
        self.owner: Final = owner  # the tokenizer (pickled by its source)

    def __reduce__(self) -> tuple[object, tuple[object, str]]:
        return (getattr, (self.owner, "encode_ordinary"))

    def __call__(self, text: object) -> list[int]:
        """The ids of ``text`` with every added-token string treated as text and nothing added around it.

        Raises TypeError if ``text`` is not a str, ValueError for a lone surrogate.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        return _encode_plain(self.engine, text, self.normalize, self.ascii_is_normal, self.prefix_space, _NO_IDS)


_NO_BUFFER: Final = vec[i64]()  # out_ids while a call has it (never written: grown first)


def _grown(ids: vec[i64], count: i64, need: i64) -> vec[i64]:
    """``ids``, or a larger copy of its first ``count`` ids, with room for ``need``."""
    if need > len(ids):
        size: i64 = 2 * len(ids)
        if size < need:
            size = need
        grown = vec[i64]([0] * size)
        for k in range(count):
            grown[k] = ids[k]
        ids = grown
    return ids


def _encode_plain(
    engine: BytePairEncoder, text: str, normalize: Any, ascii_is_normal: bool, prefix_space: bool, head: list[int]
) -> list[int]:
    """``head``, then the ids of ``text`` normalized (and given ByteLevel's prefix space) as one segment."""
    normal: str = text
    if normalize is not None and not (ascii_is_normal and text.isascii()):
        normal = normalize(text)
    if prefix_space and normal and normal[0] != " ":
        normal = " " + normal
    try:
        return engine.encode_list(normal, head)
    except ValueError as error:  # a lone surrogate, at its index in the normalized text
        raise surrogate_error(text, error) from None


BLOCK_BITS: Final = 3  # blocks of 8 pair values in _merge_blocks
TIER_FROM: Final = 32  # from this many blocks on, _merge_symbols keeps minima of minima (levels)
POSITION_BITS: Final = 18  # _merge_blocks tags values with positions below HEAP_MIN_BYTES (58 bits with a merge value's 40)
POSITION_MASK: Final = (1 << POSITION_BITS) - 1
LEVELS_MAX: Final = 8  # levels of minima above the blocks' (5 for HEAP_MIN_BYTES symbols)


def _zeros(size: i64) -> vec[i64]:
    """A vec of ``size`` zeros (0.6 ms for 64K: appended one by one in a compiled loop, 0.8 ms)."""
    return vec[i64]([0] * size)


class MergeScratch:
    """Arrays reused from piece to piece by ``_merge_blocks`` (pieces below HEAP_MIN_BYTES), for
    ``room`` symbols (``BytePairEncoder._room`` grows them). ``upper`` holds the levels of minima
    above ``block_min``, one after another from ``level_start[0] = 0``, each padded to whole
    blocks of 8."""

    def __init__(self, room: i64) -> None:
        self.level_start = vec[i64]([0] * (LEVELS_MAX + 1))
        self.following = vec[i64]()
        self.preceding = vec[i64]()
        self.block_min = vec[i64]()
        self.upper = vec[i64]()
        self.grow(room)

    def grow(self, room: i64) -> None:
        """Room for ``room`` symbols (and the padding of each level to whole blocks)."""
        self.following = _zeros(room)
        self.preceding = _zeros(room)
        self.block_min = _zeros((room >> BLOCK_BITS) + 8)
        self.upper = _zeros((room >> (2 * BLOCK_BITS - 1)) + 8 * LEVELS_MAX)  # (each level an eighth of the one below, padded)


def _merge_blocks(
    data: bytes,
    byte_ids: vec[i64],
    byte_pairs: vec[i64],
    merges: MergeTable,
    pairs: vec[i64],
    ids: vec[i64],
    values: vec[i64],
    scratch: MergeScratch,
) -> i64:
    """Merge a piece of fewer than HEAP_MIN_BYTES bytes: the lowest merge value first, leftmost on ties.

    Symbols stay at the position of their first byte, linked both ways. ``values[k]`` is
    ``merge_value << POSITION_BITS | k`` for the pair starting at position k (NO_MERGE for the last symbol
    and for dead positions): one comparison orders by rank, then leftmost, and a minimum is
    branch-free. Positions are grouped in blocks of 8 whose minimum is kept in ``block_min``:
    a merge scans the block minima (in a long piece, the top of a tree of minima of 8 above
    them) and refreshes the one to three blocks it touched, and the minima above them, instead
    of scanning and shifting the whole array. The first values come from ``byte_pairs``
    (indexed by two bytes), the others through ``pairs`` (see ``_pair_value``); ``ids`` and
    ``values`` are scratch space (``BytePairEncoder._room``). The result is ``ids[:size]``.
    """
    following = scratch.following
    preceding = scratch.preceding
    n: i64 = len(data)
    previous: i64 = data[0]
    ids[0] = byte_ids[previous]
    following[0] = 1
    preceding[0] = -1
    for k in range(1, n):
        byte: i64 = data[k]
        ids[k] = byte_ids[byte]
        values[k - 1] = _at(byte_pairs[(previous << 8) | byte], k - 1)
        following[k] = k + 1
        preceding[k] = k - 1
        previous = byte
    return _merge_symbols(n, merges, pairs, ids, values, scratch)


def _utf8_length(text: str, start: i64, end: i64) -> i64:
    """The UTF-8 bytes of text[start:end], counted in place (a long one encoded in C: the loop
    took 0.3 ms of the 1.9 of a 100,000-character piece, which counts it twice)."""
    if end - start > 512:
        return len(text[start:end].encode("utf-8", "surrogatepass"))  # (a surrogate: 3, as below)
    size: i64 = 0
    for k in range(start, end):
        c: i64 = ord(text[k])
        size += 1
        if c >= 0x80:
            size += 1
            if c >= 0x800:
                size += 1
                if c >= 0x10000:
                    size += 1
    return size


def _merge_text(engine: BytePairEncoder, text: str, start: i64, end: i64) -> i64:
    """``_merge_blocks`` of the UTF-8 bytes of text[start:end] into ``engine.scratch_ids``, the
    bytes made from the code points in place (no slice, no encode); -1 (nothing merged) if the
    piece starts as more than HEAP_MIN_BYTES - 1 symbols.

    A character that ``engine.whole`` lists enters as its token where it fits, not as its bytes:
    the same ids (``peek2.bpe.whole_chars`` says why). For Chinese, nine merges in ten are the ones
    that join a character's bytes, and they are skipped. The limit counts symbols, not bytes:
    a Thai word of 100 characters (300 bytes, one piece of o200k's pattern) starts as about 100.
    """
    if 4 * (end - start) + 8 > len(engine.scratch_ids):
        engine._room(_utf8_length(text, start, end))  # (symbols are at most its bytes)
    whole = engine.whole
    byte_ids = engine.byte_ids
    byte_pairs = engine.byte_pairs
    merges = engine.merges
    pairs = engine.pairs
    ids = engine.scratch_ids
    limit: i64 = min(len(ids) - 8, HEAP_MIN_BYTES)  # symbols below this fit
    values = engine.scratch_values
    scratch = engine.scratch
    following = scratch.following
    preceding = scratch.preceding
    entries = whole.entries
    whole_below: i64 = 0  # characters below this may enter whole (none without a WholeChars)
    if whole.count > 0:
        whole_below = WHOLE_CHARS
    n: i64 = 0  # symbols so far
    raw: i64 = -1  # the last symbol's byte, or -1 for a whole character's token
    previous: i64 = -1  # the previous code point in the piece
    for k in range(start, end):
        c: i64 = ord(text[k])
        entry: i64 = -1
        width: i64 = 1
        lead: i64 = c
        if c >= 128:  # (no conditional expressions here: mypyc would box their values)
            if c < whole_below:
                entry = entries[c]
                if entry > ID_MASK:
                    after: i64 = -1
                    if k + 1 < end:
                        after = ord(text[k + 1])
                    if not whole.fits(entry, previous, c, after):
                        entry = -1
            width = 2
            lead = 0xC0 | (c >> 6)
            if c >= 0x800:
                width = 3
                lead = 0xE0 | (c >> 12)
                if c >= 0x10000:
                    width = 4
                    lead = 0xF0 | (c >> 18)
        if n + width >= limit and (entry < 0 or n + 1 >= limit):
            return -1
        if entry >= 0:
            token = entry & ID_MASK
            ids[n] = token
            following[n] = n + 1
            preceding[n] = n - 1
            if n > 0:
                values[n - 1] = _at(_pair_value(ids[n - 1], token, merges, pairs), n - 1)
            n += 1
            raw = -1
        else:
            shift: i64 = 6 * width - 6
            byte: i64 = lead
            for q in range(width):
                if q > 0:
                    shift -= 6
                    byte = 0x80 | ((c >> shift) & 63)
                ids[n] = byte_ids[byte]
                following[n] = n + 1
                preceding[n] = n - 1
                if n > 0:
                    if raw >= 0:
                        values[n - 1] = _at(byte_pairs[(raw << 8) | byte], n - 1)
                    else:
                        values[n - 1] = _at(_pair_value(ids[n - 1], ids[n], merges, pairs), n - 1)
                raw = byte
                n += 1
        previous = c
    return _merge_symbols(n, merges, pairs, ids, values, scratch)


def _merge_symbols(n: i64, merges: MergeTable, pairs: vec[i64], ids: vec[i64], values: vec[i64], scratch: MergeScratch) -> i64:
    """The merge loop of ``_merge_blocks`` over ``n`` symbols set up in ``ids``, ``values``
    (``values[:n - 1]``), ``following`` and ``preceding``; the result is ``ids[:size]``."""
    following = scratch.following
    preceding = scratch.preceding
    block_min = scratch.block_min
    upper = scratch.upper
    level_start = scratch.level_start
    blocks: i64 = (n + 7) >> BLOCK_BITS
    for k in range(n - 1, blocks << BLOCK_BITS):
        values[k] = NO_MERGE  # the last symbol, and padding to whole blocks
    for b in range(blocks):
        _refresh_block(values, block_min, b)
    # A long piece's merges scan the top of a tree of minima (each the minimum of 8 below it:
    # blocks, then levels in ``upper``, up to at most 8) instead of every block's minimum: that
    # scan is a chain of dependent ``min``, n / 8 of them a merge (see the performance notes).
    levels: i64 = 0
    top: i64 = 0  # where the top level starts in upper
    count: i64 = blocks  # the top level's minima
    if blocks >= TIER_FROM:
        for b in range(blocks, ((blocks + 7) >> BLOCK_BITS) << BLOCK_BITS):
            block_min[b] = NO_MERGE
        count = (blocks + 7) >> BLOCK_BITS
        for t in range(count):
            _refresh_block(block_min, upper, t)
        levels = 1
        while count > 8:
            padded = ((count + 7) >> BLOCK_BITS) << BLOCK_BITS
            for t in range(top + count, top + padded):
                upper[t] = NO_MERGE
            below = top
            top += padded
            level_start[levels] = top
            count = padded >> BLOCK_BITS
            for t in range(count):
                _refresh_level(upper, below + (t << BLOCK_BITS), top + t)
            levels += 1
    while True:
        best: i64 = NO_MERGE
        if levels:
            for t in range(top, top + count):
                best = min(best, upper[t])
        else:
            for b in range(blocks):
                best = min(best, block_min[b])
        if best >= NO_MERGE:
            break
        at = best & POSITION_MASK
        gone = following[at]  # the right symbol, absorbed into ids[at]
        ids[at] = (best >> POSITION_BITS) & ID_MASK
        values[gone] = NO_MERGE
        after = following[gone]
        following[at] = after
        if after < n:
            preceding[after] = at
            values[at] = _at(_pair_value(ids[at], ids[after], merges, pairs), at)
        else:
            values[at] = NO_MERGE
        best_block = at >> BLOCK_BITS
        before = preceding[at]
        before_block: i64 = best_block
        if before >= 0:
            held = values[before]
            value = _at(_pair_value(ids[before], ids[at], merges, pairs), before)
            values[before] = value
            before_block = before >> BLOCK_BITS
            if before_block != best_block:  # else refreshed below
                if value < block_min[before_block]:
                    block_min[before_block] = value
                elif held == block_min[before_block]:
                    _refresh_block(values, block_min, before_block)
        _refresh_block(values, block_min, best_block)
        gone_block = gone >> BLOCK_BITS
        if gone_block != best_block and (block_min[gone_block] & POSITION_MASK) == gone:
            _refresh_block(values, block_min, gone_block)
        if levels:
            # The blocks changed are best_block and its neighbours' (before and gone are the
            # symbols next to ``at``): the minima above each, as far up as one changes.
            _climb(block_min, upper, level_start, levels, best_block)
            if before_block != best_block:
                _climb(block_min, upper, level_start, levels, before_block)
            if gone_block != best_block:
                _climb(block_min, upper, level_start, levels, gone_block)
    size: i64 = 0
    symbol: i64 = 0
    while symbol < n:
        ids[size] = ids[symbol]
        size += 1
        symbol = following[symbol]
    return size


def _climb(block_min: vec[i64], upper: vec[i64], level_start: vec[i64], levels: i64, block: i64) -> None:
    """Recompute the minima above ``block`` in ``upper``, level by level, until one is unchanged
    (the levels above it are then unchanged too)."""
    index = block >> BLOCK_BITS
    s = index << BLOCK_BITS
    low = min(min(block_min[s], block_min[s + 1]), min(block_min[s + 2], block_min[s + 3]))
    high = min(min(block_min[s + 4], block_min[s + 5]), min(block_min[s + 6], block_min[s + 7]))
    value = min(low, high)
    if upper[index] == value:
        return
    upper[index] = value
    for level in range(1, levels):
        parent = index >> BLOCK_BITS
        slot = level_start[level] + parent
        if not _refresh_level(upper, level_start[level - 1] + (parent << BLOCK_BITS), slot):
            return
        index = parent


def _refresh_level(upper: vec[i64], first: i64, slot: i64) -> bool:
    """``upper[slot]`` = the smallest of the 8 values from ``upper[first]``; whether it changed."""
    low = min(min(upper[first], upper[first + 1]), min(upper[first + 2], upper[first + 3]))
    high = min(min(upper[first + 4], upper[first + 5]), min(upper[first + 6], upper[first + 7]))
    value = min(low, high)
    if upper[slot] == value:
        return False
    upper[slot] = value
    return True


def _at(value: i64, position: i64) -> i64:
    """A merge value tagged with its position for ``_merge_blocks``; NO_MERGE becomes NO_MERGE | position.

    Branch-free (``min`` is a conditional move): whether a pair merges is data, and a branch
    on it was mispredicted often. Every tagged NO_MERGE is at least NO_MERGE.
    """
    return (min(value, NO_MERGE >> POSITION_BITS) << POSITION_BITS) | position


def _refresh_block(values: vec[i64], block_min: vec[i64], block: i64) -> None:
    """Recompute the smallest tagged value in ``block`` (padded: always 8 values).

    Written out, not a loop: a fixed tree of eight ``min`` has no branch to mispredict.
    """
    s = block << BLOCK_BITS
    low = min(min(values[s], values[s + 1]), min(values[s + 2], values[s + 3]))
    high = min(min(values[s + 4], values[s + 5]), min(values[s + 6], values[s + 7]))
    block_min[block] = min(low, high)


def _pair_value(left: i64, right: i64, merges: MergeTable, pairs: vec[i64]) -> i64:
    """The merge value of (left, right): NO_MERGE if ``merges.filter`` lacks one of the pair's two
    bits, else through ``pairs``, a direct-mapped cache of recent answers, then the merge table.

    ``pairs[2s]`` holds key + 1 (0 = empty) and ``pairs[2s + 1]`` the value, NO_MERGE included:
    a miss costs one more access than the merge table alone; a hit saves a random access into
    the merge table (see the performance notes).
    """
    key: i64 = left * PAIR_STRIDE + right + 1
    mixed = (key & 0x1FFFFF) * 0x9E3779B1 + (key >> 21) * 0x7FEB352D  # _filter_hash, written out
    mixed = (mixed ^ (mixed >> 29)) & 0xFFFFFFFF
    h = mixed * 0x4F1BBCDD
    word = merges.filter[(h >> 32) & merges.filter_mask]
    if ((word >> ((h >> 20) & 63)) & (word >> ((h >> 26) & 63)) & 1) == 0:
        return NO_MERGE  # the filter has no such pair
    at: i64 = 2 * (((key * 2_097_143) >> 13) & PAIR_CACHE_MASK)  # below 2**21: no overflow
    if pairs[at] == key:
        return pairs[at + 1]
    table = merges.table
    mask = merges.mask
    slot = ((key * 1_000_003) >> 11) & mask
    found = table[2 * slot]
    while found != key and found != 0:
        slot = (slot + 1) & mask
        found = table[2 * slot]
    value: i64 = NO_MERGE
    if found != 0:
        value = table[2 * slot + 1]
    pairs[at] = key
    pairs[at + 1] = value
    return value


HEAP_SCRATCH_MAX: Final = 1 << 14
"""The longest piece (bytes) whose heap merge uses the arrays kept in ``HeapScratch`` (0.75 MB at
most; kept up to LONG_PIECE_BYTES, 6 MB, they broke a memory bound of the prompt sessions'
tests: making the arrays weighs less against merging a longer piece)."""


class HeapScratch:
    """Arrays reused from piece to piece by ``_merge_heap``, grown to the longest piece merged so
    far, up to HEAP_SCRATCH_MAX bytes (a longer piece gets arrays of its own). Made for each piece
    (a list of zeros made a vec), they cost as much as merging a piece of 4,000 bytes where nothing
    merges, and tiktoken was faster on such pieces (a bug hunt). ``busy`` while a merge uses them:
    making its list of ids may run a garbage collector's finalizer, which may encode with this
    engine or let another thread do so (see ``BytePairEncoder._run``); that one gets its own."""

    def __init__(self) -> None:
        self.size: i64 = 0
        self.busy = False
        self.ids = vec[i64]()
        self.following = vec[i64]()
        self.preceding = vec[i64]()
        self.heap = vec[i64]()

    def taken(self, size: i64) -> HeapScratch:
        """Arrays for a piece of ``size`` bytes, marked busy: these, grown if needed, or new ones."""
        scratch = self if size <= HEAP_SCRATCH_MAX and not self.busy else HeapScratch()
        if size > scratch.size:
            size = max(size, min(2 * scratch.size, HEAP_SCRATCH_MAX))
            scratch.ids = vec[i64]([0] * size)
            scratch.following = vec[i64]([0] * size)
            scratch.preceding = vec[i64]([0] * size)
            scratch.heap = vec[i64]([0] * (3 * size))  # n - 1 initial entries, at most 2 more per merge
            scratch.size = size  # (last: arrays that failed to grow, MemoryError, are not taken as grown)
        scratch.busy = True
        return scratch


def _merge_heap(data: bytes, engine: BytePairEncoder) -> list[int]:
    """Merge with a heap of candidate pairs over a linked list of symbols: n log n for long pieces.

    The ids are the engine's ``shared`` int objects (``shared_ints``): a block of a long piece of
    "ab" holds 30K ids, which new ints made 40 bytes each instead of a list slot's 8.

    Heap entries are ``rank << 32 | position`` (position of the pair's left symbol), so the
    smallest is the lowest rank, leftmost: the same order as ``_merge_blocks``. An entry whose
    pair changed since it was pushed is skipped when popped. Pairs are looked up as the blocks
    look them up: the first in ``byte_pairs``, the others through ``_pair_value`` (see the
    performance notes).
    """
    byte_ids = engine.byte_ids
    byte_pairs = engine.byte_pairs
    merges = engine.merges
    pairs = engine.pairs
    size: i64 = len(data)
    scratch = engine.heap_scratch.taken(size)
    ids = scratch.ids
    following = scratch.following
    preceding = scratch.preceding
    heap = scratch.heap
    for k in range(size):
        ids[k] = byte_ids[data[k]]
        following[k] = k + 1
        preceding[k] = k - 1
    following[size - 1] = -1
    count: i64 = 0
    for k in range(size - 1):
        value = byte_pairs[(data[k] << 8) | data[k + 1]]
        if value != NO_MERGE:
            count = _heap_push(heap, count, ((value >> ID_BITS) << 32) | k)
    while count > 0:
        entry = heap[0]
        count = _heap_pop(heap, count)
        rank = entry >> 32
        at = entry & POS_MASK
        nxt = following[at]
        if ids[at] < 0 or nxt < 0:
            continue
        value = _pair_value(ids[at], ids[nxt], merges, pairs)
        if value == NO_MERGE or (value >> ID_BITS) != rank:
            continue  # stale: a neighbour merged since this pair was pushed
        ids[at] = value & ID_MASK
        ids[nxt] = -1  # dead
        after = following[nxt]
        following[at] = after
        if after >= 0:
            preceding[after] = at
            value = _pair_value(ids[at], ids[after], merges, pairs)
            if value != NO_MERGE:
                count = _heap_push(heap, count, ((value >> ID_BITS) << 32) | at)
        before = preceding[at]
        if before >= 0:
            value = _pair_value(ids[before], ids[at], merges, pairs)
            if value != NO_MERGE:
                count = _heap_push(heap, count, ((value >> ID_BITS) << 32) | before)
    shared = engine.shared
    try:
        return [shared[ids[k]] for k in range(size) if ids[k] >= 0]
    finally:
        scratch.busy = False


def _heap_push(heap: vec[i64], count: i64, item: i64) -> i64:
    """Add item to the min-heap of ``count`` entries in ``heap``; returns the new count."""
    _sift_up(heap, count, item)
    return count + 1


def _sift_up(heap: vec[i64], at: i64, item: i64) -> None:
    """Put ``item`` in the hole at ``at``, or above it where it belongs."""
    while at > 0:
        parent = (at - 1) >> 1
        if heap[parent] <= item:
            break
        heap[at] = heap[parent]
        at = parent
    heap[at] = item


def _heap_pop(heap: vec[i64], count: i64) -> i64:
    """Remove the smallest entry (heap[0]); returns the new count.

    Bottom-up: the hole at the root goes down to a leaf by the smaller child (one comparison a
    level), and the last entry, which belongs near the leaves, rises from there. The usual
    sift-down compared twice a level and was 65% of a one-piece encode of 4,000 spaces."""
    count -= 1
    last = heap[count]
    at: i64 = 0
    child: i64 = 1
    while child + 1 < count:
        if heap[child + 1] < heap[child]:
            child += 1
        heap[at] = heap[child]
        at = child
        child = 2 * at + 1
    if child < count:  # (a last lone child)
        heap[at] = heap[child]
        at = child
    _sift_up(heap, at, last)
    return count
