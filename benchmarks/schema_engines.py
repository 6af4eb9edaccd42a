"""JSON Schema engines for the benchmarks: ours (constrained.json_schema) and
llguidance, each in a worker process of its own (common.Worker), so that a
compile that hangs or crashes is killed and reported instead of stopping the run.

A worker compiles one schema at a time, then follows JSON texts token by token
on the Llama 3 vocabulary: before each step it computes the full mask, and the
text's next token must be in it and be accepted; at the end the engine must be
in an accepting state.
"""

import gc
import importlib.util
import time
from functools import partial

from common import (LLGuidanceMatcher, OursMatcher, Rejected, Worker, WorkerError, WorkerTimeout, answer,
                    llguidance_tokenizer)

import constrained  # noqa: E402  (common puts the repository on sys.path)
from constrained import models  # noqa: E402
from constrained.errors import ConstrainedError  # noqa: E402

ENGINE_NAMES = ("ours", "llguidance")
VOCAB = "llama3"
SETUP_TIMEOUT = 600.0  # s: start a worker (load the tokenizer, build the engine's vocabulary)


class Refused(Exception):
    """The engine refused to compile the schema."""


class Ours:
    def __init__(self, tok, vocab):
        self.tok = tok
        vocab.trie  # the per-vocabulary work, normally from the disk cache

    def compile(self, schema):
        from constrained.json_schema import json_schema

        try:
            compiled = json_schema(schema)
            compiled.matcher(self.tok)  # builds the token index, which may refuse too
        except ConstrainedError as e:
            raise Refused(str(e)) from None
        return partial(OursMatcher, compiled, self.tok)


class LLGuidance:
    """llguidance with its default JSON options (spec semantics, flexible whitespace)."""

    def __init__(self, tok, vocab):
        self.tokenizer = llguidance_tokenizer(tok, vocab)
        self.words = (vocab.size + 31) // 32

    def compile(self, schema):
        from llguidance import LLMatcher

        try:
            grammar = LLMatcher.grammar_from_json_schema(schema)
        except ValueError as e:
            raise Refused(str(e)) from None
        matcher = LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise Refused(matcher.get_error())
        return partial(LLGuidanceMatcher, matcher, self.words)


ENGINES = {"ours": Ours, "llguidance": LLGuidance}


def unavailable(name) -> str | None:
    """Why the engine cannot run here, or None."""
    module = "constrained.json_schema" if name == "ours" else "llguidance"
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    return None


# ---------------------------------------------------------------- the worker process


def serve(conn, engine_name):
    """A worker: build one engine for the Llama 3 vocabulary, then answer
    requests (kind, *args) until None."""
    try:
        tok = models.tokenizer(VOCAB)
        vocab = constrained.vocabulary(tok)
        engine = ENGINES[engine_name](tok, vocab)
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ok", None))
    gc.freeze()  # the tokenizer and vocabulary are there for good: collections need not walk them
    state = {"engine": engine, "tok": tok, "vocab": vocab, "factory": None}
    answer(conn, HANDLERS, state)


def handle_compile(state, schema):
    """{"compile_s", "ttfm_s"} (time to first mask: compile + a matcher + its
    first mask), or {"refused": message}."""
    state["factory"] = None
    start = time.perf_counter()
    try:
        factory = state["engine"].compile(schema)
    except Refused as e:
        return {"refused": str(e)}
    compiled = time.perf_counter()
    factory().mask()
    state["factory"] = factory
    return {"compile_s": compiled - start, "ttfm_s": time.perf_counter() - start}


def handle_run(state, texts):
    """Each text followed on a fresh matcher of the compiled schema: None when the
    tokenizer cannot spell it exactly, else what follow() says."""
    out = []
    gc.disable()
    try:
        for text in texts:
            tokens = exact_tokens(state["tok"], state["vocab"], text)
            out.append(None if tokens is None else follow(state["factory"](), tokens, state["vocab"]))
    finally:
        gc.enable()
    return out


HANDLERS = {"compile": handle_compile, "run": handle_run}


def exact_tokens(tok, vocab, text) -> list[int] | None:
    """The tokenizer's encoding of ``text`` when its token bytes spell the text
    exactly (Llama 3 is byte-level: they do unless the text holds the name of a
    special token), else None."""
    ids = tok._tokenizer.encode(text, add_special_tokens=False)
    return ids if b"".join(vocab.tokens[t] for t in ids) == text.encode() else None


def follow(matcher, tokens, vocab) -> dict:
    """Feed ``tokens`` one by one, computing the full mask before each step.
    Returns "times" (ns of mask + advance per completed step), "accepted" (every
    token allowed and accepted, and an accepting state at the end) and, where a
    token was refused, "refused_at" (its step), "offset" (its byte offset in the
    text) and "token" (its bytes)."""
    times = []
    for step, token in enumerate(tokens):
        start = time.perf_counter_ns()
        words = matcher.mask()
        masked = time.perf_counter_ns()
        allowed = int(words[token >> 5]) >> (token & 31) & 1
        advancing = time.perf_counter_ns()
        if allowed:
            try:
                matcher.advance(token)
            except Rejected:
                allowed = False
        if not allowed:
            offset = sum(len(vocab.tokens[t]) for t in tokens[:step])
            return {"times": times, "accepted": False, "refused_at": step, "offset": offset,
                    "token": vocab.tokens[token]}
        times.append(masked - start + time.perf_counter_ns() - advancing)
    return {"times": times, "accepted": bool(matcher.is_accepting())}


# ---------------------------------------------------------------- the benchmark side


def start_worker(name) -> Worker:
    return Worker(serve, (name,), SETUP_TIMEOUT)


def check(worker, schema, texts, compile_timeout, run_timeout) -> dict:
    """One schema and its texts on one engine. "status" is "compiled", "refused",
    "timeout" or "crashed" (the engine raised or its process died), with "error"
    (the message's first line) unless compiled; "ttfm_s" once compiled; "runs",
    one per text (see handle_run), when the texts ran."""
    try:
        compiled = worker.call(compile_timeout, "compile", schema)
    except WorkerError as e:
        return failure(e)
    if "refused" in compiled:
        return {"status": "refused", "error": first_line(compiled["refused"])}
    result = {"status": "compiled", "ttfm_s": compiled["ttfm_s"], "compile_s": compiled["compile_s"]}
    if texts:
        try:
            result["runs"] = worker.call(run_timeout, "run", texts)
        except WorkerError as e:
            result.update(failure(e))
    return result


def failure(error: WorkerError) -> dict:
    return {"status": "timeout" if isinstance(error, WorkerTimeout) else "crashed", "error": first_line(str(error))}


def first_line(message: str) -> str:
    return (message.strip().splitlines() or [""])[0]
