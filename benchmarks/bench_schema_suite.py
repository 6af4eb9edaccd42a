"""The JSON Schema Test Suite (issue 4): our engine next to llguidance on draft
2020-12, core and optional/format.

    python benchmarks/bench_schema_suite.py [--suite PATH] [--engines ours llguidance] [--no-write]

The suite folder holds tests/draft2020-12/ (default: ../shared/corpora/
json-schema-test-suite when present, else the copy in the jsonschema sdist,
fetched into the cache directory by tests/schema_suite.py). Each group's schema
is compiled; each of its instances, serialized with json.dumps defaults, is fed
token by token on the Llama 3 vocabulary with the full mask before each step, as
in bench_maskbench.py. Per file: groups passed (compiled, every instance right),
compile errors (the schema refused), false positives (invalid instances
accepted) and false negatives (valid instances rejected by a compiled schema).
Our engine gets the suite's remotes/ folder (the documents its tests serve at
http://localhost:1234/) as json_schema's ``documents``; llguidance cannot take
other documents.
Prints markdown tables; writes benchmarks/results/schema_suite.json and the
section "## JSON Schema: Test Suite (issue 4)" of benchmarks/RESULTS.md.
"""

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

from common import ROOT, log, machine, table, versions, write_results
from schema_engines import ENGINE_NAMES, VOCAB, check, start_worker, tokenize, unavailable
from tests.schema_suite import PARTS, SDIST, groups, remote_documents, suite_root  # noqa: E402  (ROOT is on sys.path)

import constrained  # noqa: E402
from constrained import models  # noqa: E402

HEADING = "## JSON Schema: Test Suite (issue 4)"
SHARED_SUITE = ROOT.parent / "shared" / "corpora" / "json-schema-test-suite"
PACKAGES = ("llguidance",)
COUNTS = ("groups", "passed", "refused", "timeout or crash", "false negatives", "false positives")
LISTED_FALSE_NEGATIVES = 40  # per engine and part (every false positive is listed)


def bench_part(workers, part_groups, remotes, tok, vocab, args) -> dict:
    """engine -> {"files": file -> counts, "total": counts, "false_positives": [...],
    "false_negatives": [...], "refusals": [...]} for one part of the suite."""
    out = {}
    for engine, worker in workers.items():
        files = defaultdict(lambda: dict.fromkeys(COUNTS, 0))
        wrong = {"false_positives": [], "false_negatives": [], "refusals": [], "untokenizable": []}
        for file, group in part_groups:
            counts = files[file]
            counts["groups"] += 1
            texts = [json.dumps(test["data"]) for test in group["tests"]]
            sequences = tokenize(tok, vocab, texts)
            result = check(worker, group["schema"], sequences, args.compile_timeout, args.run_timeout,
                           documents=remotes if engine == "ours" else None)
            where = {"file": file, "group": group["description"]}
            if result["status"] == "refused":
                counts["refused"] += 1
                wrong["refusals"].append(where | {"error": result["error"]})
                continue
            if result["status"] != "compiled":
                counts["timeout or crash"] += 1
                wrong["refusals"].append(where | {"error": f"{result['status']}: {result['error']}"})
                continue
            passed = True
            for test, text, run in zip(group["tests"], texts, result["runs"]):
                if run is None:  # the tokenizer cannot spell it: not checked
                    wrong["untokenizable"].append(where | {"test": test["description"], "text": text[:200]})
                elif run["accepted"] != test["valid"]:
                    passed = False
                    kind = "false_negatives" if test["valid"] else "false_positives"
                    counts[kind.replace("_", " ")] += 1
                    wrong[kind].append(where | {"test": test["description"], "text": text[:200]})
            counts["passed"] += passed
        total = {key: sum(c[key] for c in files.values()) for key in COUNTS}
        out[engine] = {"files": dict(files), "total": total, **wrong}
    return out


def markdown(results, engines, command) -> str:
    m, v = results["machine"], results["versions"]
    lines = [
        f"Run on {m['date']}: `{command}`.",
        f"Suite: `{results['suite']}`. Machine: {m['cpu']}, {m['cores']} cores. "
        "Versions: " + ", ".join(f"{k} {x}" for k, x in v.items() if x) + ".",
        "",
        "Each group's schema is compiled; each instance (`json.dumps` defaults, Llama 3 tokens) is fed token by "
        "token with the full mask before each step and must end accepting when valid, be refused (or end "
        "non-accepting) when invalid. A group passes when it compiles and every instance comes out right; false "
        "negatives count only in compiled groups. Ours gets the suite's `remotes/` as `documents`; llguidance "
        "runs with its default JSON options.",
    ]
    for part, by_engine in results["parts"].items():
        lines += ["", f"### {part} ({'tests/draft2020-12/' + PARTS[part]})", "",
                  table(["engine", *COUNTS], [[e, *by_engine[e]["total"].values()] for e in engines]),
                  "", "Per file: passed / refused / false negatives / false positives.", "",
                  table(["file", "groups", *engines],
                        [[file, counts["groups"], *(cells(by_engine[e]["files"][file]) for e in engines)]
                         for file, counts in by_engine[engines[0]]["files"].items()])]
        for e in engines:
            if by_engine[e]["untokenizable"]:
                lines += ["", f"{e}, instances not checked (the tokenizer cannot spell them): "
                          + "; ".join(f"{x['file']} / {x['group']} / {x['test']}"
                                      for x in by_engine[e]["untokenizable"]) + "."]
            fps = by_engine[e]["false_positives"]
            fns = by_engine[e]["false_negatives"]
            if fps:
                lines += ["", f"{e}, false positives (invalid instances accepted): "
                          + "; ".join(f"{x['file']} / {x['group']} / {x['test']}: `{x['text']}`" for x in fps) + "."]
            if fns:
                lines += ["", f"{e}, false negatives: "
                          + "; ".join(f"{x['file']} / {x['group']} / {x['test']}"
                                      for x in fns[:LISTED_FALSE_NEGATIVES])
                          + (f"; and {len(fns) - LISTED_FALSE_NEGATIVES} more" if len(fns) > LISTED_FALSE_NEGATIVES
                             else "") + "."]
    return "\n".join(lines)


def cells(counts) -> str:
    return " / ".join(str(counts[k]) for k in ("passed", "refused", "false negatives", "false positives"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, help="a folder holding tests/draft2020-12 (default: the shared "
                        f"corpus when present, else the copy in the {SDIST} sdist)")
    parser.add_argument("--engines", nargs="+", choices=ENGINE_NAMES, default=list(ENGINE_NAMES))
    parser.add_argument("--compile-timeout", type=float, default=30.0, help="s for a compile + first mask")
    parser.add_argument("--run-timeout", type=float, default=120.0, help="s for all instances of one group")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "schema_suite.json")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    suite = args.suite or (SHARED_SUITE if SHARED_SUITE.is_dir() else suite_root())
    engines = [name for name in args.engines if not unavailable(name)]
    for name in set(args.engines) - set(engines):
        log(f"{name} n/a: {unavailable(name)}")
    if not engines:
        parser.error("no engine can run")
    tok = models.tokenizer(VOCAB)
    vocab = constrained.vocabulary(tok)
    workers = {name: start_worker(name) for name in engines}
    try:
        parts = {}
        for part in PARTS:
            part_groups = groups(suite, part)
            log(f"{part}: {len(part_groups)} groups")
            parts[part] = bench_part(workers, part_groups, remote_documents(suite), tok, vocab, args)
    finally:
        for worker in workers.values():
            worker.close()

    results = {"machine": machine(), "versions": versions(PACKAGES), "suite": os.path.relpath(suite, ROOT),
               "parts": parts}
    text = markdown(results, engines, " ".join(["python benchmarks/bench_schema_suite.py", *sys.argv[1:]]))
    print(text)
    if not args.no_write:
        write_results(args.out, results, HEADING, text)


if __name__ == "__main__":
    main()
