"""JSON Schema compilation against jsonschema on random schemas: nested objects
and arrays, enums and consts, bounded numbers, strings with lengths, patterns
and formats, anyOf / allOf / oneOf, boolean schemas, $defs and (recursive)
$ref. Each drawn schema comes with a strategy for values it accepts.

Both directions: random walks under the mask on the Llama 3 vocabulary end in
JSON that Draft202012Validator (with format checking) accepts, and the values
drawn for a schema, serialized by json.dumps, are accepted. A schema may be
refused only for a construct the engine documents as unsupported (a few are
drawn on purpose), with an error that names its JSON pointer."""

import json
import math
import random
import re
from datetime import UTC
from functools import cache

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from jsonschema import Draft202012Validator

import constrained
from constrained import ConstrainedError
from constrained.json_schema import json_schema
from schema_checks import exact_float

NAMES = ["id", "name", "tags", "price", "a", "b", "x-y", "é", "a b"]
OTHER_NAMES = ["other", "ids", "", "\u00e9\u00e9", "x"]  # undeclared ones
CHARACTERS = st.characters(codec="utf-8")  # no lone surrogates: json_strings leaves them out, on purpose

# Any JSON value, for the schema ``true`` and for undeclared properties.
ANY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(CHARACTERS, max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
    max_leaves=6)

# A part is (schema, strategy of values valid under it).


@st.composite
def integers(draw):
    multiple = draw(st.sampled_from([None, None, 2, 3, 10]))
    low = draw(st.integers(-50, 50))
    high = low + draw(st.integers(multiple or 0, 100))
    schema = {"type": "integer"}
    lower = draw(st.sampled_from([None, "minimum", "exclusiveMinimum"]))
    upper = draw(st.sampled_from([None, "maximum", "exclusiveMaximum"]))
    if lower:
        schema[lower] = low if lower == "minimum" else low - 1
    if upper:
        schema[upper] = high if upper == "maximum" else high + 1
    if multiple:
        schema["multipleOf"] = multiple
    step = multiple or 1
    low, high = (low if lower else -10**6), (high if upper else 10**6)
    values = st.integers(-(-low // step), high // step).map(lambda k: k * step)
    return schema, values | values.map(float)  # 3.0 is an integer too


@st.composite
def numbers(draw):
    low = draw(st.sampled_from([-100, -2.5, -1, 0, 0.1, 0.5, 3]))
    high = low + draw(st.sampled_from([1, 2.5, 10, 1000]))
    multiple = draw(st.sampled_from([None, None, 0.5, 0.25]))  # exact in binary, as jsonschema computes
    schema = {"type": "number"}
    lower = draw(st.sampled_from([None, "minimum", "exclusiveMinimum"]))
    upper = draw(st.sampled_from([None, "maximum", "exclusiveMaximum"]))
    if lower:
        schema[lower] = low
    if upper:
        schema[upper] = high
    if multiple:
        schema["multipleOf"] = multiple
        k_low = (math.floor(low / multiple) + 1 if lower == "exclusiveMinimum" else math.ceil(low / multiple)) \
            if lower else -4000
        k_high = (math.ceil(high / multiple) - 1 if upper == "exclusiveMaximum" else math.floor(high / multiple)) \
            if upper else 4000
        return schema, st.integers(k_low, k_high).map(lambda k: k * multiple)
    return schema, st.floats(low if lower else -1e300, high if upper else 1e300, exclude_min=lower == "exclusiveMinimum",
                             exclude_max=upper == "exclusiveMaximum")


# ECMA-262 patterns (unanchored, as JSON Schema reads them) and Python regexes of strings they match.
PATTERNS = [
    ("^[a-z]{2,5}$", r"[a-z]{2,5}", True),
    ("^[A-Z]{3}-[0-9]{4}$", r"[A-Z]{3}-[0-9]{4}", True),
    ("^(red|green|blue)$", r"red|green|blue", True),
    ("^\\+?[0-9]{7,12}$", r"\+?[0-9]{7,12}", True),
    ("^#[0-9a-fA-F]{6}$", r"#[0-9a-fA-F]{6}", True),
    ("^[a-z0-9_]+$", r"[a-z0-9_]{1,20}", True),
    ("[0-9]{2}", r"[0-9]{2}", False),
    ("ab|cd", r"ab|cd", False),
]

FORMATS = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "date-time": st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    "email": st.from_regex(r"[a-z0-9]{1,8}(\.[a-z0-9]{1,4})?@([a-z0-9]{1,8}\.){1,2}[a-z]{2,4}", fullmatch=True),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
}


@st.composite
def length_strings(draw):
    # Up to 64 code points a string is one lexeme; longer ones are counted by grammar rules.
    low = draw(st.integers(0, 5) | st.integers(60, 80))
    high = draw(st.none() | st.integers(max(low, 1), max(low, 64)) | st.integers(max(low, 65), 200))
    schema = {"type": "string", "minLength": low} | ({"maxLength": high} if high is not None else {})
    return schema, st.text(CHARACTERS, min_size=low, max_size=high if high is not None else low + 10)


@st.composite
def strings(draw):
    kind = draw(st.sampled_from(["lengths", "pattern", "format"]))
    if kind == "lengths":
        return draw(length_strings())
    if kind == "pattern":
        pattern, values, anchored = draw(st.sampled_from(PATTERNS))
        search = st.from_regex(values, fullmatch=anchored, alphabet=CHARACTERS)
        return {"type": "string", "pattern": pattern}, search
    name = draw(st.sampled_from(sorted(FORMATS)))
    return {"type": "string", "format": name}, FORMATS[name]


ENUM_POOL = [1, 2.5, -3, "a", "é", "x y", None, True, False, [1, "a"], {"k": None}]


@st.composite
def enums(draw):
    values = draw(st.lists(st.sampled_from(ENUM_POOL), min_size=1, max_size=4, unique_by=json.dumps))
    if len(values) == 1 and draw(st.booleans()):
        return {"const": values[0]}, st.just(values[0])
    return {"enum": values}, st.sampled_from(values)


def nullable(part):
    """The part with "null" added to its type."""
    schema, values = part
    return schema | {"type": [schema["type"], "null"]}, values | st.none()


# Constructs the engine documents as unsupported: compiling them must fail, naming where they are.
REFUSED = [{"type": "string", "format": "idn-hostname"},
           {"type": "array", "items": {"type": "object", "additionalProperties": False}, "uniqueItems": True},
           {"type": "object", "anyOf": [{"properties": {f"p{k}": {}}} for k in range(13)],
            "unevaluatedProperties": False}]

supported = st.one_of(integers(), numbers(), strings(), enums(),
                      st.sampled_from([({"type": "boolean"}, st.booleans()), ({"type": "null"}, st.none()),
                                       (True, ANY_VALUE)]))
refused = st.sampled_from(REFUSED).map(lambda schema: (schema, st.nothing()))
scalars = st.sampled_from([supported] * 30 + [refused]).flatmap(lambda parts: parts)
typed = st.one_of(integers(), numbers(), strings())


@st.composite
def split(draw, part):
    """The part's keywords shared between the two schemas of an allOf."""
    schema, values = part
    keys = sorted(schema)
    first = set(draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys) - 1, unique=True)))
    return {"allOf": [{k: schema[k] for k in keys if k in first}, {k: schema[k] for k in keys if k not in first}]}, values


@st.composite
def one_of_types(draw):
    """oneOf parts of different types, so that a value of one fails the others."""
    parts = draw(st.permutations([strings(), st.just(({"type": "boolean"}, st.booleans())), integers()]))[:2]
    parts = [draw(p) for p in parts]
    return {"oneOf": [p[0] for p in parts]}, st.one_of(*(p[1] for p in parts))


@st.composite
def one_of_multiples(draw):
    """oneOf parts that overlap: multiples of one number or the other, not both."""
    a, b = draw(st.lists(st.sampled_from([2, 3, 5]), min_size=2, max_size=2, unique=True))
    schema = {"type": "integer", "oneOf": [{"multipleOf": a}, {"multipleOf": b}]}
    values = st.integers(-100, 100).flatmap(lambda k: st.sampled_from([k * a, k * b]))
    return schema, values.filter(lambda v: (v % a == 0) != (v % b == 0))


@st.composite
def combined(draw):
    kind = draw(st.sampled_from(["anyOf", "allOf", "oneOf", "nullable"]))
    if kind == "anyOf":
        parts = draw(st.lists(scalars, min_size=2, max_size=3))
        return {"anyOf": [p[0] for p in parts]}, st.one_of(*(p[1] for p in parts))
    if kind == "allOf":
        return draw(split(draw(typed.filter(lambda p: len(p[0]) > 1))))
    if kind == "oneOf":
        return draw(one_of_types() | one_of_multiples())
    return nullable(draw(typed))


@st.composite
def objects(draw, children):
    names = draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
    parts = [draw(children) for _ in names]
    required = [n for n in names if draw(st.booleans())]
    # A property no value may have can still be declared, if it is optional.
    properties = {n: False if n not in required and draw(st.integers(0, 5)) == 0 else p for n, p in zip(names, parts)}
    schema = {"type": "object", "properties": {n: p if p is False else p[0] for n, p in properties.items()}}
    if required:
        schema["required"] = required
    additional = draw(st.sampled_from(["absent", "false", "schema"]))
    extra = ANY_VALUE
    if additional == "false":
        schema["additionalProperties"] = False
    elif additional == "schema":
        schema["additionalProperties"], extra = draw(scalars)
    # Counted members, undeclared ones too (whose names the matcher keeps distinct).
    least = draw(st.integers(0, 3)) if additional != "false" else 0
    if least > 1:
        schema["minProperties"] = least

    @st.composite
    def values(draw):
        members = [(n, draw(p[1])) for n, p in properties.items()
                   if p is not False and (n in required or draw(st.booleans()))]
        if additional != "false":
            others = draw(st.lists(st.sampled_from(OTHER_NAMES), unique=True, max_size=3,
                                   min_size=max(0, least - len(members))))
            for name in others:  # undeclared members may come anywhere between the declared ones
                members.insert(draw(st.integers(0, len(members))), (name, draw(extra)))
        return dict(members)

    return schema, values()


@st.composite
def arrays(draw, children):
    items, values = draw(children)
    low = draw(st.integers(0, 2))
    high = draw(st.none() | st.integers(max(low, 1), low + 3))
    schema = {"type": "array", "items": items}
    if low:
        schema["minItems"] = low
    if high is not None:
        schema["maxItems"] = high
    # Distinct items the engine enforces: a few strings (the grammar), or strings of an automaton, or objects
    # that can always take another property (the matcher).
    if isinstance(items, dict) and ("enum" in items and all(isinstance(v, str) for v in items["enum"])
                                    or items.keys() <= {"type", "minLength", "maxLength"}
                                    and items.get("type") == "string"
                                    or items.get("type") == "object"
                                    and not items.keys() & {"additionalProperties", "minProperties"}):
        schema["uniqueItems"] = True
        return schema, st.lists(values, min_size=low, max_size=high, unique_by=json_equality).filter(
            lambda v: len(v) >= low)
    return schema, st.lists(values, min_size=low, max_size=high if high is not None else low + 3)


def json_equality(value) -> str:
    """A key equal for equal JSON values, as uniqueItems compares them (1 and
    1.0, members in any order)."""
    def normalized(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {name: normalized(w) for name, w in v.items()}
        return [normalized(w) for w in v] if isinstance(v, list) else v
    return json.dumps(normalized(value), sort_keys=True)


def tree(leaf):
    """A recursive schema through $defs: a node with a value and child nodes."""
    schema, values = leaf
    node = {"type": "object", "properties": {
        "value": schema, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["value"], "additionalProperties": False}
    nodes = st.recursive(st.builds(lambda v: {"value": v}, values),
                         lambda inner: st.builds(lambda v, c: {"value": v, "children": c}, values,
                                                 st.lists(inner, max_size=2)), max_leaves=4)
    return {"$defs": {"node": node}, "$ref": "#/$defs/node"}, nodes


def referenced(part):
    """The part moved under $defs and referred to by $ref."""
    schema, values = part
    return {"$defs": {"part": schema}, "$ref": "#/$defs/part"}, values


def containers(inner):
    """Objects and arrays of ``inner`` (named: hypothesis once warned that the lambda did not use its argument)."""
    return objects(inner) | arrays(inner)


nested = st.recursive(st.one_of(scalars, combined()), containers, max_leaves=6)
schemas = st.one_of(nested, nested.map(referenced), scalars.map(tree))


@cache
def compiled(text, property_order="schema"):
    """json_schema of the schema in ``text``, or the ConstrainedError it raised."""
    try:
        return json_schema(json.loads(text), property_order=property_order)
    except ConstrainedError as e:
        return e


def compile_or_skip(schema, property_order="schema"):
    """The compiled schema (see skip_refused)."""
    result = compiled(json.dumps(schema), property_order)
    if isinstance(result, ConstrainedError):
        skip_refused(schema, result)
    return result


def skip_refused(schema, error: ConstrainedError):
    """Skips the example: a refusal is allowed only for a construct of REFUSED,
    and must name where it is."""
    where = re.search(r" at (the schema root|/.*?)(?=: | \(|$)", str(error))
    assert where and any(json.dumps(r)[1:-1] in json.dumps(schema) for r in REFUSED), str(error)
    pointer = "" if where[1] == "the schema root" else where[1]
    assert isinstance(resolve(schema, pointer), dict), f"{error}: no schema at {pointer}"
    assume(False)


def resolve(document, pointer: str):
    """The value at the JSON pointer ``pointer`` of ``document``, or None."""
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(document, list) and token.isdigit() and int(token) < len(document):
            document = document[int(token)]
        elif isinstance(document, dict) and token in document:
            document = document[token]
        else:
            return None
    return document


def validator(schema):
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@given(part=schemas, data=st.data())
def test_valid_values_are_accepted(part, data):
    schema, values = part
    grammar = compile_or_skip(schema)
    for _ in range(3):
        value = data.draw(values)
        assert validator(schema).is_valid(value), f"test data: {value!r} should be valid"
        text = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
        assert grammar.matches(text), f"valid {text} rejected"


WALK_STEPS = 40  # then EOS or tokens that close something first, so that walks end
WALK_LIMIT = 200


@cache
def token_kinds(tokenizer):
    """(EOS, tokens with a byte other than whitespace, bytes -> token ids)."""
    vocab = constrained.vocabulary(tokenizer)
    eos = np.zeros(len(vocab.tokens), bool)
    eos[sorted(vocab.eos_ids)] = True
    visible = np.array([bool(t.strip(b" \t\r\n")) for t in vocab.tokens]) | eos
    ids = {}
    for i, t in enumerate(vocab.tokens):
        ids.setdefault(t, []).append(i)
    return eos, visible, ids


def closing_tokens(tokenizer, schema) -> np.ndarray:
    """Tokens that help a walk end: '"', '}', ']' and ')' (which end a string,
    object, array or a regex's group where they are allowed, or add one
    character to a string), and the pieces of the schema's property names as keys ('"name":'), which a
    walk needs to spell to satisfy "required"."""
    _, visible, ids = token_kinds(tokenizer)
    out = np.zeros(len(visible), bool)
    spellings = [b'"', b"}", b"]", b")"] + [json.dumps(name).encode() + b":" for name in property_names(schema)]
    for text in spellings:
        for i in range(len(text)):
            for j in range(i + 1, len(text) + 1):
                out[ids.get(text[i:j], [])] = True
    return out


def property_names(schema) -> set:
    """Every name a schema (at any depth) declares or requires."""
    if isinstance(schema, list):
        return set().union(*map(property_names, schema))
    if not isinstance(schema, dict):
        return set()
    names = set(schema["properties"]) if isinstance(schema.get("properties"), dict) else set()
    if isinstance(schema.get("required"), list):
        names |= set(schema["required"])
    return names.union(*map(property_names, schema.values()))


def walk(matcher, vocab, kinds, closing, rng) -> bytes | None:
    """The text of a random walk under the mask that ends with EOS, or None.
    Mostly visible tokens (whitespace is bounded and tested elsewhere); now and
    then, and always after WALK_STEPS, EOS or closing tokens first."""
    eos, visible, _ = kinds
    text = b""
    for step in range(WALK_LIMIT):
        allowed = matcher.allowed()
        assert allowed.any(), f"dead end after {text!r}"
        preferences = [allowed & visible] if rng.random() < 0.9 else []
        if step >= WALK_STEPS or rng.random() < 0.2:
            preferences = [allowed & eos, allowed & closing] + preferences
        choices = next((np.flatnonzero(p) for p in preferences if p.any()), np.flatnonzero(allowed))
        token = int(rng.choice(choices))
        matcher.advance(token)
        if token in vocab.eos_ids:
            assert matcher.is_finished()
            return text
        text += vocab.tokens[token]
    return None


@st.composite
def object_unions(draw):
    """anyOf / oneOf over objects whose declared keys overlap, often in other
    orders: keys only some alternatives declare may come late, and undeclared
    names may repeat where labels differ."""
    parts = draw(st.lists(objects(scalars), min_size=2, max_size=3))
    return {draw(st.sampled_from(["anyOf", "oneOf"])): [p[0] for p in parts]}, st.one_of(*(p[1] for p in parts))


@given(part=schemas, seed=st.integers(0, 2**32 - 1))
def test_random_walks_are_valid(tokenizers, part, seed):
    check_random_walks(tokenizers, part[0], seed)


# Strings of format "regex" (json_regex.py): built from the subset of ECMA-262 that Python's re compiles too.
REGEX_SYNTAX = "^$\\.*+?()[]{}|"
_RANGE_ENDS = [c for c in map(chr, range(0x20, 0x7F)) if c not in "\\][-^"]
_PUNCTUATION = [c for c in map(chr, range(0x20, 0x7F)) if not c.isalnum() and c != "_"]
_ESCAPES = (st.sampled_from(list("dDwWsSnrtfv") + _PUNCTUATION).map(lambda c: "\\" + c)
            | st.integers(0, 255).map(lambda n: f"\\x{n:02X}") | st.integers(0, 0xFFFF).map(lambda n: f"\\u{n:04x}"))
_RANGES = st.tuples(st.sampled_from(_RANGE_ENDS), st.sampled_from(_RANGE_ENDS)).map(lambda p: "-".join(sorted(p)))
_CLASS_ITEMS = (st.characters(codec="utf-8", exclude_characters="\\][-^") | _RANGES
                | st.sampled_from(list("dDwWsSnrtfvb") + _PUNCTUATION).map(lambda c: "\\" + c))
_CLASSES = st.builds(lambda negated, first, items, last: f"[{negated}{first}{''.join(items)}{last}]",
                     st.sampled_from(["", "^"]), st.sampled_from(["", "-"]),
                     st.lists(_CLASS_ITEMS, min_size=1, max_size=3), st.sampled_from(["", "-"])).filter(
    lambda c: not re.search(r"[&~|][&~|]", c))  # (no two in a row: Python warns "&&" may be a set operation)
_COUNTS = st.integers(0, 99)
_COUNTED = (_COUNTS.map("{{{}}}".format) | _COUNTS.map("{{{},}}".format)
            | st.tuples(_COUNTS, _COUNTS).map(lambda p: "{%d,%d}" % tuple(sorted(p))))
_QUANTIFIERS = st.builds(lambda quantifier, lazy: quantifier + lazy, st.sampled_from(["*", "+", "?"]) | _COUNTED,
                         st.sampled_from(["", "?"]))
_REGEX_BODY = st.deferred(lambda: st.lists(_REGEX_ALTERNATIVE, max_size=3).map("|".join))
_REGEX_ATOM = (st.characters(codec="utf-8", exclude_characters=REGEX_SYNTAX) | st.just(".") | _ESCAPES | _CLASSES
               | st.builds(lambda group, body: group + body + ")", st.sampled_from(["(", "(?:"]), _REGEX_BODY))
_REGEX_TERM = (st.sampled_from(["^", "$", "\\b", "\\B"])
               | st.builds(lambda atom, quantifier: atom + quantifier, _REGEX_ATOM, st.just("") | _QUANTIFIERS)
               | st.builds(lambda look, body: look + body + ")", st.sampled_from(["(?=", "(?!"]), _REGEX_BODY))
_REGEX_ALTERNATIVE = st.lists(_REGEX_TERM, max_size=4).map("".join)
REGEX_SCHEMA = {"type": "string", "format": "regex"}


@given(regex=_REGEX_BODY, ascii_only=st.booleans())
def test_regexes_of_the_subset_are_accepted(regex, ascii_only):
    re.compile(regex)  # (the strategy draws valid ones)
    assert compiled(json.dumps(REGEX_SCHEMA)).matches(json.dumps(regex, ensure_ascii=ascii_only)), regex


@given(text=st.text(st.sampled_from(list(REGEX_SYNTAX + "-,:=!/\"ab01bBdux")), max_size=12)
       | _REGEX_BODY.flatmap(lambda r: st.builds(lambda i, c: r[:i] + c + r[i + 1:], st.integers(0, len(r)),
                                                 st.sampled_from(list(REGEX_SYNTAX + "-,0")))))
def test_regex_strings_that_are_accepted_compile(text):
    if compiled(json.dumps(REGEX_SCHEMA)).matches(json.dumps(text)):
        re.compile(text)  # what jsonschema's format checker asks


@given(schema=st.sampled_from([REGEX_SCHEMA, {"type": "array", "items": REGEX_SCHEMA, "maxItems": 2},
                               {"anyOf": [REGEX_SCHEMA, {"type": "integer"}]},
                               {"type": "object", "properties": {"re": REGEX_SCHEMA}, "required": ["re"],
                                "additionalProperties": False}]),
       seed=st.integers(0, 2**32 - 1))
def test_random_walks_over_regex_strings_are_valid(tokenizers, schema, seed):
    check_random_walks(tokenizers, schema, seed)


# uniqueItems over strings that may run out of endings (json_unique's bounded terminals): the last items have
# few strings left to be, and a walk that begins an earlier one must not be let in. (Enums of over 8 strings:
# the grammar tracks fewer itself.)
FEW_STRINGS = ["a", "ab", "abc", "b", "ba", "é", "éé", "éa", 'x"y', "a\u007f", "\U0001F600", "\\", "c"]


@st.composite
def unique_few_strings(draw):
    items, count = draw(st.sampled_from([
        ({"type": "string", "pattern": "^[a-c]?$"}, 4), ({"type": "string", "pattern": "^[0-9]x$"}, 10),
        ({"type": "string", "maxLength": 2, "pattern": "^[ab]*$"}, 7), ({"type": "string", "pattern": "^[0-9]+x$"}, 6),
        ({"type": "string", "maxLength": 1}, 6), ({"type": "string", "minLength": 60, "maxLength": 70}, 3)])
        | st.lists(st.sampled_from(FEW_STRINGS), min_size=9, max_size=len(FEW_STRINGS), unique=True).map(
            lambda values: ({"enum": values}, len(values))))
    schema = {"type": "array", "items": items, "uniqueItems": True, "minItems": draw(st.integers(0, count))}
    return schema if draw(st.booleans()) else {"type": "object", "properties": {"list": schema}, "required": ["list"],
                                                "additionalProperties": False}


@given(schema=unique_few_strings(), seed=st.integers(0, 2**32 - 1))
def test_random_walks_over_unique_strings_with_few_endings_are_valid(tokenizers, schema, seed):
    check_random_walks(tokenizers, schema, seed)


# uniqueItems over objects (json_unique's item braces): walks that close early meet "{}" and other short objects
# again, whose "}" is refused; another property must come instead. Arrays of them nest.
UNIQUE_OBJECTS = [
    {"type": "object"},
    {"type": ["object", "string"], "maxLength": 1},
    {"type": "object", "properties": {"a": {"enum": [1, 2]}, "b": {"type": "boolean"}}},
    {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"],
     "patternProperties": {"^x": {"type": "integer"}}},
    {"type": "object", "properties": {"n": {"type": "array", "items": {"type": "object", "maxProperties": 1}},
                                      "u": {"type": "array", "items": {"type": "object"}, "uniqueItems": True,
                                            "minItems": 2}}},
]


@given(items=st.sampled_from(UNIQUE_OBJECTS), least=st.integers(0, 4), wrapped=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_random_walks_over_unique_objects_are_valid(tokenizers, items, least, wrapped, seed):
    schema = {"type": "array", "items": items, "uniqueItems": True, "minItems": least}
    if wrapped:
        schema = {"type": "object", "properties": {"list": schema}, "required": ["list"]}
    check_random_walks(tokenizers, schema, seed)


@given(part=object_unions() | objects(object_unions()), seed=st.integers(0, 2**32 - 1))
def test_random_walks_over_object_unions_are_valid(tokenizers, part, seed):
    result = compiled(json.dumps(part[0]))
    message = str(result) if isinstance(result, ConstrainedError) else ""
    if "no JSON value satisfies" in message:  # a oneOf of alternatives that accept the same objects
        assert not any(validator(part[0]).is_valid(v) for v in [{}, {"a": 1}, {"id": "x", "b": None}])
        assume(False)
    if "too complex" in message:  # a budget: scalar constraints that combine into too large an automaton
        assert re.search(r" at /\S", message), message
        assume(False)
    check_random_walks(tokenizers, part[0], seed)


def check_random_walks(tokenizers, schema, seed, property_order="schema"):
    """Two random walks under the masks end in instances the schema validates,
    where no object repeats a name the schema declares."""
    grammar = compile_or_skip(schema, property_order)
    declared = property_names(schema)

    def members(pairs):
        names = [name for name, _ in pairs if name in declared]
        assert len(names) == len(set(names)), f"a declared name repeats: {pairs}"
        return dict(pairs)

    tokenizer = tokenizers("llama3")
    vocab = constrained.vocabulary(tokenizer)
    closing = closing_tokens(tokenizer, schema)
    rng = random.Random(seed)
    finished = 0
    for _ in range(2):
        text = walk(grammar.matcher(tokenizer), vocab, token_kinds(tokenizer), closing, rng)
        if text is None:
            continue
        finished += 1
        try:
            instance = json.loads(text.decode(), parse_float=exact_float, object_pairs_hook=members)
        except ValueError:
            pytest.fail(f"not JSON: {text!r}")
        assert validator(schema).is_valid(instance), (text, [e.message for e in validator(schema).iter_errors(instance)])
    assume(finished)


# property_order="any": the declared keys of these objects are free (json_schema_rules' _ObjectProduct.settle),
# but for "é" (its spellings differ), which the object's few keys leave free to come anywhere too.

def shuffled(value, rng):
    """``value`` with the members of each of its objects in a random order."""
    if isinstance(value, dict):
        members = list(value.items())
        rng.shuffle(members)
        return {name: shuffled(v, rng) for name, v in members}
    return [shuffled(v, rng) for v in value] if isinstance(value, list) else value


@given(part=schemas, data=st.data())
def test_any_order_accepts_valid_values_with_members_in_any_order(part, data):
    schema, values = part
    grammar = compile_or_skip(schema, "any")
    value = shuffled(data.draw(values), random.Random(data.draw(st.integers(0, 2**32 - 1))))
    text = json.dumps(value)
    assert grammar.matches(text), f"valid {text} rejected"


@given(part=schemas | object_unions() | objects(object_unions()), seed=st.integers(0, 2**32 - 1))
def test_any_order_random_walks_are_valid(tokenizers, part, seed):
    """No dead end, no declared name twice (the matcher keeps free keys distinct)."""
    result = compiled(json.dumps(part[0]), "any")
    assume(not (isinstance(result, ConstrainedError) and "no JSON value satisfies" in str(result)))
    check_random_walks(tokenizers, part[0], seed, "any")


def test_long_strings_are_json_strings():
    """No whitespace may slip in between the lexemes a long string is counted in."""
    grammar = json_schema({"type": "string", "minLength": 70, "maxLength": 100})
    assert grammar.matches(json.dumps("x" * 10 + " " * 60))  # 70 code points
    assert not grammar.matches(json.dumps(" " * 101))
    assert not grammar.matches('"' + "x" * 70 + '\n"')
    assert grammar.matches(" " + json.dumps("x" * 70) + "\n")  # around the string whitespace stays


def test_short_and_long_length_bounds_combine():
    """Lengths of at most 64 code points (one DFA) and longer ones (counted by
    rules) split strings by length together, with no DFA of the long ones."""
    short_of_long = json_schema({"type": "string", "allOf": [{"maxLength": 1000}, {"maxLength": 5}]})
    assert [short_of_long.matches(json.dumps("x" * n)) for n in (0, 5, 6, 999)] == [True, True, False, False]
    either = json_schema({"type": "string", "anyOf": [{"maxLength": 3}, {"minLength": 2000}]})
    assert [either.matches(json.dumps("x" * n)) for n in (3, 4, 1999, 2000)] == [True, False, False, True]


@pytest.mark.parametrize("bound, value", [("exclusiveMaximum", 1), ("exclusiveMaximum", 10), ("exclusiveMinimum", -1),
                                         ("exclusiveMinimum", -0.1)])
def test_exclusive_bounds_at_powers_of_ten(bound, value):
    grammar = json_schema({"type": "number", bound: value})
    assert not any(grammar.matches(f"{sign}NoneE{exponent}") for sign in ("", "-") for exponent in (-1, 0, 1))


# Caps (json_schema's max_string_length and max_items): every string value and array is capped unless
# the grammar lists the strings in .uncapped; "not" checks that a cap never loosens what a schema forbids.
# (Not numbers under "not": a walk under "not integer" may write a 200-digit fraction that a float reads
# as an integer.)
capped_scalars = st.one_of(length_strings(), length_strings(), strings(), enums(), integers(), numbers(),
                           st.sampled_from([({"type": "boolean"}, st.booleans()), ({"type": "null"}, st.none()),
                                            (True, ANY_VALUE)]))
capped_schemas = st.recursive(capped_scalars, containers, max_leaves=5)
negated = (length_strings() | arrays(strings())).map(lambda part: ({"not": part[0]}, st.nothing()))
caps = st.tuples(st.integers(0, 6) | st.integers(62, 70) | st.none(), st.integers(0, 3) | st.none())


def fits(value, max_string_length, max_items) -> bool:
    """Whether every string value (not property name) and array of ``value`` is within the caps."""
    if isinstance(value, str):
        return max_string_length is None or len(value) <= max_string_length
    if isinstance(value, list):
        return (max_items is None or len(value) <= max_items) and all(
            fits(v, max_string_length, max_items) for v in value)
    if isinstance(value, dict):
        return all(fits(v, max_string_length, max_items) for v in value.values())
    return True


@cache
def capped(text, max_string_length, max_items):
    """json_schema of the schema in ``text`` under the caps, None when no value
    fits them, or the ConstrainedError that refused it."""
    try:
        return json_schema(json.loads(text), max_string_length=max_string_length, max_items=max_items)
    except ConstrainedError as e:
        return None if "no JSON value satisfies the schema" in str(e) else e


def capped_or_skip(schema, limits):
    """``capped``'s answer, the example skipped where the schema holds a
    construct the engine refuses (objects draw additionalProperties from
    ``scalars``, REFUSED included)."""
    grammar = capped(json.dumps(schema), *limits)
    if isinstance(grammar, ConstrainedError):
        skip_refused(schema, grammar)
    return grammar


@given(part=capped_schemas, limits=caps, data=st.data())
def test_caps_take_exactly_the_values_that_fit(part, limits, data):
    schema, values = part
    grammar = capped_or_skip(schema, limits)
    for _ in range(3):
        value = data.draw(values)
        expected = fits(value, *limits)
        if grammar is None:
            assert not expected, f"{value!r} fits the caps {limits}, yet the schema was refused as empty"
            continue
        text = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
        if expected or not grammar.uncapped:
            assert grammar.matches(text) == expected, (text, limits)


@given(part=capped_schemas | negated, limits=caps, seed=st.integers(0, 2**32 - 1))
def test_capped_walks_are_valid_and_fit(tokenizers, part, limits, seed):
    schema, _ = part
    grammar = capped_or_skip(schema, limits)
    assume(grammar is not None)
    tokenizer = tokenizers("llama3")
    vocab = constrained.vocabulary(tokenizer)
    rng = random.Random(seed)
    text = walk(grammar.matcher(tokenizer), vocab, token_kinds(tokenizer), closing_tokens(tokenizer, schema), rng)
    assume(text is not None)
    instance = json.loads(text.decode(), parse_float=exact_float)
    assert validator(schema).is_valid(instance), text
    assert fits(instance, *limits) or grammar.uncapped, (text, limits)


def test_caps_on_strings_that_meet_patterns_and_on_bad_values():
    """Strings under a pattern, enum or const are capped too; where that is too
    complex for the automata they are listed in .uncapped; bad caps are errors."""
    grammar = json_schema({"type": "array", "items": {"type": "string", "pattern": "^a+$"}}, max_string_length=2,
                          max_items=1)
    assert grammar.matches('["aa"]') and not grammar.matches('["aaaa"]') and not grammar.matches('["aa", "a"]')
    nonempty = json_schema({"type": "string", "not": {"const": ""}}, max_string_length=10)
    assert [nonempty.matches(json.dumps(v)) for v in ("", "abc", "x" * 11)] == [False, True, False]
    assert nonempty.uncapped == ()
    negated = json_schema({"not": {"type": "string", "maxLength": 3}}, max_string_length=5)
    assert [negated.matches(json.dumps(v)) for v in ("ab", "abcd", "abcdef", 7)] == [False, True, False, True]
    email = json_schema({"type": "object", "properties": {"e": {"type": "string", "format": "email"}}},
                        max_string_length=100)
    assert len(email.uncapped) == 1 and "strings at /properties/e are not capped" in email.uncapped[0]
    assert email.matches(json.dumps({"e": "a" * 120 + "@example.com"}))
    assert json_schema({"type": "array"}, max_items=np.int64(2)).matches("[1, 2]")
    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(ConstrainedError, match="max_string_length is a non-negative integer"):
            json_schema({"type": "string"}, max_string_length=bad)
        with pytest.raises(ConstrainedError, match="max_items is a non-negative integer"):
            json_schema({"type": "array"}, max_items=bad)
    with pytest.raises(ConstrainedError, match="no JSON value satisfies"):
        json_schema({"type": "string", "minLength": 10}, max_string_length=5)
    with pytest.raises(ConstrainedError, match="lower max_items to at most 500"):
        json_schema({"type": "array", "contains": {"type": "integer"}}, max_items=600)
