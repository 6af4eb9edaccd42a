"""JSON Schema on the engines of engines.py (ours and llguidance), for
bench_maskbench.py and bench_schema_suite.py: each engine in a worker process of
its own, so that a compile that hangs or crashes is killed and reported instead
of stopping the run.

A worker compiles one schema at a time, then follows token sequences (JSON
texts on the Llama 3 vocabulary): before each step it computes the full mask,
and the next token must be in it and be accepted; at the end the engine must be
in an accepting state.
"""

import gc
import importlib.util
import time

import engines
from common import exact_tokens, short_error
from engines import EngineError, Rejected, Worker

from constrained.errors import ConstrainedError  # noqa: E402  (common puts the repository on sys.path)

ENGINE_NAMES = ("ours", "llguidance")  # run by default
ENGINE_CHOICES = ("ours", "ours-any-order", "llguidance")  # engines.OursAnyOrder on request
VOCAB = "llama3"
MEMORY_LIMIT = 8 << 30  # bytes of address space per worker: a compile that blows up crashes alone


def unavailable(name) -> str | None:
    """Why the engine cannot run here, or None."""
    module = "constrained.json_schema" if name.startswith("ours") else "llguidance"
    return f"{module} is not installed" if importlib.util.find_spec(module) is None else None


# ---------------------------------------------------------------- in the worker


def handle_schema_compile(state, schema, documents=None):
    """{"compile_s", "ttfm_s"} (time to first mask: compile + a matcher + its
    first mask), or {"refused": message} when the engine refuses the schema:
    ours with a ConstrainedError, llguidance with a ValueError (its only error).
    ``documents`` (ours only) are the other schema documents by URI."""
    refusal = ConstrainedError if isinstance(state["engine"], engines.Ours) else ValueError
    language = ("json_schema", schema) if documents is None else ("json_schema_with_documents", (schema, documents))
    try:
        compile_s, ttfm_s = engines.handle_compile(state, language)
    except refusal as e:
        return {"refused": str(e)}
    return {"compile_s": compile_s, "ttfm_s": ttfm_s}


def handle_follow(state, sequences):
    """follow() for each sequence, on fresh matchers of the compiled schema."""
    gc.disable()
    try:
        return [follow(state["factory"](), tokens) for tokens in sequences]
    finally:
        gc.enable()


HANDLERS = {"schema_compile": handle_schema_compile, "follow": handle_follow}


def follow(matcher, tokens) -> dict:
    """Feed ``tokens`` one by one, computing the full mask before each step.
    Returns "times" (ns of mask + advance per completed step; the mask check
    between them is not timed), "accepted" (every token in the mask and accepted,
    and an accepting state at the end) and, where a token was refused,
    "refused_at" (its step)."""
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
            return {"times": times, "accepted": False, "refused_at": step}
        times.append(masked - start + time.perf_counter_ns() - advancing)
    return {"times": times, "accepted": bool(matcher.is_accepting())}


# ---------------------------------------------------------------- in the benchmark


def start_worker(name) -> Worker:
    return Worker(name, VOCAB, 1, HANDLERS, MEMORY_LIMIT)


def tokenize(tok, vocab, texts) -> list[list[int] | None]:
    """Each text's tokens, or None where the tokenizer cannot spell it exactly
    (Llama 3 is byte-level: only text holding a special token's name)."""
    return [exact_tokens(tok, vocab, text) for text in texts]


def check(worker, schema, sequences, compile_timeout, run_timeout, documents=None) -> dict:
    """One schema (with the other ``documents`` its $refs name, for
    handle_schema_compile) and its token sequences (None: skipped) on one engine. "status"
    is "compiled", "refused", "timeout" or "crashed" (the engine raised or its
    process died), with "error" (the message's first line) unless compiled;
    "compile_s" and "ttfm_s" once compiled; "runs", one per sequence (None where
    skipped, else what follow() says), when they ran."""
    try:
        compiled = worker.call(compile_timeout, "schema_compile", schema, documents)
    except EngineError as e:
        return failure(worker, e)
    if "refused" in compiled:
        return {"status": "refused", "error": first_line(compiled["refused"])}
    result = {"status": "compiled", **compiled}
    todo = [s for s in sequences if s is not None]
    if todo:
        try:
            runs = iter(worker.call(run_timeout, "follow", todo))
        except EngineError as e:
            return result | failure(worker, e)
        result["runs"] = [None if s is None else next(runs) for s in sequences]
    else:
        result["runs"] = [None] * len(sequences)
    return result


def failure(worker, error: EngineError) -> dict:
    """The status and error of a failed request; the worker is restarted for the
    next one (after a MemoryError, say, the engine's caches may be half built)."""
    worker.stop()
    kind = short_error(str(error))
    return {"status": "timeout" if kind == "timeout" else "crashed", "error": first_line(str(error))}


def first_line(message: str) -> str:
    return (message.strip().splitlines() or [""])[0]
