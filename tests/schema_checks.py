"""How the JSON Schema tests check instances: serialized with json.dumps
defaults and fed token by token on a real vocabulary, the mask computed before
each token, as the MaskBench harness does."""

import json

from constrained import ConstrainedError
from constrained.json_schema import json_schema
from conftest import encode_exact


def accepts(matcher, tokens) -> bool:
    """Whether ``matcher`` takes ``tokens``: each one in the mask computed before
    it, and an accepting state at the end. Where the mask refuses a token,
    advance() must refuse it too."""
    for token in tokens:
        if not int(matcher.mask()[token >> 5]) >> (token & 31) & 1:
            try:
                matcher.advance(token)
            except ConstrainedError:
                return False
            raise AssertionError(f"advance() took token {token}, which the mask refused")
        matcher.advance(token)
    return matcher.is_accepting()


def check(tokenizer, schema, tests) -> tuple[str | None, list[str], list[str]]:
    """(the compile error's message, or None when ``schema`` compiled; the invalid
    instances accepted; the valid ones rejected) for ``tests``, a list of
    {"description", "data", "valid"}."""
    try:
        compiled = json_schema(schema)
        compiled.matcher(tokenizer)  # the token index may refuse too
    except ConstrainedError as e:
        return str(e), [], []
    accepted, rejected = [], []
    for test in tests:
        text = json.dumps(test["data"])
        if accepts(compiled.matcher(tokenizer), encode_exact(tokenizer, text)) != test["valid"]:
            (rejected if test["valid"] else accepted).append(f"{test['description']}: {text[:300]}")
    return None, accepted, rejected
