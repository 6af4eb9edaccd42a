"""The engines the benchmarks compare (ours, llguidance, xgrammar, outlines-core)
behind one matcher interface, each in a worker process of its own, and the
comparison of their masks step by step.

A *language* is what an engine compiles: ("regex", pattern), ("lark", grammar
text), ("json", None), the engine's own built-in JSON grammar, or
("json_schema", schema dict). An engine that
cannot compile a kind of language raises, and the benchmark reports it as an
error for that engine.
"""

import gc
import multiprocessing
import resource
import time
from functools import partial

import numpy as np
import psutil

import common  # noqa: F401  (puts the repository on sys.path)
import constrained
from constrained import models
from constrained.dfa import from_regex
from constrained.errors import ConstrainedError

SETUP_TIMEOUT = 600.0  # s: start a worker (load the tokenizer, build the engine's vocabulary)
MAX_EXAMPLES = 3  # differing steps kept per compared pair of engines

_ASCII = {"d": "0-9", "w": "0-9A-Za-z_", "s": r" \t\n\r\f\v"}


def ascii_classes(pattern: str) -> str:
    r"""``pattern`` with ``\d``, ``\w`` and ``\s`` spelled out as ASCII classes: we read
    them as re.ASCII does, the peers and hypothesis as Unicode classes."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            escape = pattern[i + 1]
            if escape in _ASCII:
                out.append(_ASCII[escape] if in_class else f"[{_ASCII[escape]}]")
            else:
                out.append(c + escape)
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- engines
# Each engine: Engine(tok, vocab) prepares the vocabulary; compile(language) returns
# a matcher factory; memory(factory) is the compiled language's size in bytes, or
# None (then the worker reports its RSS growth). A matcher has mask() -> the allowed
# tokens as uint32 words (token t is bit t % 32 of word t // 32; the array is only
# valid until the next call) and advance(token), which raises Rejected; ours and
# llguidance's also have is_accepting().


class Rejected(Exception):
    """The engine refused a token of the sequence."""


def unsupported(engine, language):
    return ValueError(f"{engine} has no {language[0]!r} languages in this benchmark")


class Ours:
    memory_kind = "index arrays + cached masks"
    schema_options: dict = {}  # json_schema's options

    def __init__(self, tok, vocab):
        self.tok = tok
        vocab.trie, vocab.spells_every_byte  # the per-vocabulary work, normally from the disk cache

    def compile(self, language):
        kind, source = language
        if kind == "regex":
            from_regex.cache_clear()  # and a new Constraint, whose index is not cached yet
            compiled = constrained.Constraint(from_regex(source), source)
        elif kind == "lark":
            compiled = constrained.grammar(source)
        elif kind in ("json_schema", "json_schema_with_documents"):
            from constrained.json_schema import json_schema

            schema, documents = source if kind == "json_schema_with_documents" else (source, None)
            compiled = json_schema(schema, documents=documents, **self.schema_options)
        else:
            raise unsupported("ours", language)
        compiled.index(self.tok)
        return partial(OursMatcher, compiled, self.tok)

    @staticmethod
    def memory(factory):
        constraint, tok = factory.args
        if not isinstance(constraint, constrained.Constraint):
            return None
        index = constraint.index(tok)
        arrays = [a for a in vars(index).values() if isinstance(a, np.ndarray)]
        arrays += [index.dfa.transitions, index.dfa.accepting]
        arrays += [m for m in index._masks if m is not None]
        return sum(a.nbytes for a in arrays) + sum(v.nbytes for _, v in index.bias_cache.values())


class OursAnyOrder(Ours):
    """Ours with json_schema's property_order="any" (declared properties in any
    order, as far as its budget allows), where MaskBench's instances list them
    out of schema order."""

    schema_options = {"property_order": "any"}


class OursMatcher:
    def __init__(self, compiled, tok):
        self.matcher = compiled.matcher(tok)

    def mask(self):
        return self.matcher.mask()

    def advance(self, token):
        try:
            self.matcher.advance(token)
        except ConstrainedError as e:
            raise Rejected(str(e)) from None

    def is_accepting(self):
        return self.matcher.is_accepting()


class LLGuidance:
    memory_kind = "RSS growth"

    def __init__(self, tok, vocab):
        import llguidance.hf

        self.tokenizer = llguidance.hf.from_tokenizer(tok._tokenizer, n_vocab=vocab.size, eos_token=sorted(vocab.eos_ids))
        self.words = (vocab.size + 31) // 32

    def compile(self, language):
        from llguidance import LLMatcher

        kind, source = language
        if kind == "regex":
            grammar = LLMatcher.grammar_from_regex(ascii_classes(source))
        elif kind == "lark":
            grammar = LLMatcher.grammar_from_lark(source)
        elif kind == "json":
            grammar = LLMatcher.grammar_from_lark("start: %json {}")
        elif kind == "json_schema":  # with llguidance's default options: spec semantics, flexible whitespace
            grammar = LLMatcher.grammar_from_json_schema(source)
        else:
            raise unsupported("llguidance", language)
        matcher = LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return partial(LLGuidanceMatcher, matcher, self.words)

    @staticmethod
    def memory(factory):
        return None


class LLGuidanceMatcher:
    def __init__(self, template, words):
        self.matcher = template.deep_copy()
        self.words = np.zeros(words, dtype=np.uint32)
        self.pointer = self.words.ctypes.data

    def mask(self):
        self.matcher.unsafe_compute_mask_ptr(self.pointer, self.words.nbytes)
        return self.words

    def advance(self, token):
        if not self.matcher.consume_token(token):
            raise Rejected(self.matcher.get_error())

    def is_accepting(self):
        return self.matcher.is_accepting()


class XGrammar:
    memory_kind = "CompiledGrammar.memory_size_bytes"

    def __init__(self, tok, vocab):
        import xgrammar

        info = xgrammar.TokenizerInfo.from_huggingface(
            tok._tokenizer, vocab_size=vocab.size, stop_token_ids=sorted(vocab.eos_ids))
        self.compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)

    def compile(self, language):
        kind, source = language
        if kind == "regex":
            compiled = self.compiler.compile_regex(ascii_classes(source))
        elif kind == "lark":
            compiled = self.compiler.compile_lark(source)
        elif kind == "json":
            compiled = self.compiler.compile_builtin_json_grammar()
        else:
            raise unsupported("xgrammar", language)
        return partial(XGrammarMatcher, compiled)

    @staticmethod
    def memory(factory):
        return factory.args[0].memory_size_bytes


class XGrammarMatcher:
    def __init__(self, compiled):
        import xgrammar

        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.bitmask = xgrammar.allocate_token_bitmask(1, compiled.tokenizer_info.vocab_size)
        self.words = self.bitmask.numpy()[0].view(np.uint32)

    def mask(self):
        self.matcher.fill_next_token_bitmask(self.bitmask)
        return self.words

    def advance(self, token):
        if not self.matcher.accept_token(token):
            raise Rejected(f"accept_token({token}) returned False")


class OutlinesCore:
    """outlines-core's Vocabulary is built from our token bytes (its own loader
    needs the Hugging Face hub): its preprocessing time excludes reading them."""

    memory_kind = "RSS growth"

    def __init__(self, tok, vocab):
        import outlines_core

        if len(vocab.eos_ids) != 1:
            raise ValueError(f"outlines-core takes one EOS id, this vocabulary has {sorted(vocab.eos_ids)}")
        (self.eos,) = vocab.eos_ids
        tokens = {}
        for i, t in enumerate(vocab.tokens):
            if t and i != self.eos:
                tokens.setdefault(t, []).append(i)
        self.vocabulary = outlines_core.Vocabulary(self.eos, tokens)
        self.words = (vocab.size + 31) // 32

    def compile(self, language):
        import outlines_core

        kind, source = language
        if kind != "regex":
            raise unsupported("outlines-core", language)
        index = outlines_core.Index(ascii_classes(source), self.vocabulary)
        return partial(OutlinesMatcher, index, self.words, self.eos)

    @staticmethod
    def memory(factory):
        return None


class OutlinesMatcher:
    def __init__(self, index, words, eos):
        import outlines_core

        self.guide = outlines_core.Guide(index)
        self.eos = eos
        self.words = np.zeros(words, dtype=np.uint32)
        self.pointer = self.words.ctypes.data

    def mask(self):
        self.guide.write_mask_into(self.pointer, len(self.words), 4)
        return self.words

    def advance(self, token):
        if token == self.eos:  # the Guide has no transition on EOS: generation stops there
            if not self.guide.is_finished():
                raise Rejected(f"EOS ({token}) outside a final state")
            return
        try:
            self.guide.advance(token, return_tokens=False)
        except ValueError as e:
            raise Rejected(str(e)) from None


ENGINES = {"ours": Ours, "ours-any-order": OursAnyOrder, "llguidance": LLGuidance, "xgrammar": XGrammar,
           "outlines-core": OutlinesCore}


# ---------------------------------------------------------------- the worker process


def serve(conn, engine_name, vocab_name, setup_runs, handlers, memory_limit):
    """A worker: build one engine for one tokenizer (timing it), then answer
    requests (kind, *args) until None with ``handlers[kind](state, *args)``.
    With ``memory_limit`` (bytes of address space), an engine that blows up
    raises MemoryError instead of exhausting the machine."""
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    try:
        tok = models.tokenizer(vocab_name)
        vocab = constrained.vocabulary(tok)
        setup = []
        for _ in range(setup_runs):
            gc.collect()
            start = time.perf_counter()
            engine = ENGINES[engine_name](tok, vocab)
            setup.append(time.perf_counter() - start)
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ok", setup))
    gc.freeze()  # the tokenizer and vocabulary stay: gc.collect() need not walk them (0.4 s on Llama 3)
    state = {"engine": engine, "vocab": vocab, "factory": None}
    for kind, *args in iter(conn.recv, None):
        try:
            conn.send(("ok", handlers[kind](state, *args)))
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


def handle_compile(state, language):
    """(compile s, time to first mask s) of one fresh compile, kept as the
    state's matcher factory."""
    state["factory"] = None
    gc.collect()
    start = time.perf_counter()
    factory = state["engine"].compile(language)
    compiled = time.perf_counter()
    factory().mask()
    state["factory"] = factory
    return compiled - start, time.perf_counter() - start


def handle_run(state, language, sequences, repeat, budget=None):
    """``repeat`` runs over the sequences (see step_times), each with a fresh
    compile whose matchers follow the sequences one after the other: the
    per-token times (ns) of each run; the last run's refusals, mask misses and
    number of sequences run; the memory of the compiled language after it."""
    engine = state["engine"]
    runs = []
    for r in range(repeat):
        state["factory"] = None
        gc.collect()
        rss_before = psutil.Process().memory_info().rss
        factory = state["factory"] = engine.compile(language)
        run = step_times(factory, sequences, budget)
        if r == 0:
            rss_growth = psutil.Process().memory_info().rss - rss_before
        runs.append(run.pop("times"))
    memory = engine.memory(factory)
    return run | {
        "runs": runs,
        "memory": memory if memory is not None else rss_growth,
        "memory_kind": engine.memory_kind,
    }


def step_times(factory, sequences, budget=None) -> dict:
    """Follows the sequences, timing mask + advance at every step. Returns "times"
    (ns); "rejected": (sequence, step, token, error) where the engine refused a
    token, which ends that sequence; "mask_misses": (sequence, step, token) where
    the engine took a token its mask did not allow (checked outside the timing;
    the sequence goes on); "sequences_run": all, or those started within
    ``budget`` s."""
    times, rejected, mask_misses = [], [], []
    deadline = None if budget is None else time.perf_counter() + budget
    ran = 0
    gc.disable()
    try:
        for i, sequence in enumerate(sequences):
            if deadline is not None and time.perf_counter() > deadline:
                break
            ran += 1
            matcher = factory()
            for step, token in enumerate(sequence):
                start = time.perf_counter_ns()
                words = matcher.mask()
                try:
                    matcher.advance(token)
                except Rejected as e:
                    rejected.append((i, step, token, str(e)))
                    break
                times.append(time.perf_counter_ns() - start)
                if not (int(words[token >> 5]) >> (token & 31)) & 1:
                    mask_misses.append((i, step, token))
    finally:
        gc.enable()
    return {"times": np.array(times, dtype=np.int64), "rejected": rejected, "mask_misses": mask_misses,
            "sequences_run": ran}


def handle_check(state, sequences):
    """For each sequence, the masks at each step (uint32 words) and the error that
    cut it short, if a token was refused."""
    out = []
    for sequence in sequences:
        matcher = state["factory"]()
        masks, rejected = [], None
        for token in sequence:
            masks.append(matcher.mask().copy())
            try:
                matcher.advance(token)
            except Rejected as e:
                rejected = str(e)
                break
        out.append((np.array(masks).reshape(len(masks), -1), rejected))
    return out


HANDLERS = {"compile": handle_compile, "run": handle_run, "check": handle_check}


class EngineError(Exception):
    """The engine failed: it raised, its worker died, or it took too long."""


class Worker:
    """One engine for one tokenizer in its own process, answering HANDLERS and the
    benchmark's own ``handlers`` (module-level functions (state, *args)). A
    request that outlasts its timeout kills the process; the next request starts
    a new one."""

    def __init__(self, engine_name, vocab_name, setup_runs, handlers=None, memory_limit=None):
        self.args = (engine_name, vocab_name, setup_runs, HANDLERS | (handlers or {}), memory_limit)
        self.process = None
        self.setup = self._start()

    def _start(self):
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, *self.args), daemon=True)
        self.process.start()
        child.close()
        try:
            return self._receive(SETUP_TIMEOUT)
        except EngineError:
            self.stop()  # the worker ends itself when its engine cannot be built
            raise

    def _receive(self, timeout):
        if not self.conn.poll(timeout):
            self.stop()
            raise EngineError(f"timed out (> {timeout:.0f} s)")
        try:
            status, value = self.conn.recv()
        except EOFError:
            self.process.join()
            code = self.process.exitcode
            self.stop()
            raise EngineError(f"the worker process died (exit code {code})") from None
        if status == "error":
            raise EngineError(value)
        return value

    def call(self, timeout, *request):
        if self.process is None:
            self._start()
        self.conn.send(request)
        return self._receive(timeout)

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.process = None

    def close(self):
        if self.process is not None:
            self.conn.send(None)
            self.process.join(10)
            self.stop()


def time_compiles(worker, language, timeout, runs, budget):
    """Compile and first-mask times (s) of up to ``runs`` fresh compiles, fewer
    once they take ``budget`` s together; one over ``timeout`` raises EngineError."""
    compile_s, first_mask_s = [], []
    while len(compile_s) < runs and sum(first_mask_s) < budget:
        c, f = worker.call(timeout, "compile", language)
        compile_s.append(c)
        first_mask_s.append(f)
    return {"compile_s": compile_s, "first_mask_s": first_mask_s}


# ---------------------------------------------------------------- cross-check


def unpack(words, size):
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:size].astype(bool)


def token_kind(vocab, t):
    """EOS, special (no bytes), partial UTF-8 or text."""
    data = vocab.tokens[t]
    if t in vocab.eos_ids:
        return "EOS"
    if not data:
        return "special (no bytes)"
    try:
        data.decode()
        return "text"
    except UnicodeDecodeError:
        return "partial UTF-8"


def show_tokens(tok, vocab, ids, limit=5):
    """Token ids with their bytes, or their name for those without bytes."""
    return [f"{t} {vocab.tokens[t]!r}" if vocab.tokens[t] else f"{t} {tok._tokenizer.convert_ids_to_tokens(int(t))}"
            for t in ids[:limit]]


def forced_count(compiled, tok, sequence, steps):
    """At how many of ``steps`` (increasing) our output is forced along ``sequence``:
    one byte string must come next."""
    matcher, done, count = compiled.matcher(tok), 0, 0
    for k in steps:
        for t in sequence[done:k]:
            matcher.advance(t)
        done = k
        count += bool(matcher.forced())
    return count


def compare(ours, peer, sequences, compiled, tok, vocab):
    """Where a peer's allowed tokens differ from ours, step by step (and how many
    of those steps are where our output is forced), and the tokens of the
    sequences it refused."""
    steps = differing_steps = forced_steps = 0
    ours_only, peer_only = set(), set()
    examples, rejections = [], []
    for i, ((mine, _), (theirs, rejected)) in enumerate(zip(ours, peer)):
        n = min(len(mine), len(theirs))
        steps += n
        differing = []
        for k in np.flatnonzero((mine[:n] != theirs[:n]).any(axis=1)):
            a, b = unpack(mine[k], vocab.size), unpack(theirs[k], vocab.size)
            only_a, only_b = np.flatnonzero(a & ~b), np.flatnonzero(b & ~a)
            if not (len(only_a) or len(only_b)):
                continue  # padding bits past the vocabulary
            differing.append(int(k))
            ours_only.update(only_a.tolist())
            peer_only.update(only_b.tolist())
            if len(examples) < MAX_EXAMPLES:
                examples.append({
                    "sequence": i, "step": int(k),
                    "after": b"".join(vocab.tokens[t] for t in sequences[i][:k]).decode(errors="replace"),
                    "ours_only": {"count": len(only_a), "tokens": show_tokens(tok, vocab, only_a)},
                    "peer_only": {"count": len(only_b), "tokens": show_tokens(tok, vocab, only_b)},
                })
        differing_steps += len(differing)
        if differing:
            forced_steps += forced_count(compiled, tok, sequences[i], differing)
        if rejected is not None:
            k = len(theirs) - 1
            token = sequences[i][k]
            rejections.append({"sequence": i, "step": k, "token": show_tokens(tok, vocab, [token])[0],
                               "error": rejected[:200]})
    kinds = {}  # side -> kind of token -> how many distinct tokens, and a few of them
    for side, ids in (("ours_only", ours_only), ("peer_only", peer_only)):
        by_kind = {}
        for t in sorted(ids):
            by_kind.setdefault(token_kind(vocab, t), []).append(t)
        kinds[side] = {k: {"count": len(v), "sample": show_tokens(tok, vocab, v, 4)} for k, v in by_kind.items()}
    return {
        "steps": steps,
        "differing_steps": differing_steps,
        "forced_steps": forced_steps,
        "ours_only_tokens": len(ours_only),
        "peer_only_tokens": len(peer_only),
        "kinds": kinds,
        "examples": examples,
        "rejections": rejections,
    }


