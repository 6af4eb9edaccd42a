"""The JSON Schema Test Suite, draft 2020-12 (issue 4), as the jsonschema sdist
ships it (tests/schema_suite.py fetches it once), on the Llama 3 vocabulary.

Core: every schema either compiles into a constraint that accepts each valid
instance and rejects each invalid one, or is refused with a ConstrainedError.
optional/format: no invalid instance is ever accepted (a format may be checked
more loosely than the suite wants only by refusing the schema)."""

from functools import cache

import pytest

from schema_checks import check
from schema_suite import groups, suite_root

SUITE = {part: groups(suite_root(), part) for part in ("core", "format")}

# Measured with json_schema at <commit> (of 368 core groups, of 22 format groups), less some slack:
# refusing more schemas than that is a regression too.
MIN_CORE_PASSING = 0
MIN_FORMAT_COMPILED = 0


def ids(part):
    seen = {}
    out = []
    for file, _ in SUITE[part]:
        seen[file] = seen.get(file, -1) + 1
        out.append(f"{file}-{seen[file]}")
    return out


@cache
def outcome(tokenizer, part, index):
    _, group = SUITE[part][index]
    return check(tokenizer, group["schema"], group["tests"])


@pytest.mark.parametrize("index", range(len(SUITE["core"])), ids=ids("core"))
def test_core_group(tokenizers, index):
    refused, accepted, rejected = outcome(tokenizers("llama3"), "core", index)
    assert not accepted, f"{SUITE['core'][index][1]['description']}: invalid instances accepted: {accepted}"
    assert not rejected, f"{SUITE['core'][index][1]['description']}: valid instances rejected: {rejected}"


@pytest.mark.parametrize("index", range(len(SUITE["format"])), ids=ids("format"))
def test_format_group_accepts_no_invalid_instance(tokenizers, index):
    refused, accepted, _ = outcome(tokenizers("llama3"), "format", index)
    assert not accepted, f"{SUITE['format'][index][1]['description']}: invalid instances accepted: {accepted}"


def test_most_of_the_suite_compiles(tokenizers):
    results = {part: [outcome(tokenizers("llama3"), part, i) for i in range(len(SUITE[part]))] for part in SUITE}
    passing = sum(refused is None and not accepted and not rejected for refused, accepted, rejected in results["core"])
    compiled = sum(refused is None for refused, _, _ in results["format"])
    assert passing >= MIN_CORE_PASSING, f"{passing} of {len(SUITE['core'])} core groups pass"
    assert compiled >= MIN_FORMAT_COMPILED, f"{compiled} of {len(SUITE['format'])} format groups compile"
