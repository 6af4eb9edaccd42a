"""Regular expressions (issue 2): our engine next to llguidance, xgrammar and
outlines-core, on the same tokenizers, the same regexes and the same token
sequences.

    python benchmarks/bench_regex.py [--vocab llama3 smollm2] [--repeat 3] [--out benchmarks/results/regex.json]

Per engine: vocabulary preprocessing, compile time, time to first mask, the
per-token mask time (computing the mask, then advancing by the next token of the
sequence) and the memory of a compiled regex; for ours also the MLX cost of
applying a mask to the logits and of a whole logits-processor call. Every
step's set of allowed tokens is compared with ours.

Each engine runs in a worker process of its own, one at a time, so that a peer
that hangs or crashes on a regex is killed and reported rather than stopping the
run. Prints markdown tables, writes the JSON results, and rewrites the section
"## Regular expressions (issue 2)" of benchmarks/RESULTS.md.

Needs the bench extra, `pip install -e ".[bench]"`; xgrammar depends on torch, so
install a CPU build of torch first. A peer that is missing is reported as n/a.
"""

import argparse
import gc
import json
import multiprocessing
import os
import re
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common import (ROOT, draws, exact_tokens, log, machine, median_run, mib, ms, replace_section, short_error,
                    summary_us, table, us, versions)
from engines import EngineError, Worker, ascii_classes, compare, time_compiles

import constrained  # noqa: E402  (common puts the repository on sys.path)
import mlx.core as mx  # noqa: E402
from constrained import models  # noqa: E402
from constrained.dfa import from_regex  # noqa: E402

HEADING = "## Regular expressions (issue 2)"
ENGINE_NAMES = ("ours", "llguidance", "xgrammar", "outlines-core")
PACKAGES = ("numpy", "mlx", "mlx-lm", "tokenizers", "llguidance", "xgrammar", "torch", "outlines-core")

COMPILE_TIMEOUT = 30.0  # s: one compile and first mask
RUN_TIMEOUT = 900.0  # s: the --repeat per-token runs of one regex, each with a fresh compile
CHECK_TIMEOUT = 300.0  # s: collecting the masks of one regex's sequences
COMPILE_RUNS = 5  # compiles timed per regex, or fewer once they take COMPILE_BUDGET s together
COMPILE_BUDGET = 3.0
HYPOTHESIS_DRAWS = 6  # strings of the language per regex, besides the hand-written ones
RANDOM_WALKS = 5  # random walks under our mask per regex
WALK_TOKENS = 64
APPLY_RUNS = 2000
SEED = 2

TARGETS = {  # issue 2, Llama 3 (128k vocabulary)
    "per-token mask median": 5e-6,
    "per-token mask mean": 15e-6,
    "per-token mask p99": 300e-6,
    "per-token mask max": 1.5e-3,
    "time to first mask, median over regexes": 20e-3,
    "time to first mask, slowest regex": 1.0,
    "vocabulary preprocessing, cold": 1.0,
    "vocabulary preprocessing, from disk cache": 50e-3,
    "MLX apply (logits + cached bias), median": 40e-6,
    "memory per compiled regex, largest": 20 * 2**20,
}

WORDS = (
    "apple banana cherry grape lemon mango orange peach pear plum "
    "red green blue yellow purple black white brown pink gray "
    "cat dog horse mouse tiger lion zebra monkey rabbit snake "
    "north south east west up down left right inside outside "
    "january february march april may june july august september october"
).split()


@dataclass
class Case:
    name: str
    pattern: str
    examples: list = field(default_factory=list)


CASES = [
    Case("lowercase", r"[a-z]{1,64}", ["hello", "pneumonoultramicroscopicsilicovolcanoconiosis"]),
    Case("words50", "(" + "|".join(WORDS) + ")", ["banana", "september", "up"]),
    Case("nested_abcd", r"((a|b)*c)+d", ["abcabbcd", "cd", "aaaaacbcaccd"]),
    Case("words_spaces", r"(\w+\s?)*", ["Hello world 42 ", "snake_case\tvalue\nnext", ""]),
    Case("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
         ["123e4567-e89b-42d3-a456-426614174000"]),
    Case("email", r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}", ["jane.doe+news@example.co.uk", "a@b.io"]),
    Case("json_number", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", ["-12.5e+3", "0", "3.14159"]),
    Case("date", r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", ["1969-07-20", "2024-02-29"]),
    Case("time", r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?", ["20:17", "23:59:59"]),
    Case("iso_datetime", r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})",
         ["2024-05-17T13:45:00Z", "1999-12-31T23:59:59.999+01:00"]),
    Case("phone", r"\(?[0-9]{3}\)?[ .-]?[0-9]{3}[ .-]?[0-9]{4}", ["(555) 123-4567", "555.123.4567"]),
    Case("ipv4", r"((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
         ["192.168.0.1", "255.255.255.0", "8.8.8.8"]),
    Case("json_string", r'"([^"\\]|\\.)*"', ['"hello \\"world\\"\\n"', '"café ☃ 😀"']),
    Case("line200", r"[^\n]{0,200}", ["The quick brown fox jumps over the lazy dog.", "naïve café — ünïcödé ✓"]),
    Case("hex_color", r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})", ["#ff8800", "#FFF"]),
    Case("semver", r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
         r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?", ["1.2.3", "10.0.0-rc.1+build.5"]),
    Case("url", r"https?://[a-zA-Z0-9.-]+(:[0-9]{1,5})?(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]*)*(\?[a-zA-Z0-9._~%!$&'()*+,;=:@/?-]*)?",
         ["https://example.com/path/to/page?q=1&lang=en", "http://localhost:8080/"]),
    Case("int_list", r"\[([0-9]+(, [0-9]+)*)?\]", ["[1, 2, 3]", "[]", "[42]"]),
    Case("choice3", r"(yes|no|maybe)", ["yes", "maybe"]),
    Case("identifier", r"[A-Za-z_][A-Za-z0-9_]{0,31}", ["my_variable", "_private2"]),
    Case("sentence", r"[A-Z][a-z]+( [a-z]+){2,10}\.", ["The cat sat on the mat."]),
    Case("json_object", r'\{"name": "[A-Za-z ]{1,20}", "age": [0-9]{1,3}\}', ['{"name": "Ada Lovelace", "age": 36}']),
    Case("card", r"[0-9]{4}( [0-9]{4}){3}", ["4111 1111 1111 1111"]),
    Case("markdown_list", r"(- [a-z ]{1,30}\n){1,5}", ["- buy milk\n- walk the dog\n"]),
    Case("literal_prefix", r"The answer is (yes|no)\.", ["The answer is yes."]),
    Case("ab_suffix", r"(a|b)*a(a|b){10}", ["bbba" + "b" * 10, "a" * 11]),  # 2048 DFA states
]

# ---------------------------------------------------------------- token sequences


def language_strings(case: Case) -> list[str]:
    """The hand-written examples, then strings hypothesis draws."""
    from hypothesis import strategies as st

    drawn = draws(st.from_regex(re.compile(ascii_classes(case.pattern)), fullmatch=True), HYPOTHESIS_DRAWS)
    return list(dict.fromkeys([*case.examples, *drawn]))


def token_sequences(case: Case, tok, vocab) -> tuple[list[list[int]], int]:
    """Strings of the language as the tokenizer encodes them, each followed by EOS
    (kept when our matcher accepts the whole sequence), then random walks: a
    uniformly random allowed token at each step, up to WALK_TOKENS or EOS.
    Returns the sequences and how many of them come from strings."""
    constraint = constrained.regex(case.pattern)
    for example in case.examples:
        if not constraint.matches(example):
            raise ValueError(f"{case.name}: the example {example!r} does not match {case.pattern!r}")
    matcher = constraint.matcher(tok)
    eos = min(vocab.eos_ids)
    sequences = []
    for s in language_strings(case):
        ids = exact_tokens(tok, vocab, s)
        if ids is not None and matcher.accepts([*ids, eos]):
            sequences.append([*ids, eos])
    from_strings = len(sequences)
    rng = np.random.default_rng([SEED, zlib.crc32(case.name.encode())])
    for _ in range(RANDOM_WALKS):
        matcher.reset()
        walk = []
        while len(walk) < WALK_TOKENS and not matcher.is_finished():
            token = int(rng.choice(np.flatnonzero(matcher.allowed())))
            matcher.advance(token)
            walk.append(token)
        sequences.append(walk)
    return sequences, from_strings


# ---------------------------------------------------------------- our own measurements, in our worker


def handle_processor(state, sequences):
    """ns per call of our logits processor along each sequence, mx.eval included
    (the regex's masks already built by the runs): "new" with a new processor per
    sequence, as in a generation; "replayed" with the same processor rolled back
    to the start and run again, its 0/-inf vectors already made."""
    constraint, tok = state["factory"].args
    logits = mx.random.normal((1, state["vocab"].size))
    mx.eval(logits)
    times = {"new": [], "replayed": []}
    gc.disable()
    try:
        for sequence in sequences:
            processor = constraint.processor(tok)
            prefixes = [mx.array([0, *sequence[:k]]) for k in range(len(sequence))]
            for kind in times:
                processor(prefixes[0], logits)  # the start (again): rolls back to it
                for tokens in prefixes:
                    start = time.perf_counter_ns()
                    mx.eval(processor(tokens, logits))
                    times[kind].append(time.perf_counter_ns() - start)
    finally:
        gc.enable()
    return {kind: np.array(t, dtype=np.int64) for kind, t in times.items()}


def handle_apply(state, runs):
    """ns to apply a mask to (1, V) float32 logits in MLX, mx.eval included: adding a
    cached 0/-inf vector, and mx.where with a cached bool mask."""
    width = state["vocab"].size
    rng = np.random.default_rng(SEED)
    allowed = rng.random(width) < 0.5
    logits = mx.array(rng.standard_normal((1, width), dtype=np.float32))
    bias = mx.array(np.where(allowed, 0.0, -np.inf).astype(np.float32))
    mask = mx.array(allowed)
    mx.eval(logits, bias, mask)
    add, where = [], []
    for _ in range(runs):  # interleaved, so that both see the same noise
        start = time.perf_counter_ns()
        mx.eval(logits + bias)
        add.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        mx.eval(mx.where(mask, logits, -np.inf))
        where.append(time.perf_counter_ns() - start)
    return {"width": width, "add": summary_us(add), "where": summary_us(where)}


OURS_HANDLERS = {"processor": handle_processor, "apply": handle_apply}


# ---------------------------------------------------------------- the benchmark


def ours_preprocessing_once(vocab_name, cold):
    """In a fresh process: (s to read the token bytes, s to build the trie with an
    empty cache (cold) or load it from the disk cache (warm))."""
    tok = models.tokenizer(vocab_name)
    with tempfile.TemporaryDirectory() as empty:
        if cold:
            os.environ["CONSTRAINED_CACHE"] = empty  # the tokenizer's own files are already loaded
        start = time.perf_counter()
        vocab = constrained.vocabulary(tok)
        read = time.perf_counter()
        vocab.trie, vocab.spells_every_byte
        return read - start, time.perf_counter() - read


def ours_preprocessing(vocab_name, repeat):
    context = multiprocessing.get_context("spawn")
    out = {"cold": [], "warm": []}
    for _ in range(repeat):
        for kind in out:
            with context.Pool(1) as pool:
                out[kind].append(pool.apply(ours_preprocessing_once, (vocab_name, kind == "cold")))
    return out


def bench_case(case, sequences, from_strings, workers, repeat, tok, vocab):
    """One regex on every engine. Returns its results and the raw per-token runs
    (and our processor calls), which are aggregated over the regexes."""
    result = {
        "pattern": case.pattern,
        "dfa_states": from_regex(case.pattern).n_states,
        "sequences": len(sequences),
        "from_strings": from_strings,
        "steps": sum(map(len, sequences)),
        "engines": {},
        "crosscheck": {},
    }
    raw = {}
    ours_masks = None
    constraint = constrained.regex(case.pattern)
    language = ("regex", case.pattern)
    for name, worker in workers.items():
        r = result["engines"][name] = {}
        try:
            r.update(time_compiles(worker, language, COMPILE_TIMEOUT, COMPILE_RUNS, COMPILE_BUDGET))
            run = worker.call(RUN_TIMEOUT, "run", language, sequences, repeat)
            raw[name] = run["runs"]
            r["per_token_us"] = summary_us(median_run(run["runs"]))
            r["run_means_us"] = [float(x.mean() / 1e3) if len(x) else None for x in run["runs"]]
            r["memory_bytes"], r["memory_kind"] = int(run["memory"]), run["memory_kind"]
            r["rejected"] = [{"sequence": i, "step": k, "token": t, "error": e} for i, k, t, e in run["rejected"]]
            r["mask_misses"] = [{"sequence": i, "step": k, "token": t} for i, k, t in run["mask_misses"]]
            masks = worker.call(CHECK_TIMEOUT, "check", sequences)
            if name == "ours":
                ours_masks = masks
                raw["processor"] = worker.call(CHECK_TIMEOUT, "processor", sequences)
            elif ours_masks is not None:
                result["crosscheck"][name] = compare(ours_masks, masks, sequences, constraint, tok, vocab)
        except EngineError as e:
            r["error"] = str(e)
            log(f"  {name}: {e}")
    return result, raw


def bench_vocab(vocab_name, cases, engine_names, repeat):
    log(f"{vocab_name}: loading the tokenizer, building the token sequences")
    tok = models.tokenizer(vocab_name)
    vocab = constrained.vocabulary(tok)
    vocab.trie  # fills the disk cache that the warm preprocessing reads
    sequences = {case.name: token_sequences(case, tok, vocab) for case in cases}
    result = {"size": vocab.size, "eos": sorted(vocab.eos_ids), "preprocessing": {}, "unavailable": {}, "cases": {}}

    if "ours" in engine_names:
        log(f"{vocab_name}: our vocabulary preprocessing, cold and warm, in fresh processes")
        parts = ours_preprocessing(vocab_name, repeat)
        result["preprocessing"]["ours"] = {kind: [sum(p) for p in v] for kind, v in parts.items()}
        result["preprocessing"]["ours_parts"] = {kind: [list(p) for p in v] for kind, v in parts.items()}
    workers = {}
    for name in engine_names:
        log(f"{vocab_name}: starting {name}")
        try:
            workers[name] = Worker(name, vocab_name, 1 if name == "ours" else repeat,
                                   OURS_HANDLERS if name == "ours" else None)
        except EngineError as e:
            result["unavailable"][name] = str(e)
            log(f"  {name} n/a: {e}")
            continue
        if name != "ours":
            result["preprocessing"][name] = {"setup": workers[name].setup}
    if "ours" in workers:
        result["apply"] = workers["ours"].call(RUN_TIMEOUT, "apply", APPLY_RUNS)

    raw = {}
    for case in cases:
        log(f"{vocab_name}: {case.name}")
        result["cases"][case.name], raw[case.name] = bench_case(case, *sequences[case.name], workers, repeat, tok, vocab)
    for worker in workers.values():
        worker.close()

    result["per_token"] = aggregate(raw, workers, repeat)
    calls = [r["processor"] for r in raw.values() if "processor" in r]
    if calls:
        result["processor_us"] = {kind: summary_us(np.concatenate([c[kind] for c in calls])) for kind in calls[0]}
    return result


def aggregate(raw, engine_names, repeat):
    """Per-token summaries over all steps of all regexes, per engine: over the
    regexes it completed, and over those every engine completed. Run r is the r-th
    run of each regex; the run with the median mean is reported."""
    common = [case for case, r in raw.items() if all(name in r for name in engine_names)]
    out = {"common_cases": common}
    for name in engine_names:
        done = [case for case, r in raw.items() if name in r]
        out[name] = {"cases": len(done)}
        for key, chosen in (("all", done), ("common", common)):
            if chosen:
                runs = [np.concatenate([raw[case][name][i] for case in chosen]) for i in range(repeat)]
                out[name][key] = summary_us(median_run(runs))
    return out


# ---------------------------------------------------------------- report


def markdown(results, args) -> str:
    m, v = results["machine"], results["versions"]
    peers = ", ".join(f"{p} {v.get(p) or 'not installed'}" for p in ("llguidance", "xgrammar", "torch", "outlines-core"))
    command = f"python benchmarks/bench_regex.py --vocab {' '.join(args.vocab)} --repeat {args.repeat}"
    if args.cases:
        command += f" --cases {' '.join(args.cases)}"
    lines = [
        f"Run on {m['date']}: `{command}`.",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']}; shared and noisy "
        "(±15–40 % from run to run).",
        f"Python {v['python']}, numpy {v['numpy']}, mlx {v['mlx']}, mlx-lm {v['mlx-lm']}, tokenizers {v['tokenizers']}; "
        f"peers: {peers}.",
        "",
        "How it is measured:",
        "",
        f"- {len(args.cases or CASES)} regexes (listed at the end). Token sequences, the same for every engine: strings of the "
        f"language (hand-written, plus {HYPOTHESIS_DRAWS} derandomized hypothesis draws) as the tokenizer encodes them, "
        f"followed by EOS; and {RANDOM_WALKS} random walks under our mask (a uniformly random allowed token per step, "
        f"up to {WALK_TOKENS} tokens or EOS).",
        "- Each engine runs alone in its own process. Peers get the pattern with `\\d`, `\\w`, `\\s` spelled out as ASCII "
        "classes (we read them as `re.ASCII` does) and our EOS ids; outlines-core's vocabulary is built from our token "
        "bytes (its own loader needs the Hugging Face hub).",
        "- Vocabulary preprocessing: ours = reading the token bytes + building the trie with an empty cache (cold) or "
        "loading it from the disk cache (warm), each in a fresh process, median of --repeat; peers = building their "
        "tokenizer object (llguidance `LLTokenizer`, xgrammar `TokenizerInfo` + `GrammarCompiler`, outlines-core "
        "`Vocabulary`), median of --repeat in one process.",
        f"- Compile: ours `regex()` (DFA, with `from_regex`'s cache cleared) + the token index; llguidance `LLMatcher`; "
        f"xgrammar `compile_regex` (compiler cache off); outlines-core `Index`. Time to first mask (ttfm) = compile + a new "
        f"matcher + its first mask. Median of up to {COMPILE_RUNS} compiles per regex; a compile + first mask over "
        f"{COMPILE_TIMEOUT:.0f} s is killed and counted as a timeout.",
        "- Per-token time = computing the mask (into a packed uint32 bitmask) + advancing by the sequence's next token, "
        "over every step of every sequence; the sequences run one after the other on matchers of one compiled regex "
        "(ours shares its per-state mask cache between them, llguidance's matchers are `deep_copy`s of one, xgrammar "
        "and outlines-core build a matcher per sequence). Python's GC is off while timing. The whole measurement is "
        "repeated --repeat times, each with a fresh compile, and the run with the median mean is reported.",
        "- Memory per compiled regex: ours = nbytes of the DFA and index arrays + the masks cached after the runs; "
        "xgrammar = its `memory_size_bytes`; llguidance and outlines-core = the process's RSS growth over the compile "
        "and first run (rough: freed memory gets reused).",
        "- MLX apply: (1, V) float32 logits, `logits + bias` (cached 0/-inf vector) vs `mx.where(mask, logits, -inf)` "
        f"(cached bool mask), `mx.eval` included, {APPLY_RUNS} runs each, interleaved. Processor call: "
        "`proc(tokens, logits)` + `mx.eval` along each sequence, the regex's masks already built: with a new "
        "processor per sequence, as in a generation, then with the same processor rolled back and replayed (its "
        "0/-inf vectors already made).",
        "- Cross-check: at every step of every sequence, the set of tokens each peer allows is compared with ours.",
    ]
    for vocab_name, r in results["vocabs"].items():
        lines += ["", *vocab_markdown(vocab_name, r)]
    lines += ["", "### Targets (issue 2)", "", targets_markdown(results)]
    lines += ["", "### Cross-check against the peers", "", *crosscheck_markdown(results)]
    lines += ["", "### The regexes", "", table(
        ["name", "pattern", "DFA states"],
        [[name, "`" + (c["pattern"] if len(c["pattern"]) <= 90 else c["pattern"][:87] + "...").replace("|", "\\|") + "`",
          c["dfa_states"]] for name, c in next(iter(results["vocabs"].values()))["cases"].items()])]
    return "\n".join(lines)


def engine_summary_rows(r):
    names = [n for n in ENGINE_NAMES if n in r["per_token"]]
    rows = []
    for name in names:
        cases = [c["engines"][name] for c in r["cases"].values() if name in c["engines"]]
        ttfm = [np.median(c["first_mask_s"]) for c in cases if c.get("first_mask_s")]
        compile_s = [np.median(c["compile_s"]) for c in cases if c.get("compile_s")]
        memory = [c["memory_bytes"] for c in cases if "memory_bytes" in c]
        failures = [short_error(c["error"]) for c in cases if "error" in c]
        prep = r["preprocessing"].get(name, {})
        if name == "ours":
            parts = {k: np.median(v, axis=0) for k, v in r["preprocessing"]["ours_parts"].items()}
            prep_cell = ", ".join(f"{k} {ms(np.median(prep[k]))} (bytes {ms(p[0])} + trie {ms(p[1])})"
                                  for k, p in parts.items())
        else:
            prep_cell = ms(np.median(prep["setup"])) if prep else "—"
        tok = r["per_token"][name].get("common") or {}
        rows.append([
            name, prep_cell,
            f"{ms(np.median(compile_s))} ({ms(max(compile_s))})" if compile_s else "—",
            f"{ms(np.median(ttfm))} ({ms(max(ttfm))})" if ttfm else "—",
            sum(t > 1.0 for t in ttfm),
            us(tok.get("mean")), us(tok.get("p50")), us(tok.get("p99")), us(tok.get("max")),
            f"{mib(np.median(memory))} ({mib(max(memory))})" if memory else "—",
            ", ".join(f"{failures.count(k)} {k}" for k in sorted(set(failures))) or "none",
        ])
    return rows


def vocab_markdown(vocab_name, r):
    common = r["per_token"]["common_cases"]
    lines = [f"### {vocab_name} (V = {r['size']}, EOS {r['eos']})", ""]
    if r["unavailable"]:
        lines += ["Not run: " + "; ".join(f"{k}: {v}" for k, v in r["unavailable"].items()), ""]
    lines += [
        f"Per-token columns: all steps of the {len(common)} regexes that every engine completed. "
        "Times in ms unless marked µs; (max) is the slowest regex; memory in MiB.",
        "",
        table(["engine", "vocab preprocessing ms", "compile median (max)", "ttfm median (max)", "ttfm > 1 s",
               "µs/token mean", "p50", "p99", "max", "memory median (max)", "failed regexes"],
              engine_summary_rows(r)),
        "",
    ]
    names = [n for n in ENGINE_NAMES if n in r["per_token"]]
    rows = []
    for case_name, c in r["cases"].items():
        ttfm, per_token = [], []
        for name in names:
            e = c["engines"].get(name, {})
            if "error" in e and not e.get("first_mask_s"):
                ttfm.append(short_error(e["error"]))
            else:
                ttfm.append(ms(np.median(e["first_mask_s"])))
            if "per_token_us" in e:
                per_token.append(f"{us(e['per_token_us']['mean'])} / {us(e['per_token_us']['p99'])}")
            else:
                per_token.append(short_error(e.get("error", "error")))
        ours = c["engines"].get("ours", {})
        rows.append([case_name, c["dfa_states"], f"{c['sequences']} / {c['steps']}", *ttfm, *per_token,
                     mib(ours.get("memory_bytes"))])
    lines += [
        "Per regex: ttfm in ms (median); per-token mean / p99 in µs (median run); ours' memory in MiB.",
        "",
        table(["regex", "states", "seqs / steps", *(f"ttfm {n}" for n in names), *(f"µs/token {n}" for n in names),
               "ours MiB"], rows),
    ]
    if "apply" in r:
        a, p = r["apply"], r.get("processor_us", {})
        lines += [
            "",
            table(["MLX, V = " + str(a["width"]), "median µs", "p99 µs", "mean µs", "max µs"], [
                ["`logits + bias` (cached 0/-inf vector)", us(a["add"]["p50"]), us(a["add"]["p99"]),
                 us(a["add"]["mean"]), us(a["add"]["max"])],
                ["`mx.where(mask, logits, -inf)` (cached bool mask)", us(a["where"]["p50"]), us(a["where"]["p99"]),
                 us(a["where"]["mean"]), us(a["where"]["max"])],
                *([label, us(p[kind]["p50"]), us(p[kind]["p99"]), us(p[kind]["mean"]), us(p[kind]["max"])]
                  for kind, label in (("new", "our processor call, a new processor per sequence"),
                                      ("replayed", "our processor call, the same processor replayed"))
                  if kind in p),
            ]),
        ]
    errors = [(case_name, name, e["error"]) for case_name, c in r["cases"].items()
              for name, e in c["engines"].items() if "error" in e]
    if errors:
        lines += ["", "Failures: " + "; ".join(f"{n} on `{c}`: {msg[:160]}" for c, n, msg in errors) + "."]
    return lines


def targets_markdown(results):
    vocab_name = "llama3" if "llama3" in results["vocabs"] else next(iter(results["vocabs"]))
    r = results["vocabs"][vocab_name]
    if "ours" not in r["per_token"]:
        return "Not measured (ours was not run)."
    tok = r["per_token"]["ours"]["all"]
    cases = [c["engines"]["ours"] for c in r["cases"].values() if "first_mask_s" in c["engines"]["ours"]]
    ttfm = [np.median(c["first_mask_s"]) for c in cases]
    ours = {
        "per-token mask median": tok["p50"] / 1e6,
        "per-token mask mean": tok["mean"] / 1e6,
        "per-token mask p99": tok["p99"] / 1e6,
        "per-token mask max": tok["max"] / 1e6,
        "time to first mask, median over regexes": float(np.median(ttfm)),
        "time to first mask, slowest regex": float(max(max(c["first_mask_s"]) for c in cases)),
        "vocabulary preprocessing, cold": float(np.median(r["preprocessing"]["ours"]["cold"])),
        "vocabulary preprocessing, from disk cache": float(np.median(r["preprocessing"]["ours"]["warm"])),
        "MLX apply (logits + cached bias), median": r["apply"]["add"]["p50"] / 1e6,
        "memory per compiled regex, largest": max(c["memory_bytes"] for c in cases if "memory_bytes" in c),
    }
    rows = []
    for key, target in TARGETS.items():
        value = ours[key]
        if "memory" in key:
            cells = f"≤ {mib(target)} MiB", f"{mib(value)} MiB"
        elif target < 1e-3:
            cells = f"≤ {us(target * 1e6)} µs", f"{us(value * 1e6)} µs"
        else:
            cells = f"≤ {ms(target)} ms", f"{ms(value)} ms"
        rows.append([key, *cells, "yes" if value <= target else "**no**"])
    return (f"{vocab_name}, ours; per-token figures over every step of all {len(cases)} regexes (median run).\n\n"
            + table(["target", "target value", "ours", "met?"], rows))


# Written by hand from minimal patterns; the versions are named, since a new one may behave otherwise.
DIFFERENCES_EXPLAINED = r"""What the differences come from (established by hand with llguidance 1.9.1, xgrammar 0.2.9 and
outlines-core 0.2.14 on minimal patterns; re-check them when the versions change):

- **llguidance** allows a subset of ours, and only where our output is forced (one byte string must
  come next, e.g. `{"name": "` at the start of `json_object`, or `ptember` after `se` in `words50`):
  there it allows only the first token of the tokenizer's own encoding of the forced text (`{"`, not
  `{`), where ours allows every token that spells a prefix of it. It still consumes the other tokens
  (it refused none of the sequences). A design choice (canonical tokens for forced text), not a
  wrong mask on either side.
- **xgrammar** allows special tokens (`<|begin_of_text|>`, `<|im_start|>`, Llama 3's reserved
  tokens...) wherever their literal text matches the regex, e.g. inside `[^"\\]*` or
  `[^\n]{0,200}`: its `TokenizerInfo` counts as special only the tokens that decode to an empty
  string, and reports none for these tokenizers. And its `.` matches a newline, which Python's does
  not: hence the `\n...` tokens it allows after a backslash in `json_string`.
- **outlines-core** refuses valid continuations: from a state where the match could end, it drops
  every token that leads to a state where it could not (`a(bb)?` after `a` allows only EOS; so do
  `-12` before `.5`, `20:17` before `:59`, `#ff8` before `800`, `1.2.3` before `-rc`, a host before
  `:8080`, a first list item before the second, and a byte that starts a multi-byte character in
  `[^\n]{0,200}`). Its sequences stop at the first token it refuses. Its `Guide` also has no
  transition on EOS; its adapter ends a sequence there instead, as outlines itself does.
"""


def crosscheck_markdown(results):
    rows, details = [], []
    for vocab_name, r in results["vocabs"].items():
        for peer in ENGINE_NAMES[1:]:
            checks = {case: c["crosscheck"][peer] for case, c in r["cases"].items() if peer in c["crosscheck"]}
            if not checks:
                continue
            differing = {case: x for case, x in checks.items() if x["differing_steps"] or x["rejections"]}
            rows.append([vocab_name, peer, len(checks), sum(x["steps"] for x in checks.values()),
                         sum(x["differing_steps"] for x in checks.values()),
                         ", ".join(differing) or "none",
                         sum(len(x["rejections"]) for x in checks.values())])
            for case, x in differing.items():
                details.append(f"- {vocab_name}, {peer}, `{case}`: {x['differing_steps']} of {x['steps']} steps differ "
                               f"({x['forced_steps']} of them where our output is forced); distinct tokens allowed "
                               f"by ours only: {x['ours_only_tokens']}, by {peer} only: {x['peer_only_tokens']}.")
                for side, who in (("ours_only", "ours only"), ("peer_only", f"{peer} only")):
                    for kind, v in x["kinds"][side].items():
                        details.append(f"  - {who}, {v['count']} {kind}: " + ", ".join(f"`{t}`" for t in v["sample"]))
                if x["examples"]:
                    e = x["examples"][0]
                    details.append(f"  - first difference: after {e['after']!r} (sequence {e['sequence']}, "
                                   f"step {e['step']})")
                for e in x["rejections"][:2]:
                    details.append(f"  - {peer} refused `{e['token']}` at step {e['step']} of sequence {e['sequence']}: "
                                   f"{e['error'][:120]!r}")
    if not rows:
        return ["Not run."]
    out = [table(["vocab", "peer", "regexes", "steps compared", "steps differing", "regexes with differences",
                  "tokens refused"], rows)]
    if details:
        out += ["", *details]
    return out + ["", DIFFERENCES_EXPLAINED]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", nargs="+", default=["llama3", "smollm2"], choices=models.NAMES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "regex.json")
    parser.add_argument("--cases", nargs="+", choices=[c.name for c in CASES], help="a subset of the regexes")
    parser.add_argument("--engines", nargs="+", choices=ENGINE_NAMES, default=list(ENGINE_NAMES))
    parser.add_argument("--no-markdown", action="store_true", help="leave benchmarks/RESULTS.md alone")
    args = parser.parse_args()
    if "ours" not in args.engines:
        parser.error("the cross-check and the targets need ours in --engines")

    cases = [c for c in CASES if not args.cases or c.name in args.cases]
    engine_names = [n for n in ENGINE_NAMES if n in args.engines]
    results = {"machine": machine(), "versions": versions(PACKAGES), "args": vars(args) | {"out": str(args.out)},
               "vocabs": {}}
    for vocab_name in args.vocab:
        results["vocabs"][vocab_name] = bench_vocab(vocab_name, cases, engine_names, args.repeat)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=float) + "\n")
    text = markdown(results, args)
    print(text)
    if not args.no_markdown:
        replace_section(HEADING, text)
    log(f"wrote {args.out}" + ("" if args.no_markdown else " and benchmarks/RESULTS.md"))


if __name__ == "__main__":
    main()
