"""Helpers shared by the benchmark scripts: the machine and versions, test
strings and their tokens, timing summaries, number formats, and rewriting one
section of RESULTS.md."""

import datetime
import json
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


def forget_stored_tables() -> None:
    """Delete the terminal token tables our engine keeps in its cache directory
    (constrained/grammar_index.py), so that a run's compile times include
    building them; the tables built during the run are kept for the rest of it."""
    import shutil

    from constrained.models import cache_dir

    shutil.rmtree(cache_dir() / "tables", ignore_errors=True)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def draws(strategy, n: int) -> list:
    """``n`` examples of a hypothesis strategy, derandomized: the same on every run
    (of one hypothesis version)."""
    from hypothesis import HealthCheck, Phase, given, settings

    out = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(example):
        out.append(example)

    draw()
    return out


def exact_tokens(tok, vocab, text: str) -> list[int] | None:
    """The tokenizer's encoding of ``text`` if its tokens' bytes spell ``text``
    exactly (byte-level BPE always does; SentencePiece adds a leading space), else
    None."""
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return None
    ids = list(tok._tokenizer.encode(text, add_special_tokens=False))
    return ids if b"".join(vocab.tokens[t] for t in ids) == data else None


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


def median_run(runs):
    """The run whose mean is the median of the runs' means."""
    means = [r.mean() if len(r) else 0.0 for r in runs]
    return runs[int(np.argsort(means)[len(means) // 2])]


def ms(seconds):
    return "—" if seconds is None else f"{seconds * 1e3:.1f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def us(micro):
    return "—" if micro is None else f"{micro:.1f}" if micro < 100 else f"{micro:.0f}"


def mib(n):
    return "—" if n is None else f"{n / 2**20:.2f}"


def short_error(message):
    """timeout, crash or error, from an EngineError's message."""
    return "timeout" if message.startswith("timed out") else "crash" if "died" in message else "error"


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


def table(header, rows) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
