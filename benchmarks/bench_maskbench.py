"""JSON Schema on MaskBench (issue 4): our engine next to llguidance on the same
schemas, the same instances and the same tokens (Llama 3 vocabulary).

    python benchmarks/bench_maskbench.py [--corpus PATH] [--subset Github_easy ...] [--limit N]
        [--engines ours ours-any-order llguidance] [--jobs 2] [--compile-timeout 30] [--no-write]

The corpus is a tarball (read in place) or a folder of MaskBench files, each
{"schema": ..., "tests": [{"data": ..., "valid": ...}, ...]}; its subset is the
file name's prefix (before "---", else before the first "_": BFCL_..., JME_...).
For each schema and engine: compile, then follow each test instance (serialized
with json.dumps defaults, tokenized exactly) token by token, computing the full
mask before each step. A valid instance must be allowed at every step and end
in an accepting state; an invalid one must be refused at some step or end in a
non-accepting state. A schema is passing (it compiled and every instance came
out right), compile error, timeout, crashed, valid rejected or invalid accepted
(the worse of the two when both happen).

Reports per subset and overall: counts, the mask + advance time per token and
the time to first mask (compile + first mask). Prints markdown tables; a full
run (no --subset, no --limit) writes benchmarks/results/maskbench.json and the
section "## JSON Schema: MaskBench (issue 4)" of benchmarks/RESULTS.md; a run with
--limit N alone (the same N schemas every time, drawn across all subsets) writes
maskbench_drawN.json and a section of its own.
"""

import argparse
import json
import os
import sys
import tarfile
import threading
import time
import zlib
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from compile_errors import error_keyword
from common import ROOT, forget_stored_tables, log, machine, summary_us, table, us, versions, write_results
from schema_engines import ENGINE_CHOICES, ENGINE_NAMES, VOCAB, check, start_worker, tokenize, unavailable

import constrained  # noqa: E402  (common puts the repository on sys.path)
from constrained import models  # noqa: E402

HEADING = "## JSON Schema: MaskBench (issue 4)"
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "maskbench-dev.tar.xz"
PACKAGES = ("numpy", "mlx", "mlx-lm", "tokenizers", "llguidance")
STATUSES = ("passing", "compile error", "timeout", "crashed", "valid rejected", "invalid accepted")
LISTED_REJECTIONS = 30  # valid instances rejected shown per engine (every invalid one accepted is shown)
SLOWEST_STEPS = 10  # the slowest steps listed per engine, with where they were
SLOW_STEP_US = 10_000  # steps over this many µs are counted (issue 4's target for the slowest one)

TARGETS = {  # issue 4, ours on maskbench-dev
    "schemas passing": (">=", 0.88, "%"),
    "invalid instances accepted": ("<=", 0, ""),
    "valid instances rejected": ("<=", 20, ""),
    "mask + advance mean": ("<=", 25, "µs"),
    "mask + advance p99": ("<=", 300, "µs"),
    "mask + advance max": ("<=", 10_000, "µs"),
    "time to first mask p50": ("<=", 20, "ms"),
    "time to first mask p99": ("<=", 1000, "ms"),
    "timeouts (compiles over 30 s)": ("<=", 0, ""),
}


# ---------------------------------------------------------------- the corpus


def read_corpus(path: Path) -> list[tuple[str, bytes]]:
    """(file name, contents) for each .json file of a tarball or folder, by name."""
    if path.is_dir():
        entries = [(p.name, p.read_bytes()) for p in path.rglob("*.json")]
    else:
        with tarfile.open(path) as archive:
            entries = [(Path(m.name).name, archive.extractfile(m).read())
                       for m in archive if m.isfile() and m.name.endswith(".json")]
    return sorted(entries, key=lambda e: e[0])


def subset_of(name: str) -> str:
    return name.split("---")[0] if "---" in name else name.split("_")[0]


def select(entries, subsets, limit):
    """The entries of ``subsets`` (all when empty); with ``limit``, that many of
    them, the same on every run (the lowest CRC-32s of their names)."""
    chosen = [e for e in entries if not subsets or subset_of(e[0]) in subsets]
    if limit is not None:
        chosen = sorted(sorted(chosen, key=lambda e: zlib.crc32(e[0].encode()))[:limit], key=lambda e: e[0])
    return chosen


# ---------------------------------------------------------------- running


class Workers:
    """One worker per engine for each thread of the pool, started on first use."""

    def __init__(self, engines):
        self.engines = engines
        self.local = threading.local()
        self.started = []
        self.lock = threading.Lock()

    def get(self) -> dict:
        if not hasattr(self.local, "workers"):
            self.local.workers = {name: start_worker(name) for name in self.engines}
            with self.lock:
                self.started += self.local.workers.values()
        return self.local.workers

    def close(self):
        for worker in self.started:
            worker.close()


def instances(doc, tok, vocab) -> list[dict]:
    """The schema's tests with their "text" (json.dumps defaults) and "tokens"
    (None when the tokenizer cannot spell the text exactly)."""
    tests = doc.get("tests") or []
    texts = [json.dumps(t["data"]) for t in tests]
    return [{"valid": t["valid"], "text": text, "tokens": tokens}
            for t, text, tokens in zip(tests, texts, tokenize(tok, vocab, texts))]


def bench_schema(workers, schema, tests, vocab, args) -> dict:
    """engine -> the schema's record: "status", "error" (compile error, timeout,
    crashed), "ttfm_s", "times" (ns per step), "valid" / "invalid" (instances),
    "rejected" (valid instances refused), "accepted" (invalid instances let
    through), "untokenizable" (instances the tokenizer cannot spell exactly)
    and "slowest" (the schema's SLOWEST_STEPS slowest steps: ns, test, step)."""
    records = {}
    for name, worker in workers.get().items():
        result = check(worker, schema, [t["tokens"] for t in tests], args.compile_timeout, args.run_timeout)
        record = {"status": result["status"], "valid": 0, "invalid": 0, "rejected": [], "accepted": [],
                  "untokenizable": 0, "times": [], "slowest": []}
        for key in ("error", "ttfm_s"):
            if key in result:
                record[key] = result[key]
        for i, (test, run) in enumerate(zip(tests, result.get("runs", ()))):
            if run is None:
                record["untokenizable"] += 1
                continue
            record["times"] += run["times"]
            record["slowest"] += [(ns, i, step) for step, ns in enumerate(run["times"])]
            record["slowest"] = sorted(record["slowest"], reverse=True)[:SLOWEST_STEPS]
            record["valid" if test["valid"] else "invalid"] += 1
            if test["valid"] and not run["accepted"]:
                record["rejected"].append(where(i, test, run, vocab))
            elif not test["valid"] and run["accepted"]:
                record["accepted"].append({"test": i, "text": test["text"][:200]})
        record["status"] = classify(record)
        records[name] = record
    return records


def where(i, test, run, vocab) -> dict:
    """Where a valid instance was refused: the text before the refused token, and that token."""
    if "refused_at" not in run:
        return {"test": i, "at": "end (not accepting)", "context": test["text"][-60:]}
    step = run["refused_at"]
    return {"test": i, "at": f"token {step}", "context": fed_at(test["tokens"], step, vocab, 60)}


def fed_at(tokens, step, vocab, width) -> str:
    """The last ``width`` characters of the text before token ``step``, then that token in ⟨⟩."""
    before = b"".join(vocab.tokens[t] for t in tokens[:step]).decode(errors="replace")
    return f"{before[-width:]}⟨{vocab.tokens[tokens[step]].decode(errors='replace')}⟩"


def classify(record) -> str:
    if record["status"] == "refused":
        return "compile error"
    if record["status"] != "compiled":
        return record["status"]
    if record["accepted"]:
        return "invalid accepted"
    if record["rejected"]:
        return "valid rejected"
    return "passing"


def run(entries, tests, vocab, engines, args) -> dict:
    """name -> engine -> record, running ``args.jobs`` schemas at a time
    (``tests``: name -> the schema's instances)."""
    workers = Workers(engines)
    records = {}
    tally = {name: Counter() for name in engines}
    lock = threading.Lock()
    started = time.perf_counter()

    def one(entry):
        name, doc = entry
        result = bench_schema(workers, doc["schema"], tests[name], vocab, args)
        with lock:
            records[name] = result
            for engine, record in result.items():
                tally[engine][record["status"]] += 1
            done = len(records)
            if done % args.progress == 0 or done == len(entries):
                counts = "; ".join(f"{e}: " + ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s])
                                   for e, c in tally.items())
                log(f"{done}/{len(entries)} schemas ({time.perf_counter() - started:.0f} s): {counts}")

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(one, entries))
    finally:
        workers.close()
    return records


# ---------------------------------------------------------------- summaries


def summarize(records) -> dict:
    """Counts and timings over a list of one engine's records."""
    times = np.fromiter((t for r in records for t in r["times"]), dtype=np.int64)
    ttfm = np.array([r["ttfm_s"] for r in records if "ttfm_s" in r]) * 1e9
    statuses = Counter(r["status"] for r in records)
    return {
        "schemas": len(records),
        **{status: statuses[status] for status in STATUSES},
        "valid_instances": sum(r["valid"] for r in records),
        "valid_instances_rejected": sum(len(r["rejected"]) for r in records),
        "invalid_instances": sum(r["invalid"] for r in records),
        "invalid_instances_accepted": sum(len(r["accepted"]) for r in records),
        "untokenizable_instances": sum(r["untokenizable"] for r in records),
        "mask_advance_us": summary_us(times),
        "slow_steps": int((times > SLOW_STEP_US * 1000).sum()),
        "ttfm_ms": {k: (v / 1e3 if k != "n" and v is not None else v) for k, v in summary_us(ttfm).items()},
    }


def slowest_steps(mine, tests, vocab) -> list[dict]:
    """The SLOWEST_STEPS slowest steps of one engine's records (name -> record):
    where each was, as the text before the token fed and that token."""
    steps = sorted(((ns, name, i, step) for name, r in mine.items() for ns, i, step in r["slowest"]), reverse=True)
    found = []
    for ns, name, i, step in steps[:SLOWEST_STEPS]:
        found.append({"us": ns / 1e3, "schema": name, "test": i, "step": step,
                      "context": fed_at(tests[name][i]["tokens"], step, vocab, 40)})
    return found


def results_of(records, engines, entries, tests, vocab) -> dict:
    by_subset = defaultdict(list)
    for name, _ in entries:
        by_subset[subset_of(name)].append(name)
    out = {}
    for engine in engines:
        mine = {name: records[name][engine] for name, _ in entries}
        errors = defaultdict(list)
        for name, r in mine.items():
            if r["status"] == "compile error":
                errors[error_keyword(r["error"])].append(name)
        out[engine] = {
            "overall": summarize(list(mine.values())),
            "subsets": {s: summarize([mine[n] for n in names]) for s, names in sorted(by_subset.items())},
            "compile_errors": [{"keyword": k, "schemas": len(v), "example": f"{v[0]}: {mine[v[0]]['error']}"}
                               for k, v in sorted(errors.items(), key=lambda kv: -len(kv[1]))],
            "failures": {name: {k: r[k] for k in ("status", "error", "rejected", "accepted") if r.get(k)}
                         for name, r in mine.items() if r["status"] != "passing"},
            "slowest_steps": slowest_steps(mine, tests, vocab),
        }
    if "ours" in engines and "llguidance" in engines:
        a, b = "ours", "llguidance"
        pairs = Counter((records[n][a]["status"] == "passing", records[n][b]["status"] == "passing") for n, _ in entries)
        out["side_by_side"] = {"both": pairs[True, True], f"{a} only": pairs[True, False],
                               f"{b} only": pairs[False, True], "neither": pairs[False, False]}
    return out


# ---------------------------------------------------------------- markdown


def pct(part, whole):
    return f"{part} ({100 * part / whole:.1f} %)" if whole else "0"


COLUMNS = ["schemas", "passing", "compile error", "timeout", "crashed", "valid rejected", "invalid accepted",
           "valid inst. rejected", "invalid inst. accepted", "µs mean", "p50", "p90", "p99", "max",
           "ttfm ms p50", "p90", "p99", "max"]


def summary_cells(s):
    t, f = s["mask_advance_us"], s["ttfm_ms"]
    return [s["schemas"], pct(s["passing"], s["schemas"]), *(s[k] for k in STATUSES[1:]),
            f"{s['valid_instances_rejected']} / {s['valid_instances']}",
            f"{s['invalid_instances_accepted']} / {s['invalid_instances']}",
            *(us(t[k]) for k in ("mean", "p50", "p90", "p99", "max")),
            *(us(f[k]) for k in ("p50", "p90", "p99", "max"))]


def code_cell(text: str) -> str:
    """``text`` as code in one markdown table cell."""
    return "`" + text.replace("|", "\\|").replace("\n", " ") + "`"


def markdown(results, engines, args, command) -> str:
    m, v = results["machine"], results["versions"]
    lines = [
        f"Run on {m['date']}: `{command}`.",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']}.",
        "Versions: " + ", ".join(f"{k} {x}" for k, x in v.items() if x) + ".",
        "",
        "How it is measured:",
        "",
        f"- Corpus `{results['corpus']['path']}`: {results['corpus']['schemas']} schemas, "
        f"{results['corpus']['instances']} test instances; subset = the file name's prefix.",
        "- Each engine runs in worker processes of its own (one per job); a compile + first mask over "
        f"{args.compile_timeout:.0f} s, or a schema's instances over {args.run_timeout:.0f} s, is killed and "
        "counted as a timeout.",
        "- Llama 3 vocabulary (128,256 tokens). Each instance is serialized with `json.dumps` defaults and "
        "tokenized by the tokenizer (its tokens must spell the text exactly), then fed token by token on a "
        "fresh matcher, computing the full mask (packed uint32 words) before each step: a valid instance must "
        "have every token in the mask and accepted and end in an accepting state; an invalid one must be "
        "refused at some step or end non-accepting.",
        "- A schema passes when it compiles and all its instances come out right (a schema without tests "
        "passes when it compiles). The worse failure names it: invalid accepted, then valid rejected.",
        "- Mask + advance: ns per step (mask, then advance by the instance's next token; the mask check "
        "between them is not timed), over every step of every instance run. Time to first mask (ttfm): "
        "compile + a new matcher + its first mask, per compiled schema. Python's GC is off while timing.",
        "- Ours keeps the terminal token tables that are slow to build on disk (`~/.cache/constrained`); the run "
        "starts with none there (the script deletes them) and keeps those it builds, as a server would. "
        "Each worker process also keeps in memory what serves every grammar (terminals' token tables, walks "
        "shared by grammars, products of automata) across the schemas it compiles one after the other.",
        "- llguidance runs with its default JSON options (spec semantics, flexible whitespace).",
        *(["- ours-any-order is ours with `property_order=\"any\"`: declared properties in any order, as far as "
           "its budget of states allows (ours keeps schema order, the default)."]
          if "ours-any-order" in engines else []),
        "",
        "### Overall",
        "",
        "Times: mask + advance in µs, ttfm in ms.",
        "",
        table(["engine", *COLUMNS], [[e, *summary_cells(results["engines"][e]["overall"])] for e in engines]),
    ]
    if "ours" in engines:
        lines += ["", "### Targets (ours, issue 4)", "", targets_markdown(results["engines"]["ours"]["overall"])]
    if "side_by_side" in results["engines"]:
        lines += ["", "### Side by side", "", "Schemas passing:", "",
                  table(list(results["engines"]["side_by_side"]), [list(results["engines"]["side_by_side"].values())])]
    lines += ["", "### Per subset", "",
              table(["subset", "engine", *COLUMNS],
                    [[s, e, *summary_cells(results["engines"][e]["subsets"][s])]
                     for s in results["engines"][engines[0]]["subsets"] for e in engines])]
    for e in engines:
        r = results["engines"][e]
        lines += ["", f"### {e}: compile errors by keyword", "",
                  table(["keyword", "schemas", "example"],
                        [[k["keyword"], k["schemas"], code_cell(k["example"][:160])]
                         for k in r["compile_errors"][:15]])]
        lines += ["", f"### {e}: instances that came out wrong", ""]
        wrong = [(name, "invalid accepted", x) for name, f in r["failures"].items() for x in f.get("accepted", ())]
        wrong += [(name, "valid rejected", x) for name, f in r["failures"].items()
                  for x in f.get("rejected", ())][:LISTED_REJECTIONS]
        lines += [table(["schema", "what", "test", "where"],
                        [[name, what, x["test"], code_cell(x.get("text") or f"{x['at']}: {x['context']}")]
                         for name, what, x in wrong])
                  if wrong else "None."]
        over = r["overall"]["slow_steps"]
        lines += ["", f"### {e}: slowest steps", "",
                  f"Steps over {SLOW_STEP_US // 1000} ms: {over} of {r['overall']['mask_advance_us']['n']}. "
                  "Where the slowest were (test: the instance's place in its file; step: the token fed, "
                  "after the text before it):", "",
                  table(["µs", "schema", "test", "step", "where"],
                        [[us(x["us"]), x["schema"], x["test"], x["step"], code_cell(x["context"])]
                         for x in r["slowest_steps"]])]
        others = [(name, f) for name, f in r["failures"].items() if f["status"] in ("timeout", "crashed")]
        if others:
            lines += ["", "Timeouts and crashes: " + "; ".join(f"`{n}` {f['status']}: {f.get('error', '')[:120]}"
                                                             for n, f in others) + "."]
    return "\n".join(lines)


def targets_markdown(s) -> str:
    t, f = s["mask_advance_us"], s["ttfm_ms"]
    values = {
        "schemas passing": s["passing"] / s["schemas"] if s["schemas"] else 0.0,
        "invalid instances accepted": s["invalid_instances_accepted"],
        "valid instances rejected": s["valid_instances_rejected"],
        "mask + advance mean": t["mean"],
        "mask + advance p99": t["p99"],
        "mask + advance max": t["max"],
        "time to first mask p50": f["p50"],
        "time to first mask p99": f["p99"],
        "timeouts (compiles over 30 s)": s["timeout"],
    }
    rows = []
    for key, (op, target, unit) in TARGETS.items():
        value = values[key]
        if value is None:
            rows.append([key, f"{op} {target} {unit}", "—", "—"])
            continue
        met = value >= target if op == ">=" else value <= target
        if unit == "%":
            shown = f"{100 * value:.1f} %", f"{100 * target:.0f} %"
        elif unit:
            shown = f"{us(value)} {unit}", f"{target} {unit}"
        else:
            shown = str(value), str(target)
        rows.append([key, f"{op.replace('>=', '≥').replace('<=', '≤')} {shown[1]}", shown[0], "yes" if met else "**no**"])
    return table(["target", "target value", "ours", "met?"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a tarball or a folder of MaskBench files")
    parser.add_argument("--subset", nargs="+", default=[], help="only these subsets (file name prefixes)")
    parser.add_argument("--limit", type=int, help="only this many schemas, drawn deterministically")
    parser.add_argument("--engines", nargs="+", choices=ENGINE_CHOICES, default=list(ENGINE_NAMES),
                        help="ours-any-order: ours with property_order='any'")
    parser.add_argument("--jobs", type=int, default=2, help="schemas run at a time (worker processes per engine)")
    parser.add_argument("--compile-timeout", type=float, default=30.0, help="s for a compile + first mask")
    parser.add_argument("--run-timeout", type=float, default=300.0, help="s for all instances of one schema")
    parser.add_argument("--progress", type=int, default=100, help="log every this many schemas")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "maskbench.json")
    parser.add_argument("--no-write", action="store_true", help="print only, even after a full run")
    args = parser.parse_args()

    engines = []
    for name in args.engines:
        reason = unavailable(name)
        if reason:
            log(f"{name} n/a: {reason}")
        else:
            engines.append(name)
    if not engines:
        parser.error("no engine can run")
    corpus = read_corpus(args.corpus)
    entries = [(name, json.loads(data)) for name, data in select(corpus, set(args.subset), args.limit)]
    if not entries:
        parser.error(f"no schema in {args.corpus} matches")
    log(f"{len(entries)} of {len(corpus)} schemas from {args.corpus}; engines: {', '.join(engines)}")

    tok = models.tokenizer(VOCAB)
    vocab = constrained.vocabulary(tok)
    tests = {name: instances(doc, tok, vocab) for name, doc in entries}  # here: the tokenizer is not thread-safe
    forget_stored_tables()
    records = run(entries, tests, vocab, engines, args)
    results = {
        "machine": machine(),
        "versions": versions(PACKAGES),
        "args": vars(args) | {"corpus": str(args.corpus), "out": str(args.out)},
        "corpus": {"path": os.path.relpath(args.corpus, ROOT), "schemas": len(entries),
                   "instances": sum(len(doc.get("tests") or []) for _, doc in entries)},
        "engines": results_of(records, engines, entries, tests, vocab),
    }
    text = markdown(results, engines, args, " ".join(["python benchmarks/bench_maskbench.py", *sys.argv[1:]]))
    print(text)
    if args.subset or args.no_write:
        return
    if args.limit is None:
        write_results(args.out, results, HEADING, text)
    else:  # a fixed draw from the whole corpus (the same schemas on every run) gets its own file and section
        write_results(args.out.with_name(f"{args.out.stem}_draw{args.limit}.json"), results,
                      f"## JSON Schema: MaskBench, a fixed draw of {args.limit} schemas (issue 4)", text)


if __name__ == "__main__":
    main()
