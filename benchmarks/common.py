"""Helpers shared by the benchmark scripts: the machine and versions, timing
summaries, rewriting one section of RESULTS.md, engines in worker processes and
the matchers that put ours and llguidance behind one interface."""

import datetime
import json
import multiprocessing
import os
import platform
import re
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python benchmarks/x.py` without installing the package
    sys.path.insert(0, str(ROOT))

RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"

from constrained.errors import ConstrainedError  # noqa: E402


def machine() -> dict:
    """CPU model, cores, RAM, OS and today's date."""
    cpu = platform.processor() or platform.machine()
    ram_gib = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        ram_gib = round(kib / 2**20, 1)
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": ram_gib,
        "os": f"{platform.system()} {platform.release()}",
        "date": datetime.date.today().isoformat(),
    }


def versions(packages) -> dict:
    """Python's version and each package's installed version (None if missing)."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def summary_us(ns) -> dict:
    """mean / p50 / p90 / p99 / max of durations given in nanoseconds, in microseconds."""
    a = np.asarray(ns, dtype=np.float64) / 1e3
    if not len(a):
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {
        "n": int(len(a)),
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
    }


def replace_section(heading: str, body: str, path: Path = RESULTS_MD) -> None:
    """Put ``heading`` + ``body`` in the markdown file at ``path`` in place of the
    section with that heading (up to the next heading of its level or above), or
    append it; the rest of the file is left as it was."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    level = len(heading.split(" ", 1)[0])
    section = f"{heading}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^{re.escape(heading)}[ \t]*\n.*?(?=^#{{1,{level}}} |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)


def write_results(out: Path, results: dict, heading: str, text: str) -> None:
    """The results as JSON at ``out``, and ``text`` as the section ``heading`` of RESULTS.md."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    replace_section(heading, text)
    log(f"wrote {out} and {RESULTS_MD.relative_to(ROOT)}")


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(header, rows) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- worker processes


class WorkerError(Exception):
    """The worker failed: its code raised, or its process died."""


class WorkerTimeout(WorkerError):
    """The worker took too long and was killed."""


def answer(conn, handlers, state):
    """A worker's loop once it is set up: answer each request (kind, *args) with
    ("ok", handlers[kind](state, *args)), or ("error", what it raised), until None."""
    for kind, *args in iter(conn.recv, None):
        try:
            conn.send(("ok", handlers[kind](state, *args)))
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


class Worker:
    """``serve(conn, *args)`` in a process of its own. ``serve`` first sends
    ("ok", setup value) or ("error", message), then answers each request
    (kind, *args) the same way until it receives None. A request that outlasts
    its timeout kills the process; the next request starts a new one."""

    def __init__(self, serve, args, setup_timeout):
        self.serve, self.args, self.setup_timeout = serve, args, setup_timeout
        self.process = None
        self.setup = self._start()

    def _start(self):
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=self.serve, args=(child, *self.args), daemon=True)
        self.process.start()
        child.close()
        try:
            return self._receive(self.setup_timeout)
        except WorkerError:
            self.stop()  # the worker ends itself when its setup fails
            raise

    def _receive(self, timeout):
        if not self.conn.poll(timeout):
            self.stop()
            raise WorkerTimeout(f"timed out (> {timeout:.0f} s)")
        try:
            status, value = self.conn.recv()
        except EOFError:
            self.process.join()
            code = self.process.exitcode
            self.stop()
            raise WorkerError(f"the worker process died (exit code {code})") from None
        if status == "error":
            raise WorkerError(value)
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


# ---------------------------------------------------------------- matchers
# An engine's matcher: mask() -> the allowed tokens as uint32 words (token t is bit
# t % 32 of word t // 32; the array is only valid until the next call),
# advance(token), which raises Rejected, and is_accepting().


class Rejected(Exception):
    """The engine refused a token of the sequence."""


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


def llguidance_tokenizer(tok, vocab):
    """llguidance's tokenizer for an mlx-lm tokenizer, with our EOS ids."""
    import llguidance.hf

    return llguidance.hf.from_tokenizer(tok._tokenizer, n_vocab=vocab.size, eos_token=sorted(vocab.eos_ids))


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
