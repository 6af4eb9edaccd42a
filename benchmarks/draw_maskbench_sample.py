"""Draw the fixed sample of MaskBench schemas that the test suite runs
(tests/data/maskbench_sample/): the same files on every run.

    python benchmarks/draw_maskbench_sample.py [--corpus PATH] [--size 200]

Stratified over the subsets: each gets a share of --size proportional to its
number of schemas (at least MIN_PER_SUBSET; largest remainders round). Within a
subset, schemas with tests come first, then those of at most PREFERRED_BYTES,
then by the CRC-32 of the file name. The files are copied verbatim; the folder's
README.md says where they come from.
"""

import argparse
import json
import zlib
from collections import defaultdict
from pathlib import Path

from bench_maskbench import DEFAULT_CORPUS, read_corpus, subset_of
from common import ROOT, log

SAMPLE = ROOT / "tests" / "data" / "maskbench_sample"
MIN_PER_SUBSET = 2
PREFERRED_BYTES = 32 * 1024  # keeps the test suite fast and the repository small

README = """# A sample of MaskBench schemas

{count} files copied verbatim from maskbench-dev, about half of MaskBench: the
JSONSchemaBench repository (guidance-ai/jsonschemabench, folder maskbench/data),
MIT licensed per its dataset card. Each file is one JSON object
`{{"description", "meta", "schema", "tests": [{{"description", "valid", "data"}}]}}`.

Drawn by `python benchmarks/draw_maskbench_sample.py --size {size}` from
`{corpus}`: stratified over the subsets (the file name's prefix), each getting a
share proportional to its number of schemas (at least {minimum}); within a subset,
schemas with tests first, then those of at most {preferred} KiB, then by the
CRC-32 of the file name.

| subset | schemas in the corpus | in the sample |
|---|---|---|
{rows}
"""


def shares(sizes: dict, total: int, minimum: int) -> dict:
    """``total`` split over the keys of ``sizes`` in proportion to their values,
    each getting at least ``minimum`` (or all it has), largest remainders first."""
    share = {k: min(n, minimum) for k, n in sizes.items()}
    rest = total - sum(share.values())
    exact = {k: rest * n / sum(sizes.values()) for k, n in sizes.items()}
    for k in sizes:
        share[k] = min(sizes[k], share[k] + int(exact[k]))
    for k in sorted(sizes, key=lambda k: int(exact[k]) - exact[k]):
        if sum(share.values()) >= total:
            break
        if share[k] < sizes[k]:
            share[k] += 1
    return share


def draw(corpus, size) -> dict:
    """subset -> the (name, contents) drawn from it."""
    by_subset = defaultdict(list)
    for name, data in corpus:
        by_subset[subset_of(name)].append((name, data))
    share = shares({s: len(v) for s, v in by_subset.items()}, size, MIN_PER_SUBSET)

    def preference(entry):
        name, data = entry
        return not json.loads(data).get("tests"), len(data) > PREFERRED_BYTES, zlib.crc32(name.encode())

    return {s: sorted(entries, key=preference)[:share[s]] for s, entries in sorted(by_subset.items())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--size", type=int, default=200)
    args = parser.parse_args()

    corpus = read_corpus(args.corpus)
    drawn = draw(corpus, args.size)
    for old in SAMPLE.glob("*.json"):
        old.unlink()
    SAMPLE.mkdir(parents=True, exist_ok=True)
    for entries in drawn.values():
        for name, data in entries:
            (SAMPLE / name).write_bytes(data)
    counts = defaultdict(int)
    for name, _ in corpus:
        counts[subset_of(name)] += 1
    (SAMPLE / "README.md").write_text(README.format(
        count=sum(map(len, drawn.values())), size=args.size, corpus=args.corpus.name, minimum=MIN_PER_SUBSET,
        preferred=PREFERRED_BYTES // 1024,
        rows="\n".join(f"| {s} | {counts[s]} | {len(v)} |" for s, v in drawn.items())))
    log(f"wrote {sum(map(len, drawn.values()))} files to {SAMPLE}")


if __name__ == "__main__":
    main()
