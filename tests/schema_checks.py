"""How the JSON Schema tests check instances: serialized with json.dumps
defaults and fed token by token on a real vocabulary, the mask computed before
each token, as the MaskBench harness does."""

import itertools
import json
import math
import re

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


def check(tokenizer, schema, tests, orders=0, documents=None) -> tuple[str | None, list[dict], list[dict]]:
    """(the compile error's message, or None when ``schema`` compiled; the invalid
    tests accepted; the valid ones rejected) for ``tests``, a list of
    {"description", "data", "valid"}. With ``orders``, a rejected test gets
    "in_another_order": whether the instance is taken with its objects' members
    in one of that many other orders (json_schema writes declared properties in
    schema order). ``documents`` go to json_schema."""
    try:
        compiled = json_schema(schema, documents=documents)
        compiled.matcher(tokenizer)  # the token index may refuse too
    except ConstrainedError as e:
        return str(e), [], []
    accepted, rejected = [], []
    for test in tests:
        if takes(compiled, tokenizer, test["data"]) == test["valid"]:
            continue
        if test["valid"]:
            others = itertools.islice(member_orders(test["data"]), 1, orders + 1)  # the first is the one rejected
            rejected.append(test | {"in_another_order": any(takes(compiled, tokenizer, d) for d in others)})
        else:
            accepted.append(test)
    return None, accepted, rejected


def takes(compiled, tokenizer, data) -> bool:
    """Whether a fresh matcher of ``compiled`` takes ``json.dumps(data)``."""
    return accepts(compiled.matcher(tokenizer), encode_exact(tokenizer, json.dumps(data)))


def member_orders(value, width=6):
    """``value`` with the members of its objects in other orders, its own first:
    every order of each object's members, with up to ``width`` variants of each
    member's value."""
    def variants(child):
        return list(itertools.islice(member_orders(child, width), width))

    if isinstance(value, dict):
        for order in itertools.permutations(value):
            for values in itertools.product(*(variants(value[k]) for k in order)):
                yield dict(zip(order, values))
    elif isinstance(value, list):
        yield from map(list, itertools.product(*map(variants, value)))
    else:
        yield value


def show(tests) -> list[str]:
    return [f"{test['description']}: {json.dumps(test['data'])[:300]}" for test in tests]


def exact_float(text: str):
    """A JSON number with a fraction or exponent, read so that jsonschema judges
    its value: Python's float reads 1e400 as inf, which is no integer, and 1e-400
    as 0; outside float's range this returns a number of the same sign beyond
    every bound a schema writes as a float (an integer, as every number of that
    size written with a short mantissa is)."""
    value = float(text)
    if math.isinf(value):
        return 10**400 if value > 0 else -10**400
    if value == 0 and any(digit in "123456789" for digit in re.split("[eE]", text)[0]):
        return math.copysign(5e-324, value)
    return value
