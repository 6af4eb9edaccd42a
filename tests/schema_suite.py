"""The official JSON Schema Test Suite (json-schema-org/JSON-Schema-Test-Suite,
MIT), draft 2020-12 and the remote documents its tests refer to, as the
jsonschema sdist on PyPI ships it (folder json/): fetched once with pip into the
cache directory, so that the tests run on a fresh clone. The benchmarks read it
through this module too."""

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from constrained import models

SDIST = "jsonschema==4.26.0"
SUITE_IN_SDIST = "jsonschema-4.26.0/json/"
DRAFT = "tests/draft2020-12"
REMOTES = "remotes"  # documents the suite serves at REMOTES_URI
REMOTES_URI = "http://localhost:1234/"
PARTS = {"core": "*.json", "format": "optional/format/*.json"}  # part -> files of the draft's folder


def suite_root() -> Path:
    """The suite's folder (LICENSE, remotes/, tests/draft2020-12/...) from the
    jsonschema sdist, fetched into the cache directory on first use."""
    root = models.cache_dir() / f"json-schema-test-suite-{SDIST.split('==')[1]}"
    if not ((root / DRAFT).is_dir() and (root / REMOTES).is_dir()):
        _fetch(root)
    return root


def _fetch(root: Path) -> None:
    """Download the sdist and extract the license, the remote documents and the
    draft's tests into ``root``, each folder renamed into place whole so that an
    interrupted fetch leaves no half of one (the tests last: they mark the fetch done)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".download-") as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   "--disable-pip-version-check", "--quiet", "--dest", tmp, SDIST]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed:\n{result.stderr.strip()}")
        (archive,) = Path(tmp).glob("*.tar.gz")
        wanted = (SUITE_IN_SDIST + DRAFT + "/", SUITE_IN_SDIST + REMOTES + "/", SUITE_IN_SDIST + "LICENSE")
        with tarfile.open(archive) as sdist:
            members = [m for m in sdist if m.isfile() and m.name.startswith(wanted)]
            if not any(m.name.endswith(".json") for m in members):
                raise RuntimeError(f"{archive.name} has no {SUITE_IN_SDIST + DRAFT}")
            sdist.extractall(tmp, members, filter="data")
        root.mkdir(exist_ok=True)
        for name in ("LICENSE", REMOTES, DRAFT.split("/")[0]):
            try:
                os.rename(Path(tmp) / SUITE_IN_SDIST / name, root / name)
            except OSError:  # another process put it there first
                if not (root / name).exists():
                    raise


def groups(root: Path, part: str) -> list[tuple[str, dict]]:
    """(file name without .json, group) for every test group of ``part`` ("core":
    tests/draft2020-12/*.json, "format": its optional/format/*.json), in file order.
    A group is {"description", "schema", "tests": [{"description", "data", "valid"}]}."""
    out = []
    for path in sorted((root / DRAFT).glob(PARTS[part])):
        out += [(path.stem, group) for group in json.loads(path.read_text())]
    return out


def remote_documents(root: Path) -> dict:
    """The suite's remote documents by the URI its tests use for them
    (remotes/integer.json is http://localhost:1234/integer.json), as
    ``json_schema(..., documents=...)`` takes them."""
    folder = root / REMOTES
    return {REMOTES_URI + path.relative_to(folder).as_posix(): json.loads(path.read_text())
            for path in sorted(folder.rglob("*.json"))}
