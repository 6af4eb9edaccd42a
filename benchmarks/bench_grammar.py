"""Lark grammars (issue 3): our engine next to llguidance and xgrammar on the
same grammars and the same token sequences.

    python benchmarks/bench_grammar.py [--quick] [--instances N] [--corpus PATH] [--no-write]

- json: grammars/json.lark over the valid instances of MaskBench (json.dumps
  defaults); llguidance with the same grammar (its lark dialect reads the file as
  it is) and with its own JSON (`%json {}`), xgrammar with its built-in JSON grammar.
- sql: grammars/sql.lark over benchmarks/data/sql_queries.txt; llguidance and
  xgrammar with the same grammar text.
- arithmetic, csv: sentences hypothesis draws from the grammar.

Each sentence is the tokenizer's exact encoding (its tokens spell the text)
followed by EOS; the sentences run in a fixed shuffled order. Per engine:
compile time, time to first mask, the per-token time (the full mask, then
advancing by the next token) and how many sentences it accepted: every token
allowed by the mask and taken, EOS at the end (so the text is complete). An
engine stops starting new sentences after --budget seconds (then its figures
cover the sentences it ran). On a sample of the sentences, each peer's allowed
tokens are compared with ours at every step.

Each engine runs in a worker process of its own (engines.py). Prints markdown
tables; a full run (no --quick, --instances, --cases or --engines) writes the
JSON results and rewrites the section "## Lark grammars (issue 3)" of
benchmarks/RESULTS.md, unless --no-write.
"""

import argparse
import json
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import (ROOT, draws, exact_tokens, forget_stored_tables, log, machine, median_run, ms, replace_section,
                    short_error, summary_us, table, us, versions)
from engines import EngineError, Worker, compare, show_tokens, time_compiles

import constrained  # noqa: E402  (common puts the repository on sys.path)
from constrained import models  # noqa: E402

HEADING = "## Lark grammars (issue 3)"
ENGINE_NAMES = ("ours", "llguidance", "xgrammar")
VOCAB = "llama3"  # the issue's targets are for Llama 3's 128k vocabulary
PACKAGES = ("numpy", "lark", "tokenizers", "llguidance", "xgrammar", "torch")
GRAMMARS = ROOT / "grammars"
CORPUS = ROOT.parent / "shared" / "corpora" / "maskbench-dev.tar.xz"
SQL_QUERIES = ROOT / "benchmarks" / "data" / "sql_queries.txt"

COMPILE_TIMEOUT = 120.0  # s: one compile and first mask
COMPILE_RUNS = 5  # compiles timed per grammar and engine, or fewer once they take COMPILE_BUDGET s together
COMPILE_BUDGET = 5.0
BUDGET = 1200.0  # s: an engine starts no new sentence after this long in one run
QUICK_BUDGET = 120.0
RUN_SLACK = 600.0  # s: on top of the budget per run (compile, the last sentence) before the worker is killed
CHECK_TIMEOUT = 600.0  # s: collecting the masks of the cross-checked sample
CHECK_MAX_TOKENS = 400  # longer sentences are left out of the cross-check (masks are 16 KB a step)
QUICK_INSTANCES = 300
DRAWS = 30  # hypothesis sentences per drawn grammar (10 with --quick)
SHOWN = 3  # rejected sentences shown per engine
SEED = 3

# issue 3, Llama 3 (128k vocabulary); figures for ours, the peers shown next to them
TARGETS = {
    "json": {"per-token mean": 25e-6, "per-token p99": 300e-6, "time to first mask": 100e-3,
             "valid instances rejected": 0},
    "sql": {"per-token mean": 100e-6, "per-token p99": 2e-3},
}


@dataclass
class Case:
    name: str
    sentences: str  # where they come from, for the report
    engines: dict  # label -> (engine name, language); "ours" first


def lark_text(name):
    return (GRAMMARS / f"{name}.lark").read_text()


def cases():
    json_lark, sql_lark = lark_text("json"), lark_text("sql")
    return [
        Case("json", "valid MaskBench instances, json.dumps defaults", {
            "ours": ("ours", ("lark", json_lark)),
            "llguidance": ("llguidance", ("lark", json_lark)),
            "llguidance %json": ("llguidance", ("json", None)),
            "xgrammar builtin": ("xgrammar", ("json", None)),
        }),
        Case("sql", f"{SQL_QUERIES.relative_to(ROOT)}, one query a line", {
            "ours": ("ours", ("lark", sql_lark)),
            "llguidance": ("llguidance", ("lark", sql_lark)),
            "xgrammar": ("xgrammar", ("lark", sql_lark)),
        }),
        *(Case(name, "hypothesis from_lark draws that lark parses", {
            "ours": ("ours", ("lark", lark_text(name))),
            "llguidance": ("llguidance", ("lark", lark_text(name))),
            "xgrammar": ("xgrammar", ("lark", lark_text(name))),
        }) for name in ("arithmetic", "csv")),
    ]


# ---------------------------------------------------------------- sentences


def maskbench_valid(path: Path, limit: int | None) -> list[tuple[str, str]]:
    """(file#test, json.dumps(data)) of every valid instance, in file and test
    order; ``limit`` of them evenly spaced over that order when given."""
    out = []
    with tarfile.open(path, "r:xz") as tar:
        for member in tar:  # in archive order: seeking back in an xz stream decompresses it again
            if member.isfile():
                tests = json.load(tar.extractfile(member)).get("tests", [])
                out += [(Path(member.name).stem, k, json.dumps(t["data"])) for k, t in enumerate(tests) if t["valid"]]
    out = [(f"{stem}#{k}", text) for stem, k, text in sorted(out)]
    return out if limit is None else [out[i] for i in evenly_spaced(len(out), limit)]


def evenly_spaced(n: int, k: int) -> list[int]:
    """Up to ``k`` indices spread evenly over range(n), first and last included."""
    if n == 0 or k <= 0:
        return []
    return np.unique(np.linspace(0, n - 1, min(k, n)).round().astype(int)).tolist()


def drawn(name: str, n: int) -> list[tuple[str, str]]:
    """Distinct sentences of a shipped grammar drawn by hypothesis, one space
    where whitespace is ignored."""
    import lark
    from hypothesis import strategies as st
    from hypothesis.extra.lark import from_lark

    explicit = {"WS": st.just(" ")} if "%ignore WS" in lark_text(name) else {}
    strategy = from_lark(lark.Lark(lark_text(name), start="start"), explicit=explicit)
    return [(f"draw {k}", s) for k, s in enumerate(dict.fromkeys(draws(strategy, n)))]


def sentences(case: Case, args) -> list[tuple[str, str]]:
    if case.name == "json":
        return maskbench_valid(args.corpus, args.instances)
    if case.name == "sql":
        return [(f"line {k + 1}", q) for k, q in enumerate(SQL_QUERIES.read_text().splitlines()) if q.strip()]
    return drawn(case.name, 10 if args.quick else DRAWS)


def in_language(case: Case, items):
    """The sentences lark parses with the grammar (it decides what is in the
    language), and the labels of those it refuses."""
    import lark

    parser = lark.Lark(lark_text(case.name), parser="lalr")
    kept, refused = [], []
    for label, text in items:
        try:
            parser.parse(text)
            kept.append((label, text))
        except lark.exceptions.LarkError:
            refused.append(label)
    return kept, refused


# ---------------------------------------------------------------- the benchmark


def token_sequences(case, args, tok, vocab):
    """The case's sentences that lark parses, in a fixed shuffled order, as their
    exact encodings followed by EOS: (labels, texts, sequences), and the labels
    of the sentences left out."""
    items, refused = in_language(case, sentences(case, args))
    labels, texts, sequences, unspelled = [], [], [], []
    for i in np.random.default_rng(SEED).permutation(len(items)):
        label, text = items[i]
        ids = exact_tokens(tok, vocab, text)
        if ids is None:
            unspelled.append(label)
            continue
        labels.append(label)
        texts.append(text)
        sequences.append([*ids, min(vocab.eos_ids)])
    return (labels, texts, sequences), {"refused_by_lark": refused, "not_spelled_by_the_tokenizer": unspelled}


def bench_case(case, args, workers, tok, vocab):
    (labels, texts, sequences), left_out = token_sequences(case, args, tok, vocab)
    steps = sum(map(len, sequences))
    log(f"{case.name}: {len(sequences)} sentences, {steps} tokens")
    short = [i for i, s in enumerate(sequences) if len(s) <= CHECK_MAX_TOKENS]
    sample = [short[i] for i in evenly_spaced(len(short), args.check)]
    result = {
        "sentences_from": case.sentences,
        "sentences": len(sequences),
        "steps": steps,
        **left_out,
        "engines": {},
        "crosscheck_sample": [labels[i] for i in sample],
        "crosscheck": {},
    }
    ours_masks = None
    for label, (engine, language) in case.engines.items():
        if engine not in workers:
            continue
        log(f"{case.name}: {label}")
        r = result["engines"][label] = {"engine": engine, "language": language[0]}
        try:
            r.update(time_compiles(workers[engine], language, COMPILE_TIMEOUT, COMPILE_RUNS, COMPILE_BUDGET))
            run = workers[engine].call((args.budget + RUN_SLACK) * args.repeat, "run", language, sequences,
                                       args.repeat, args.budget)
            r.update(run_summary(run, labels, texts, sequences, tok, vocab))
            if not sample:
                continue
            masks = workers[engine].call(CHECK_TIMEOUT, "check", [sequences[i] for i in sample])
            if label == "ours":
                ours_masks, ours_compiled = masks, constrained.grammar(language[1])
            elif ours_masks is not None:
                result["crosscheck"][label] = compare(
                    ours_masks, masks, [sequences[i] for i in sample], ours_compiled, tok, vocab)
        except EngineError as e:
            r["error"] = str(e)
            log(f"  {label}: {e}")
    return result


def run_summary(run, labels, texts, sequences, tok, vocab):
    """Per-token times of the median run, and which sentences were not accepted:
    a token refused, or taken though the mask excluded it."""
    refused = {i: (i, k, t, e) for i, k, t, e in run["rejected"]}
    for i, k, t in reversed(run["mask_misses"]):  # a sentence's first miss comes before any refusal (which ends it)
        refused[i] = (i, k, t, "not in its mask, though its advance took it")
    return {
        "per_token_us": summary_us(median_run(run["runs"])),
        "run_means_us": [float(x.mean() / 1e3) if len(x) else None for x in run["runs"]],
        "sentences_run": run["sequences_run"],
        "accepted": run["sequences_run"] - len(refused),
        "rejected": [rejection(labels[i], texts[i], sequences[i], k, t, e, tok, vocab)
                     for i, k, t, e in sorted(refused.values())],
        "mask_misses": len(run["mask_misses"]),
    }


def rejection(label, text, sequence, step, token, error, tok, vocab):
    """Where an engine refused a sentence: the step, the token, the text before it."""
    before = b"".join(vocab.tokens[t] for t in sequence[:step]).decode(errors="replace")
    return {"sentence": label, "step": step, "of": len(sequence), "token": show_tokens(tok, vocab, [token])[0],
            "before": before[-60:], "error": error[:300], "text": text[:300]}


def start_workers(engine_names, vocab_name):
    workers, unavailable = {}, {}
    for name in engine_names:
        log(f"starting {name}")
        try:
            workers[name] = Worker(name, vocab_name, 1)
        except EngineError as e:
            unavailable[name] = str(e)
            log(f"  {name} n/a: {e}")
    return workers, unavailable


# ---------------------------------------------------------------- report


def engine_rows(result):
    rows = []
    for label, e in result["engines"].items():
        ttfm, compile_s, tok = e.get("first_mask_s"), e.get("compile_s"), e.get("per_token_us")
        rows.append([
            label, e["language"],
            ms(np.median(compile_s)) if compile_s else "—",
            f"{ms(np.median(ttfm))} ({ms(max(ttfm))})" if ttfm else "—",
            *(us(tok[k]) if tok else "—" for k in ("mean", "p50", "p99", "max")),
            accepted_cell(e, result["sentences"]),
        ])
    return rows


def accepted_cell(e, sentences):
    if "accepted" not in e:
        return short_error(e["error"])
    if e["sentences_run"] < sentences:
        return f"{e['accepted']} / {e['sentences_run']} run (of {sentences}: budget)"
    return f"{e['accepted']} / {sentences}"


def case_markdown(name, result):
    lines = [
        f"### {name}: {result['sentences']} sentences ({result['sentences_from']}), {result['steps']} tokens",
        "",
        table(["engine", "language", "compile ms", "ttfm ms median (max)", "µs/token mean", "p50", "p99", "max",
               "accepted"], engine_rows(result)),
    ]
    for key, what in (("refused_by_lark", "lark refuses"), ("not_spelled_by_the_tokenizer", "no exact encoding")):
        if result[key]:
            lines += ["", f"Left out ({what}): {len(result[key])}: " + ", ".join(result[key][:10]) + "."]
    if name in TARGETS:
        lines += ["", targets_markdown(name, result)]
    details = []
    for label, e in result["engines"].items():
        if "error" in e:
            details.append(f"- {label} failed: {e['error'][:300]}")
        for x in e.get("rejected", [])[:SHOWN]:
            details.append(f"- {label} rejected `{x['sentence']}` at token {x['step']} of {x['of']} ({x['token']}) "
                           f"after …{x['before']!r}: {x['error'][:160]!r}")
        if len(e.get("rejected", [])) > SHOWN:
            details.append(f"- {label}: {len(e['rejected']) - SHOWN} more rejected (in the JSON results)")
    if details:
        lines += ["", *details]
    if result["crosscheck"]:
        lines += ["", *crosscheck_markdown(result)]
    return lines


def target_value(key, e):
    tok = e.get("per_token_us")
    if key == "per-token mean":
        return tok and tok["mean"] / 1e6
    if key == "per-token p99":
        return tok and tok["p99"] / 1e6
    if key == "time to first mask":
        return e.get("first_mask_s") and float(np.median(e["first_mask_s"]))
    if key == "valid instances rejected":
        return len(e["rejected"]) if "rejected" in e else None
    raise KeyError(key)


def show(key, value):
    if value is None:
        return "—"
    if key == "valid instances rejected":
        return str(value)
    return f"{us(value * 1e6)} µs" if value < 1e-3 else f"{ms(value)} ms"


def targets_markdown(name, result):
    peers = [label for label in result["engines"] if label != "ours"]
    rows = []
    for key, target in TARGETS[name].items():
        ours = target_value(key, result["engines"].get("ours", {}))
        met = "—" if ours is None else "yes" if ours <= target else "**no**"
        rows.append([key, f"≤ {show(key, target)}", show(key, ours), met,
                     *(show(key, target_value(key, result["engines"][p])) for p in peers)])
    return "Targets (issue 3; ttfm is the median):\n\n" + table(["target", "value", "ours", "met?", *peers], rows)


# Written by hand from minimal inputs; the versions are named, since a new one may behave otherwise.
DIFFERENCES_EXPLAINED = r"""What the differences come from (established by hand with llguidance 1.9.1 and xgrammar 0.2.9 on
minimal inputs; re-check them when the versions change):

- **Whitespace.** Ours allows `%ignore`d whitespace before the first terminal, as lark does
  (`lark.parse(" {}")` succeeds); llguidance and xgrammar refuse it. Ours bounds one ignored run at 48
  bytes (`max_ignored`); the peers also allow the vocabulary's longer runs of spaces.
- **JSON, llguidance `%json {}`** allows a `\u` escape only for control characters (after `\u` it
  forces `00` then `0` or `1`), so it refuses the `\uXXXX` escapes `json.dumps` writes for non-ASCII
  text (`["\u00e9"]`): those are its rejected instances.
- **JSON, xgrammar's built-in grammar** takes only an object or an array at the top (RFC 8259 allows
  any value), so it refuses instances that are a bare string or number; it allows special tokens
  (`<|begin_of_text|>`...) inside strings, as in the regex benchmark; and its mask and `accept_token`
  can disagree: on `Kubernetes---kb_573_Normalized#0` it accepts `}]` at token 170, which its bitmask
  excludes.
- **SQL, both peers** allow a keyword glued to a following name, as lark's contextual lexer splits it
  (`WHERE x = 'x'ording = 1` is `OR ding = 1` to lark); ours refuses it, its longest-match lexer reading
  one name `ording` there. Lark also accepts `ſELECT` (`"SELECT"i` is Unicode case-insensitive in Python's
  `re`: U+017F folds to `s`), which llguidance allows (the `\xc5` byte at the start) and ours does not.
- **SQL, llguidance** also lexes a keyword as a `NAME` where lark (and ours) take the keyword: after
  `WHERE NOT` it allows `=` (NOT as a column name), after a column `asc`; lark refuses both
  (`SELECT a asc FROM t`). xgrammar allows special tokens inside strings, as for JSON.
"""


def crosscheck_markdown(result):
    rows, details = [], []
    for peer, x in result["crosscheck"].items():
        rows.append([peer, len(result["crosscheck_sample"]), x["steps"], x["differing_steps"], x["forced_steps"],
                     x["ours_only_tokens"], x["peer_only_tokens"], len(x["rejections"])])
        for side, who in (("ours_only", "ours only"), ("peer_only", f"{peer} only")):
            for kind, v in x["kinds"][side].items():
                details.append(f"- {peer}, allowed by {who}, {v['count']} {kind}: "
                               + ", ".join(f"`{t}`" for t in v["sample"]))
    return [
        f"Cross-check against ours at every step of {len(result['crosscheck_sample'])} sentences "
        f"(evenly spaced, at most {CHECK_MAX_TOKENS} tokens):",
        "",
        table(["peer", "sentences", "steps", "steps differing", "of which forced for ours",
               "tokens only ours allows", "tokens only the peer allows", "sentences it cut short"], rows),
        *([""] + details if details else []),
    ]


def markdown(results, args) -> str:
    m, v = results["machine"], results["versions"]
    lines = [
        f"Run on {m['date']}: `{results['command']}`.",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']}; shared and noisy.",
        f"Python {v['python']}, numpy {v['numpy']}, lark {v['lark']}, tokenizers {v['tokenizers']}; peers: "
        + ", ".join(f"{p} {v.get(p) or 'not installed'}" for p in ("llguidance", "xgrammar", "torch")) + ".",
        f"Vocabulary {results['vocab']} (V = {results['vocab_size']}).",
        "",
        "How it is measured:",
        "",
        "- Sentences: each is the tokenizer's own encoding, kept when its tokens spell the text exactly, then EOS; "
        "only sentences lark parses with the grammar (`parser=\"lalr\"`) are used. Every engine follows the same "
        "token sequences.",
        "- Engines: ours `grammar(text)`; llguidance `LLMatcher.grammar_from_lark` on the same text (its lark "
        "dialect reads the shipped grammars as they are) or `%json {}`; xgrammar `compile_lark` on the same text or "
        "`compile_builtin_json_grammar()` (compiler cache off). Each engine runs alone in its own process.",
        f"- Compile: ours `grammar()` + the token index for the vocabulary. Time to first mask (ttfm) = compile + a new "
        f"matcher + its first mask; up to {COMPILE_RUNS} fresh compiles, fewer once they take {COMPILE_BUDGET:.0f} s. "
        "Ours keeps the terminal token tables that are slow to build on disk (`~/.cache/constrained`); the run "
        "starts with none there (the script deletes them), so its first compile builds them (then the max).",
        "- Per-token time = computing the full mask (packed uint32 bitmask) + advancing by the sentence's next token, "
        "at every step including the final EOS, over all sentences one after the other on matchers of one compiled "
        f"grammar (caches warm up along the run, as in serving), in a fixed shuffled order. An engine starts no new "
        f"sentence after {args.budget:.0f} s in a run. Python's GC is off while timing; {args.repeat} run(s), each "
        "with a fresh compile; the run with the median mean is reported.",
        "- Accepted: every token (and EOS at the end) allowed by the engine's mask and taken by its advance. A token "
        "the advance refuses ends the sentence; one it takes although the mask excludes it (checked outside the "
        "timing) counts against the sentence, which goes on.",
    ]
    for name, result in results["cases"].items():
        lines += ["", *case_markdown(name, result)]
    if any(result["crosscheck"] for result in results["cases"].values()):
        lines += ["", DIFFERENCES_EXPLAINED]
    if results["unavailable"]:
        lines += ["", "Not run: " + "; ".join(f"{k}: {e}" for k, e in results["unavailable"].items())]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the MaskBench tarball (.tar.xz)")
    parser.add_argument("--instances", type=int, help="valid JSON instances, evenly spaced (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_INSTANCES} JSON instances, fewer drawn "
                        "sentences, a smaller cross-check and budget")
    parser.add_argument("--cases", nargs="+", choices=[c.name for c in cases()])
    parser.add_argument("--engines", nargs="+", choices=ENGINE_NAMES, default=list(ENGINE_NAMES))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--budget", type=float, help="s per engine and run after which no new sentence starts "
                        f"(default {BUDGET:.0f}, {QUICK_BUDGET:.0f} with --quick)")
    parser.add_argument("--check", type=int, help="sentences cross-checked per grammar (default 20, 6 with --quick)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "grammar.json")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    if "ours" not in args.engines:
        parser.error("the cross-check and the targets need ours in --engines")
    if (not args.cases or "json" in args.cases) and not args.corpus.is_file():
        parser.error(f"no MaskBench tarball at {args.corpus}: pass --corpus")
    partial_run = bool(args.quick or args.instances or args.cases or set(args.engines) != set(ENGINE_NAMES))
    if args.quick and args.instances is None:
        args.instances = QUICK_INSTANCES
    if args.check is None:
        args.check = 6 if args.quick else 20
    if args.budget is None:
        args.budget = QUICK_BUDGET if args.quick else BUDGET

    tok = models.tokenizer(VOCAB)
    vocab = constrained.vocabulary(tok)
    selected = [c for c in cases() if not args.cases or c.name in args.cases]
    command = " ".join(["python benchmarks/bench_grammar.py", *sys.argv[1:]])
    results = {"machine": machine(), "versions": versions(PACKAGES), "command": command, "vocab": VOCAB,
               "vocab_size": vocab.size, "cases": {}}
    forget_stored_tables()
    workers, results["unavailable"] = start_workers([n for n in ENGINE_NAMES if n in args.engines], VOCAB)
    try:
        for case in selected:
            results["cases"][case.name] = bench_case(case, args, workers, tok, vocab)
    finally:
        for worker in workers.values():
            worker.close()

    print(markdown(results, args))
    if args.no_write or partial_run:
        log("not written: " + ("--no-write" if args.no_write else "a partial run (--quick, --instances, --cases or "
                                                                     "--engines)"))
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=float) + "\n")
    replace_section(HEADING, markdown(results, args))
    log(f"wrote {args.out} and benchmarks/RESULTS.md")


if __name__ == "__main__":
    main()
