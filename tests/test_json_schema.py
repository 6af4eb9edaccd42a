"""JSON Schema compilation: for every supported keyword, instances that
jsonschema's Draft 2020-12 validator accepts are accepted (when their
properties come in schema order) and the others rejected; bad schemas are
refused with messages that name the keyword and its JSON pointer; random
values are never accepted unless the validator accepts them."""

import graphlib
import itertools
import json
import math
import re
from types import SimpleNamespace

import numpy as np
import jsonschema
import pytest
from hypothesis import assume, example, given, strategies as st

import constrained
from constrained import ConstrainedError, json_regex, json_schema_rules
from constrained.json_schema import Schemas, json_schema
from constrained.grammar import grammar_from_rules
from constrained.json_schema_rules import (ORDER_STATES, _Builder, _key_chains, left_recursive, schema_grammar,
                                          whitespace)
from constrained.lalr_tables import Conflict

from conftest import encode_exact
from dfa_members import members
from schema_checks import exact_float

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def valid(schema, value) -> bool:
    """The reference: jsonschema's verdict (draft 2020-12 unless $schema says
    otherwise), formats checked."""
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return validator(schema, format_checker=validator.FORMAT_CHECKER).is_valid(value)


# (name, schema, valid instances, invalid instances); valid ones list declared
# properties in schema order.
CASES = [
    ("type", {"type": "integer"}, [0, -7, 12], [1.5, "1", None, [], {}, True]),
    ("type list", {"type": ["string", "null"]}, ["", "x", None], [0, False, []]),
    ("type number", {"type": "number"}, [0, 1.5, -2e-3, 10], ["1", None]),
    ("boolean", {"type": "boolean"}, [True, False], [0, "true", None]),
    ("enum", {"enum": ["red", 3, None, {"a": [1]}]}, ["red", 3, None, {"a": [1]}], ["blue", 4, {"a": [2]}, {}, False]),
    ("const number", {"const": 2}, [2, 2.0], [3, "2"]),
    ("const object", {"const": {"k": [True, None]}}, [{"k": [True, None]}], [{"k": [True]}, {"k": [True, None], "x": 1}]),
    ("bounds", {"type": "number", "minimum": -1.5, "exclusiveMaximum": 10}, [-1.5, 0, 9.99], [-1.6, 10, 11]),
    ("draft-04 exclusive", {"$schema": DRAFT4, "type": "integer", "minimum": 3, "exclusiveMinimum": True,
                            "maximum": 5},
     [4, 5], [3, 6]),
    ("multipleOf", {"type": "integer", "multipleOf": 3}, [0, 3, -9, 300], [1, 10]),
    ("string length", {"type": "string", "minLength": 2, "maxLength": 3}, ["ab", "abc", "é✓"], ["a", "abcd", ""]),
    ("pattern", {"type": "string", "pattern": "[0-9]{3}"}, ["123", "ab123cd"], ["12", "abc"]),
    ("long strings", {"type": ["string", "null"], "minLength": 20, "maxLength": 5000},
     ["é" * 20, "x" * 5000, "\n" * 47, '"' * 20, None], ["x" * 19, "x" * 5001, '"' * 19, 1]),
    ("long string minimum", {"type": ["string", "integer"], "minLength": 100},
     ["a" * 100, "a" * 131, "a" * 1000, 5], ["a" * 99, "", 1.5]),
    ("long string up to a bound", {"type": "string", "maxLength": 200},
     ["", "x", "x" * 16, "x" * 17, "é" * 192, "x" * 193, "\n" * 200, '"' * 200, "a" * 15 + "\\" * 185],
     ["x" * 201, "é" * 201, '"' * 201, 5]),
    ("long string with a short minimum", {"type": "string", "minLength": 5, "maxLength": 300},
     ["x" * 5, "é" * 15, "x" * 16, "\n" * 17, "x" * 300, '"' * 5], ["x" * 4, "", '"' * 4, "x" * 301]),
    # A value whose labels differ in the lengths of its long strings: TEXT lexemes of 1 to 16 code points
    # would overlap the chunks of exactly 16 that the other label's bounds need (json_schema_rules.long_string)
    ("long strings under two labels", {"type": "array", "items": {"type": "string"}, "contains": {"maxLength": 100}},
     [["x" * 5], ["x" * 100], ["y" * 150, "x" * 20], ["x" * 16, "y" * 101]], [[], ["y" * 101], ["y" * 150, "y" * 300]]),
    ("long strings that a parent tells apart",
     {"type": "object", "properties": {"a": {"maxLength": 100}}, "required": ["a"],
      "anyOf": [{"properties": {"a": {"maxLength": 70}}}, {"properties": {"a": {"minLength": 90}}}]},
     [{"a": "x" * 20}, {"a": "x" * 70}, {"a": "x" * 95}], [{"a": "x" * 80}, {"a": "x" * 101}, {}]),
    ("long string lengths combined", {"anyOf": [{"maxLength": 100}, {"minLength": 200, "maxLength": 300}],
                                      "not": {"minLength": 250, "maxLength": 260}},
     ["", "x" * 100, "x" * 200, "x" * 249, "x" * 261], ["x" * 101, "x" * 250, "x" * 301, 5]),
    ("format", {"type": "string", "format": "date"}, ["2024-02-29", "1999-12-31"], ["2023-02-29", "24-1-1", "x"]),
    ("properties", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                    "required": ["b"]},
     [{"b": ""}, {"a": 1, "b": "x"}, {"b": "x", "zzz": [1, {}]}, {"extra": None, "b": "y"}],
     [{"a": 1}, {"a": "1", "b": "x"}, {"b": 2}, [], "x"]),
    ("additionalProperties false", {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     [{}, {"a": 1}, 5], [{"b": 1}, {"a": 1, "b": 2}]),
    ("additionalProperties schema", {"properties": {"a": {}}, "additionalProperties": {"type": "boolean"}},
     [{"a": "x", "b": True}, {"c": False}], [{"b": 1}]),
    ("patternProperties", {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
     [{"x-a": 1, "x-b": 2}, {}], [{"x-a": "1"}, {"y": 1}]),
    ("propertyNames", {"type": "object", "propertyNames": {"maxLength": 2}}, [{"ab": 1}, {}], [{"abc": 1}]),
    ("min/maxProperties", {"type": "object", "minProperties": 1, "maxProperties": 2},
     [{"a": 1}, {"a": 1, "b": 2}], [{}, {"a": 1, "b": 2, "c": 3}]),
    ("dependentRequired", {"dependentRequired": {"a": ["b"]}}, [{"b": 1}, {"a": 1, "b": 2}, {}], [{"a": 1}]),
    ("dependentSchemas", {"properties": {"a": {}, "b": {}}, "dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
     [{"a": 1, "b": "x"}, {"b": 2}], [{"a": 1, "b": 2}]),
    ("items", {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
     [[1], [1, 2, 3]], [[], [1, 2, 3, 4], [1, "2"]]),
    ("many items", {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 250},
     [[1] * 3, [2] * 57, [3] * 250], [[1] * 2, [1] * 251, [1, "x", 1], [1] * 100 + [None]]),
    ("many items after a prefix", {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "maxItems": 100,
                                   "not": {"minItems": 40, "maxItems": 60}},
     [["a"] + [1] * 38, ["a"] + [1] * 60, ["a"] + [1] * 99, []], [["a"] + [1] * 39, ["a"] + [1] * 59, ["a"] + [1] * 100, [1]]),
    ("thousands of items", {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 5000,
                            "not": {"minItems": 512, "maxItems": 4095}},
     [[1] * 3, [2] * 511, [3] * 4096, [4] * 5000], [[1] * 2, [1] * 512, [1] * 4095, [1] * 5001, [1] * 4999 + ["x"]]),
    ("uniqueItems with a large maxItems", {"items": {"enum": ["a", "b"]}, "uniqueItems": True, "maxItems": 100_000},
     [["a", "b"], ["b"]], [["a", "a"], ["a", "b", "a"]]),
    ("prefixItems", {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     [[], ["a"], ["a", 1]], [[1], ["a", 1, 2]]),
    ("contains", {"type": "array", "contains": {"type": "string"}, "minContains": 2, "maxContains": 3},
     [["a", "b"], [1, "a", 2, "b", "c"]], [["a"], [], ["a", "b", "c", "d"]]),
    ("uniqueItems", {"type": "array", "items": {"enum": ["a", "b", 1, 1.5]}, "uniqueItems": True},
     [[], ["a", "b", 1], [1.5, 1]], [["a", "a"], [1, 1.0], ["c"]]),
    ("uniqueItems of strings", {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 1},
     [["a"], ["a", "b", "A"], ["é", "e"], ["", " ", "\""]], [[], ["a", "a"], ["a", "b", "a"], ["é", "é"], ["", ""], [1]]),
    ("uniqueItems of objects", {"type": "array", "items": {"type": ["object", "string"]}, "uniqueItems": True},
     [[{"a": 1}, {"a": 2}], [{}, "x", {"x": "y"}], [{"a": 1, "b": 2}, {"a": 1}], [{"a": [1]}, {"a": [1.5]}],
      [{"a": True}, {"a": 1}], [{"a": {"b": []}}, {"a": {"b": {}}}]],
     [[{"a": 1}, {"a": 1}], [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [{"a": 1}, {"a": 1.0}], [{}, {}], ["x", {}, "x"],
      [{"a": {"b": [1, "x"]}}, {"a": {"b": [1.0, "x"]}}], [1]]),
    ("minProperties over undeclared names", {"type": "object", "additionalProperties": {"type": "string"},
                                             "minProperties": 2},
     [{"a": "x", "b": "y"}, {"": "", " ": "", "é": "e", "e\u0301": "é"}], [{}, {"a": "x"}, {"a": "x", "b": 1}]),
    ("uniqueItems of strings, array by array",
     {"type": "array", "items": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "uniqueItems": True}},
     [[["a", "b"], ["a", "b"]], [["ab"], [], ["ab", "abc"]]], [[["a", "a"]], [["a"], ["b", "c", "b"]], [["A"]]]),
    ("allOf", {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"a": {"minimum": 5}, "b": {"type": "string"}}}]},
     [{"a": 5}, {"a": 7, "b": "x"}], [{"a": 4}, {}, {"a": 5, "b": 1}]),
    ("anyOf", {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^x"}, {"type": "integer"}]},
     ["ab", "xyzw", 3], ["abc", 1.5]),
    ("oneOf scalars", {"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5, "x"], [2, 3]),
    ("oneOf objects", {"oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
                                 {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}]},
     [{"kind": "a", "x": 1}, {"kind": "b", "x": "s"}], [{"kind": "c"}, {"kind": "a", "x": "s"}, {}]),
    ("oneOf overlapping objects", {"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]},
     [{"a": 1}, {"b": 1}], [{"a": 1, "b": 2}, {}]),
    ("not scalar", {"type": "integer", "not": {"enum": [1, 2]}}, [0, 3], [1, 2]),
    ("false schemas in a product", {"type": "object", "oneOf": [{"properties": {"x": {"not": {}}}},
                                                                {"properties": {"x": {"type": "integer"}}}]},
     [{"x": 1}], [{"x": "s"}, {}]),
    ("not object", {"not": {"type": "object", "required": ["a"]}}, [{}, {"b": 1}, 1, []], [{"a": 1}]),
    ("if/then/else", {"if": {"properties": {"t": {"const": "n"}}, "required": ["t"]},
                      "then": {"properties": {"v": {"type": "number"}}}, "else": {"properties": {"v": {"type": "string"}}}},
     [{"t": "n", "v": 1}, {"t": "s", "v": "x"}, {"v": "x"}], [{"t": "n", "v": "x"}, {"v": 1}]),
    ("$ref and $defs", {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}},
     [[1, 2]], [[0]]),
    ("$ref escapes", {"definitions": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}, "e%f": {"type": "null"}},
                      "prefixItems": [{"$ref": "#/definitions/a~1b"}, {"$ref": "#/definitions/c~0d"},
                                      {"$ref": "#/definitions/e%25f"}]},
     [[1, "x", None]], [["x"], [1, 2], [1, "x", 0]]),
    ("$anchor", {"$defs": {"n": {"$anchor": "name", "type": "string"}}, "properties": {"a": {"$ref": "#name"}}},
     [{"a": "x"}], [{"a": 1}]),
    ("$id relative", {"$id": "https://example.com/root.json",
                      "$defs": {"x": {"$id": "item.json", "type": "boolean"}}, "items": {"$ref": "item.json"}},
     [[True]], [[1]]),
    ("$id next to $ref is its base", {"$id": "https://example.com/a/root.json", "$ref": "b/foo.json", "$defs": {
        "foo": {"$id": "b/foo.json", "$ref": "./bar.json"}, "bar": {"$id": "b/bar.json", "type": "number"}}},
     [5], ["a"]),
    ("URN base URI", {"$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed", "properties": {"a": {"$ref": "#/$defs/s"}},
                      "$defs": {"s": {"type": "string"}}}, [{"a": "x"}], [{"a": 1}]),
    ("$anchor in an embedded resource", {"$id": "https://example.com/root.json", "items": {"$ref": "inner.json#pos"},
                                         "$defs": {"r": {"$id": "inner.json", "$defs": {
                                             "p": {"$anchor": "pos", "minimum": 1}}}}},
     [[1, 2]], [[0]]),
    ("$dynamicRef as $ref", {"$id": "https://example.com/tree", "$dynamicAnchor": "node", "type": "object",
                             "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}},
     [{"kids": [{"kids": []}]}], [{"kids": [1]}]),
    ("$dynamicRef to the root's $dynamicAnchor", {
        "$id": "https://example.com/strings", "$ref": "list", "$defs": {
            "items": {"$dynamicAnchor": "items", "type": "string"},
            "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#items"},
                     "$defs": {"items": {"$dynamicAnchor": "items"}}}}},
     [["a"], []], [[1], "a"]),
    ("$dynamicRef by dynamic scope", {
        "$id": "https://example.com/root", "properties": {"strings": {"$ref": "strings"}, "any": {"$ref": "list"}},
        "$defs": {"strings": {"$id": "strings", "$ref": "list",
                              "$defs": {"i": {"$dynamicAnchor": "i", "type": "string"}}},
                  "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#i"},
                           "$defs": {"i": {"$dynamicAnchor": "i"}}}}},
     [{"strings": ["a"], "any": [1, "b"]}], [{"strings": [1]}, {"any": 1}]),
    ("recursion", {"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
                                                                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                                      "required": ["value"], "additionalProperties": False}},
                   "$ref": "#/$defs/node"},
     [{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}], [{"value": 1, "children": [{}]}]),
    ("root recursion", {"type": ["array", "integer"], "items": {"$ref": "#"}}, [[1, [2, [[]]]], 3], [[1, ["x"]]]),
    ("boolean schemas", {"properties": {"yes": True, "no": False}}, [{"yes": [1]}, {}], [{"no": 1}]),
    ("draft-04 tuples", {"$schema": DRAFT4, "items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
     [[1], [1, "a", "b"]], [["a"], [1, 2]]),
    ("draft-04 integers have no fraction", {"$schema": DRAFT4, "properties": {"n": {"type": "integer", "minimum": 0}}},
     [{"n": 12345}, {"n": 0}], [{"n": 12345.0}, {"n": 1e3}, {"n": -1}]),
    ("draft-07 $ref ignores the keywords beside it",
     {"$schema": DRAFT7, "definitions": {"o": {"type": "object"}}, "properties": {"a": {"$ref": "#/definitions/o",
                                                                                        "type": "string"}}},
     [{"a": {}}, {"a": {"b": 1}}], [{"a": "x"}, {"a": 1}]),
    ("draft 2020-12 $ref and the keywords beside it both apply",
     {"$defs": {"o": {"type": "object"}}, "properties": {"a": {"$ref": "#/$defs/o", "minProperties": 1}}},
     [{"a": {"b": 1}}], [{"a": {}}, {"a": "x"}]),
    ("draft 2020-12 integers may have a zero fraction", {"properties": {"n": {"type": "integer", "minimum": 0}}},
     [{"n": 12345}, {"n": 12345.0}], [{"n": 1.5}, {"n": -1}]),
    ("format applies to strings only", {"format": "email"}, ["a@b.c", 12, 13.7, None, False, {}, []], ["no at sign"]),
    ("format regex", {"type": "object", "properties": {"match": {"type": "string", "format": "regex"}}},
     [{"match": r"^[a-zA-Z0-9_]{3,16}$"}, {"match": ""}, {"match": r"(a|b)*\d+(?:x)?$"}, {"match": '"é"|[^\\"]'},
      {"match": r"^\s*(it|describe)\(\s*['\"]([^'\"]+)['\"]"}, {"match": r"[-a-c\]]{2}?(?!x)"}],
     [{"match": "*"}, {"match": "\\"}, {"match": "("}, {"match": "a)"}, {"match": "[z-a]"}, {"match": "a{3,2}"},
      {"match": "a**"}, {"match": "^(abc]"}, {"match": 1}]),
    ("unevaluatedProperties with $ref and allOf", {"$defs": {"base": {"properties": {"a": {"type": "integer"}}}},
                                                   "$ref": "#/$defs/base", "allOf": [{"properties": {"b": {}}}],
                                                   "unevaluatedProperties": False},
     [{}, {"a": 1}, {"a": 1, "b": "x"}, 3], [{"kind": 1}, {"a": 1, "kind": 1}, {"a": "x"}]),
    # "b" counts as evaluated only when the second branch holds.
    ("unevaluatedProperties with anyOf", {"anyOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]},
                                                    {"properties": {"b": {"const": 2}}, "required": ["b"]}],
                                          "unevaluatedProperties": {"type": "string"}},
     [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": "s"}, {"b": 2, "kind": "s"}], [{"a": 1, "b": 3}, {"a": 1, "kind": 1}, {"kind": "s"}]),
    # "kind" counts as evaluated only when "if" holds.
    ("unevaluatedProperties with if/then/else", {"if": {"properties": {"kind": {"const": "n"}}, "required": ["kind"]},
                                                 "then": {"properties": {"a": {"type": "number"}}},
                                                 "else": {"properties": {"b": {}}}, "unevaluatedProperties": False},
     [{"kind": "n", "a": 1}, {"kind": "n"}, {"b": 1}, {}], [{"kind": "s"}, {"kind": "n", "b": 1}, {"a": 1}]),
    ("unevaluatedProperties with dependentSchemas", {"properties": {"a": {}}, "dependentSchemas": {
        "a": {"properties": {"b": {"type": "integer"}}}}, "unevaluatedProperties": False},
     [{"a": 1, "b": 2}, {"a": 1}, {}], [{"b": 2}, {"a": 1, "b": "x"}, {"a": 1, "kind": 1}]),
    ("unevaluatedProperties nested", {"properties": {"a": {"properties": {"b": {}}, "unevaluatedProperties": False}}},
     [{"a": {"b": 1}}, {"kind": 1}], [{"a": {"kind": 1}}]),
    ("unevaluatedItems with prefixItems and contains", {"prefixItems": [{"type": "string"}], "contains": {"type": "integer"},
                                                        "unevaluatedItems": {"type": "null"}},
     [["a", 1], ["a", 1, None, 2], ["a", None, 1], {}], [["a", 1, "b"], ["a", None], ["a", 1, True]]),
    ("unevaluatedItems with oneOf", {"oneOf": [{"prefixItems": [{"const": 1}]}, {"prefixItems": [{"const": 2}, True]}],
                                     "unevaluatedItems": False},
     [[1], [2], [2, "x"]], [[1, "x"], [2, "x", 3], [3], []]),
    # The first branch never holds (both oneOf branches always do); the second evaluates the same item.
    ("unevaluatedItems with a branch that never holds", {"anyOf": [{"oneOf": [{}, {}], "prefixItems": [True]},
                                                                  {"prefixItems": [{"const": 1}]}],
                                                        "unevaluatedItems": False},
     [[1], []], [[2], [1, 1]]),
    ("dependencies", {"$schema": DRAFT4, "dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
     [{"a": 1, "b": 2}, {"c": 1, "d": 2}], [{"a": 1}, {"c": 1}]),
]


_compiled: dict = {}


def compiled(schema, **options):
    key = json.dumps([schema, sorted(options.items())])  # (property order matters: keys are not sorted)
    if key not in _compiled:
        _compiled[key] = json_schema(schema, **options)
    return _compiled[key]


def accepts(grammar, value, **dumps) -> bool:
    return grammar.matches(json.dumps(value, **dumps))


@pytest.mark.parametrize("name, schema, good, bad", CASES, ids=[c[0] for c in CASES])
def test_keyword(name, schema, good, bad):
    grammar = compiled(schema)
    for value in good:
        assert valid(schema, value), f"test data: {value!r} should be valid"
        assert accepts(grammar, value), f"valid {value!r} rejected"
    for value in bad:
        assert not valid(schema, value), f"test data: {value!r} should be invalid"
        assert not accepts(grammar, value), f"invalid {value!r} accepted"


def test_whitespace_is_bounded():
    grammar = compiled({"type": "object", "properties": {"a": {"type": "array"}}})
    value = {"a": [1, {"b": None}]}
    assert accepts(grammar, value, indent=2)
    assert accepts(grammar, value, separators=(",", ":"))
    assert grammar.matches(' {"a" :[ 1 ,{ } ] } ')
    assert not grammar.matches('{"a":' + " " * 100 + "[]}")


def test_property_order_any_lets_few_declared_properties_come_in_any_order():
    schema = {"properties": {"a": {"type": "integer"}, "b": {}}, "required": ["c", "d"]}
    assert not accepts(compiled(schema), {"b": 2, "d": 0, "a": 1, "c": 0})  # schema order by default
    with pytest.raises(ConstrainedError, match="property_order"):
        json_schema(schema, property_order="sorted")
    grammar = compiled(schema, property_order="any")
    for value in [{"c": 0, "d": 0, "a": 1, "b": 2}, {"b": 2, "d": 0, "a": 1, "c": 0}, {"d": 0, "x": 1, "c": 0}]:
        assert accepts(grammar, value), value
    for value in [{"b": 2, "a": "1", "c": 0, "d": 0}, {"d": 0, "b": 1}]:
        assert not accepts(grammar, value), value
    assert not grammar.matches('{"c": 0, "d": 0, "c": 1}')  # each declared key at most once
    # Declared keys from several schemas (allOf, dependentRequired) are declared keys alike.
    combined = compiled({"allOf": [{"required": ["a"]}, {"properties": {"b": {"const": 1}}}],
                         "dependentRequired": {"b": ["c"]}}, property_order="any")
    assert accepts(combined, {"c": 0, "b": 1, "a": 0}) and accepts(combined, {"a": 0, "b": 1, "c": 0})
    assert not accepts(combined, {"b": 1, "a": 0}) and not accepts(combined, {"c": 0, "b": 2, "a": 0})


def test_property_order_any_frees_declared_properties_of_plain_names():
    """Declared keys whose names have one spelling are free: a count per set
    of sets requiring them, not a bit each, and the matcher keeps them distinct."""
    keys = [f"k{i:02}" for i in range(30)]
    schema = {"properties": {k: {"type": "integer"} for k in keys}, "required": keys[::3], "additionalProperties": False}
    grammar = compiled(schema, property_order="any")
    assert accepts(grammar, dict.fromkeys(reversed(keys), 0)) and accepts(grammar, dict.fromkeys(keys[::3][::-1], 0))
    assert not accepts(grammar, dict.fromkeys(keys[1::3], 0))  # the required ones missing
    assert not accepts(grammar, {**dict.fromkeys(keys[::3], 0), "k01": "x"})
    assert not grammar.matches('{' + ", ".join(f'"{k}": 0' for k in keys[::3]) + ', "k01": 1, "k01": 2}')
    assert not grammar.matches('{' + ", ".join(f'"{k}": 0' for k in keys[::3]) + ', "k00": 1}')  # (required too)


# Names spelled several ways ("é" as é or \u00e9) are tracked as before: a bit each, within ORDER_STATES.
TRACKED = [f"\u00e9{c}" for c in "abcdefghijklmno"]


@given(order=st.permutations(TRACKED[:7]), size=st.integers(1, 7))
def test_property_order_any_groups_neighbours_past_six_tracked_properties(order, size):
    """Seven tracked keys would make 128 sets of keys done, past ORDER_STATES:
    neighbours pair up (ab, cd, ef, g) and keep their order, the pairs
    interleaving (3 * 3 * 3 * 2 = 54 sets)."""
    value = {k: 0 for k in order[:size]}
    pairs_in_order = all(order.index(TRACKED[a]) < order.index(TRACKED[b]) for a, b in ((0, 1), (2, 3), (4, 5))
                         if TRACKED[a] in value and TRACKED[b] in value)
    grammar = compiled({"properties": {k: {} for k in TRACKED[:7]}}, property_order="any")
    assert accepts(grammar, value) == pairs_in_order, value


def test_property_order_any_cuts_a_long_order_in_two_where_it_fits():
    """15 tracked keys would be one piece again after pairs and larger groups
    (8 and 7 make 72 sets of keys done): the first 11 and the last 4 (60) interleave."""
    k = TRACKED
    grammar = compiled({"properties": {key: {} for key in k}}, property_order="any")
    assert accepts(grammar, {k[11]: 0, k[0]: 0, k[14]: 0, k[5]: 0}) and accepts(grammar, dict.fromkeys(k, 0))
    assert not accepts(grammar, {k[1]: 0, k[0]: 0}) and not accepts(grammar, {k[14]: 0, k[11]: 0})


def test_property_order_any_falls_back_to_schema_order_where_free_orders_make_too_many_rules():
    """120 objects whose 6 tracked keys were all free would need too many
    rules: the grammar is built in schema order again, where two schemas' keys
    still interleave (any order allows at least that), not in one order per object."""
    a, b, c, d, e, f = TRACKED[:6]
    schema = {"type": "object", "properties": {f"p{i}": {"allOf": [
        {"properties": {k: {"minimum": i} for k in (a, b, c)}}, {"properties": {k: {"minimum": i} for k in (d, e, f)}}]}
        for i in range(120)}}
    grammar = compiled(schema, property_order="any")
    assert accepts(grammar, {"p0": {d: 1, a: 2}, "p119": {a: 119, e: 120}})
    assert not accepts(grammar, {"p0": {b: 1, a: 2}}) and not accepts(grammar, {"p1": {a: 0}})


def test_property_order_any_builds_again_where_a_label_frees_fewer_keys(monkeypatch):
    """An item that must match ``contains`` may take "a" free, one that need not
    may not (a second value of "a" could be what fails ``contains``). The label
    met first freed "a", a later one did not: the rules are built again with "a"
    tracked in that object, as its states must move alike under every label."""
    stale = []
    run = json_schema_rules._Builder.run
    monkeypatch.setattr(json_schema_rules._Builder, "run", lambda self: (run(self), stale.append(bool(self.stale))))
    schema = {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}},
              "contains": {"properties": {"a": {"minimum": 5}}}}
    grammar = json_schema(schema, property_order="any")
    assert stale == [True, False]
    for value in [[{"a": 1}], [{"b": 0, "a": 5}], [{"a": 1}, {"b": 0, "a": 7}], [{"a": "x"}], [{"b": 1}, {"a": 5, "b": 2}]]:
        assert accepts(grammar, value) == valid(schema, value), value


def test_property_order_any_tracks_a_free_key_that_no_value_satisfies():
    """A closed object counts its free keys, and so must be able to give each:
    "z" has no value, so it is tracked instead (the rules built again), else
    the count would let "a" twice stand in for "a" and "z", a path the matcher
    then cuts: with three members asked for, no value is valid."""
    schema = {"type": "object", "properties": {"a": {}, "b": {}, "z": {"type": "string", "minLength": 2, "maxLength": 1}},
              "additionalProperties": False}
    assert accepts(compiled(schema, property_order="any"), {"b": 1, "a": 2})
    with pytest.raises(ConstrainedError, match="no JSON value satisfies"):
        json_schema({**schema, "minProperties": 3}, property_order="any")


def test_the_mask_keeps_free_keys_distinct_and_never_leads_into_one_given_already(tokenizers):
    """With "name" given, '"name' can only become that name again: no token may
    lead there, while '"nam' may still become "nam"."""
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    schema = {"type": "object", "properties": {"name": {"type": "integer"}, "nam": {"type": "integer"}},
              "additionalProperties": False}
    matcher = compiled(schema, property_order="any").matcher(tok)
    for t in tok.encode('{"name": 1, ', add_special_tokens=False):  # a mask at every step, as a generation asks
        assert matcher.is_allowed(t)
        matcher.advance(t)
    allowed = np.flatnonzero(matcher.allowed())
    assert all(matcher.accepts([t]) for t in allowed)  # the mask and advancing agree
    assert not matcher.is_allowed(vocab.tokens.index(b'"name'))
    assert not matcher.accepts([vocab.tokens.index(b'"'), vocab.tokens.index(b'name')])
    assert matcher.accepts(tok.encode('"nam": 2}', add_special_tokens=False))
    assert not matcher.accepts(tok.encode('"name": 2}', add_special_tokens=False))
    matcher.advance(vocab.tokens.index(b'"'))
    assert not matcher.is_allowed(vocab.tokens.index(b'name')) and matcher.is_allowed(vocab.tokens.index(b'nam'))


@given(data=st.data())
def test_property_order_any_allows_all_that_schema_order_does(data):
    """Combined schemas' keys interleave, each schema's in its order; with
    property_order="any" those orders are cut into pieces, each of one
    schema's order (or, where no cut fits, kept), so no interleaving the default
    accepts is refused (7 to 10 keys: past what ORDER_STATES lets go free;
    schemas may share keys)."""
    names = data.draw(st.permutations("abcdefghij"))[:data.draw(st.integers(7, 10))]
    parts = [part for part in ([k for k in names if data.draw(st.booleans())] for _ in range(3)) if part]
    parts += [[k for k in names if not any(k in part for part in parts)]]  # every key in some schema
    schema = {"allOf": [{"properties": {k: {} for k in part}} for part in parts if part]}
    left, value = [list(part) for part in parts], {}
    while any(left):  # each schema's keys in its order, the schemas interleaved
        ready = sorted({part[0] for part in left if part and all(part[0] not in other[1:] for other in left)})
        key = data.draw(st.sampled_from(ready))
        value[key] = 0
        left = [part[1:] if part and part[0] == key else part for part in left]
    assume(accepts(compiled(schema), value))  # (unless the default joined parts to stay within ORDER_STATES)
    assert accepts(compiled(schema, property_order="any"), value), (schema, value)


@given(order=st.permutations(["kind", "name", "source", "target", "type"]))
def test_property_order_any_frees_a_key_that_combined_schemas_share_once(order):
    """Six names in two alternatives' orders, one of them ("name") in both:
    each is free (64 sets of keys done). Counted once per order it is in, the
    pieces gave 128 sets, and joining two of them kept "type" before "name"
    though the first alternative declares "type" only in ``required``."""
    first = {"properties": {k: {"type": "string"} for k in ["kind", "name", "source", "target"]},
             "required": ["name", "kind", "type", "source", "target"]}
    second = {"properties": {"type": {"type": "string"}, "name": {"type": "string"}, "vertices": {"type": "object"}},
              "required": ["name", "type", "vertices"]}
    grammar = compiled({"anyOf": [first, second]}, property_order="any")
    assert accepts(grammar, {k: "x" for k in order})
    assert not accepts(grammar, {k: "x" for k in order if k != "type"})  # both require "type"


def test_property_order_any_frees_a_shared_key_where_a_schema_lists_it_early():
    """Nine names in two alternatives' orders, "partition" last in one and in
    the middle of the other: past 64 sets of keys done, the pieces join, and
    "partition" goes with the order that lists it earliest, so it may come
    first (as MaskBench's o76576 writes it) in an instance of the other."""
    names = ["iapp", "iappOptions", "iappTableName", "iappVariables", "partition"]
    first = {"properties": {k: {"type": "string"} for k in names}, "required": names, "additionalProperties": False}
    second = {"properties": {k: {"type": "string"} for k in ["balance", "mode", "partition", "sslProfile", "address"]},
              "required": ["partition"], "additionalProperties": False}
    grammar = compiled({"oneOf": [first, second]}, property_order="any")
    assert accepts(grammar, {k: "x" for k in ["partition", *names[:4]]})
    assert not accepts(grammar, {k: "x" for k in ["partition", *names[:3]]})  # "iappVariables" is required


def test_schema_order_counts_a_key_that_combined_schemas_share_once():
    """Two schemas with 2 keys in common and 6 each of their own: with the
    common keys counted once, their orders give at most 9 * 7 = 63 sets of
    keys done, so the own keys interleave (counted twice, 81 sets merged the
    two orders into one, the second's own keys after all of the first's)."""
    first = {"properties": {k: {} for k in ["id", "name", *(f"a{i}" for i in range(6))]}}
    second = {"properties": {k: {} for k in ["id", "name", *(f"b{i}" for i in range(6))]}}
    grammar = compiled({"allOf": [first, second]})
    assert accepts(grammar, {"id": 0, "name": 0, "b0": 0, "a0": 0, "b1": 0, "a1": 0})
    assert not accepts(grammar, {"id": 0, "name": 0, "a1": 0, "a0": 0})  # each keeps its order


@given(orders=st.lists(st.lists(st.sampled_from("abcdefghijkl"), min_size=1, max_size=8, unique=True),
                       min_size=2, max_size=5), any_order=st.booleans())
@example(orders=[["a"], ["b", "e", "i"], ["b", "a", "c", "g", "h", "d"], ["f"]], any_order=False)
@example(orders=[["n", "p", "v"], ["s"], ["c", "m", "u", "g", "t"], ["c", "m", "u", "g", "t", "x"], ["s", "e"]],
         any_order=False)  # (the shape of MaskBench's o25695: oneOf a file changed or an error)
@example(orders=[list("abcdefg"), list("hijklmn"), ["g", "h"]], any_order=False)  # (a key passes only its own)
@example(orders=[list("abcdefghijklmn"), list("hijklmno")], any_order=True)  # (owned where listed earliest: 72)
def test_key_chains_keep_every_schema_order_where_they_agree(orders, any_order):
    """Where combined schemas' property orders agree (no cycle), the chains
    (joined to stay within ORDER_STATES, or cut under "any") and all those
    orders fit one order: so output in any one schema's order is allowed, and
    no key shared by two chains waits in one for a key that the other puts
    after it (two joins that placed a shared key apart made a cycle). And the
    chains give at most ORDER_STATES sets of keys done, counted as the grammar
    reaches them (a key comes done with the keys before it in its chains
    only: counting a shared key once per product term was no bound)."""
    def acyclic(sequences):
        graph = {}
        for names in sequences:
            for a, b in zip(names, names[1:]):
                graph.setdefault(b, set()).add(a)
        try:
            tuple(graphlib.TopologicalSorter(graph).static_order())
            return True
        except graphlib.CycleError:
            return False

    assume(acyclic(orders))
    atoms = [SimpleNamespace(properties=[(name, {}) for name in order], required=()) for order in orders]
    chains = _key_chains(atoms, any_order=any_order)
    assert sorted({name for chain in chains for name in chain}) == sorted({name for order in orders for name in order})
    assert acyclic(chains + orders), (orders, chains)
    assert sets_of_keys_done(chains) <= ORDER_STATES, chains


def sets_of_keys_done(chains) -> int:
    """The sets of keys done that an object's grammar reaches with ``chains``
    (as _ObjectProduct and _Builder._declared make it): through any chain, the
    next key not done or a later one, emitted by the first chain holding it,
    comes done with the keys before it in every chain holding it."""
    owner, before = {}, {}
    for c, chain in enumerate(chains):
        for i, key in enumerate(chain):
            owner.setdefault(key, c)
            before[key] = before.get(key, frozenset()) | frozenset(chain[:i])
    seen, todo = {frozenset()}, [frozenset()]
    while todo:
        done = todo.pop()
        for c, chain in enumerate(chains):
            for key in (key for key in chain if key not in done and owner[key] == c):
                after = done | before[key] | {key}
                if after not in seen:
                    seen.add(after)
                    todo.append(after)
    return len(seen)


def test_combined_schemas_keep_each_ones_property_order():
    """Keys of schemas combined for one value keep each schema's own order and may
    interleave; names a schema only requires have no order."""
    schema = {"properties": {"name": {"type": "string"}}, "required": ["name"], "oneOf": [
        {"properties": {"type": {"type": "string"}}, "required": ["type"]},
        {"properties": {"current": {"type": "number"}, "state": {"const": "running"}}, "required": ["state"]}]}
    grammar = compiled(schema)
    for value in [{"name": "n", "type": "t"}, {"name": "n", "current": 5, "state": "running"}]:
        assert valid(schema, value) and accepts(grammar, value)
    for value in [{"name": "n", "current": "5", "state": "running"}, {"name": "n", "type": "t", "state": "running"}]:
        assert not valid(schema, value) and not accepts(grammar, value)


def test_interleaved_property_orders():
    schema = {"allOf": [{"properties": {"a": {}, "b": {}}, "required": ["a"]}, {"properties": {"c": {}, "d": {}}}],
              "required": ["z"]}
    grammar = compiled(schema)
    for value in [{"a": 1, "c": 1, "b": 1, "d": 1, "z": 1}, {"z": 1, "c": 1, "a": 1, "d": 1, "b": 1},
                  {"c": 1, "z": 1, "a": 1}]:
        assert accepts(grammar, value), value
    for value in [{"b": 1, "a": 1, "z": 1}, {"a": 1, "d": 1, "c": 1, "z": 1}, {"c": 1, "b": 1, "z": 1},
                  {"a": 1, "c": 1}]:
        assert not accepts(grammar, value), value
    assert not grammar.matches('{"a": 1, "z": 1, "a": 2}')  # each declared key at most once
    skipping = compiled({"properties": {"a": {}, "b": {}, "c": {}}, "required": ["a", "b"]})
    assert accepts(skipping, {"a": 1, "b": 1, "c": 1}) and not accepts(skipping, {"c": 1})
    # Schemas that disagree on an order get one order that keeps the first's.
    cyclic = compiled({"allOf": [{"properties": {"a": {}, "b": {}}}, {"properties": {"b": {}, "a": {}}}]})
    assert accepts(cyclic, {"a": 1, "b": 1}) and not accepts(cyclic, {"b": 1, "a": 1})
    # Chains whose interleavings would give too many states are merged, neighbours first, each keeping its order.
    atoms = [SimpleNamespace(properties=[(f"{k}{i}", {}) for i in range(3)], required=()) for k in "pqrs"]
    chains = _key_chains(atoms, any_order=False)
    assert math.prod(len(chain) + 1 for chain in chains) <= ORDER_STATES < 4 ** 4
    assert sorted(name for chain in chains for name in chain) == sorted(f"{k}{i}" for k in "pqrs" for i in range(3))
    for k in "pqrs":
        assert any([name for name in chain if name[0] == k] == [f"{k}{i}" for i in range(3)] for chain in chains)
    merged = compiled({"allOf": [{"properties": dict(atom.properties)} for atom in atoms]})
    assert accepts(merged, {f"{k}{i}": 0 for k in "pqrs" for i in range(3)})


@pytest.mark.parametrize("combinator", ["$ref", "allOf", "anyOf", "oneOf", "if"])
def test_merged_orders_follow_the_schema_text(combinator):
    """Where combined schemas' orders are merged into one (their interleavings
    would give too many states), the keys of a schema it combines come before
    its own where its combinator keyword is written before its "properties"."""
    base = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(40)}}
    combined = {"$ref": "#/$defs/base"} if combinator == "$ref" else {"if": True, "then": {"$ref": "#/$defs/base"}} \
        if combinator == "if" else {combinator: [{"$ref": "#/$defs/base"}]}
    own = {"properties": {"extra": {"type": "integer"}, "more": {"type": "integer"}}}
    keys_first = {f"k{i}": i for i in range(40)} | {"extra": 40, "more": 41}
    own_first = {"extra": 40, "more": 41} | {f"k{i}": i for i in range(40)}
    for schema, allowed, refused in [({"$defs": {"base": base}} | combined | own, keys_first, own_first),
                                     ({"$defs": {"base": base}} | own | combined, own_first, keys_first)]:
        grammar = compiled(schema)
        assert valid(schema, allowed) and accepts(grammar, allowed), list(schema)
        assert valid(schema, refused) and not accepts(grammar, refused), list(schema)  # one order is kept


def test_merged_orders_read_sibling_combinators_as_written():
    """Two combinators before "properties" are read in the order written; so
    are two schemas whose orders disagree (the first one's order is kept)."""
    halves = {name: {"properties": {f"{name}{i}": {} for i in range(20)}} for name in "ab"}
    a_keys, b_keys = ({f"{name}{i}": i for i in range(20)} for name in "ab")
    for schema, allowed, refused in [
            ({"$defs": halves, "anyOf": [{"$ref": "#/$defs/a"}], "$ref": "#/$defs/b", "properties": {"x": {}}},
             a_keys | b_keys | {"x": 0}, b_keys | a_keys | {"x": 0}),
            ({"$defs": halves, "$ref": "#/$defs/b", "anyOf": [{"$ref": "#/$defs/a"}], "properties": {"x": {}}},
             b_keys | a_keys | {"x": 0}, a_keys | b_keys | {"x": 0}),
            ({"allOf": [{"properties": {"a": {}, "b": {}}}], "properties": {"b": {}, "a": {}}},
             {"a": 0, "b": 1}, {"b": 1, "a": 0}),
            ({"properties": {"b": {}, "a": {}}, "allOf": [{"properties": {"a": {}, "b": {}}}]},
             {"b": 1, "a": 0}, {"a": 0, "b": 1})]:
        grammar = compiled(schema)
        assert accepts(grammar, allowed) and not accepts(grammar, refused), list(schema)


def test_a_key_only_some_alternatives_declare_may_come_late():
    """Under anyOf, a key one alternative declares may follow keys that it
    lists after it, where another alternative leaves it undeclared: the
    instance is in that other's order. The late key fails the alternatives
    that declare it, so it is allowed only where another one decides."""
    schema = {"anyOf": [{"properties": {"name": {}, "type": {}}, "additionalProperties": {"type": "string"}},
                        {"properties": {"name": {}, "states": {"type": "array"}, "type": {}},
                         "required": ["states"]}]}
    grammar = compiled(schema)
    for value in [{"name": 1, "type": 2, "states": "s"}, {"name": 1, "states": [], "type": 2}]:
        assert valid(schema, value) and accepts(grammar, value), value
    for value in [{"name": 1, "type": 2, "states": 3}, {"type": 2, "name": 1, "states": 3}]:
        assert not valid(schema, value) and not accepts(grammar, value), value
    assert not accepts(grammar, {"type": 2, "name": 1})  # keys both declare keep their order
    for text in ['{"name": 1, "type": 2, "states": "s", "states": "t"}', '{"name": 1, "type": 2, "states": "s", "states": 3}',
                 '{"name": 1, "states": [], "type": 2, "states": 3}']:  # a repeated name: the last value counts
        assert grammar.matches(text) == valid(schema, json.loads(text)), text
    request = {"anyOf": [{"properties": {"id": {}, "method": {}}, "required": ["id", "method"]},
                         {"properties": {"method": {"type": "string"}}, "required": ["method"]}]}
    assert accepts(compiled(request), {"method": "m", "id": 1})
    # Where a declaring alternative's result matters, its keys keep their order.
    exclusive = {"oneOf": [{"properties": {"a": {}, "b": {}}, "required": ["a"]}, {"properties": {"b": {"type": "integer"}}}]}
    assert not valid(exclusive, {"b": 1, "a": 2}) and not accepts(compiled(exclusive), {"b": 1, "a": 2})
    both = compiled({"allOf": [{"properties": {"a": {}, "c": {}}}, {"properties": {"b": {}}}]})
    assert accepts(both, {"a": 1, "b": 2, "c": 3}) and not accepts(both, {"c": 3, "a": 1})


SPELLINGS = ["1.5e+16", "10e-1", "1e2", "12e3", "0.5e1", "1e-07", "-2E+1", "0e5", "-0.0e-3", "2.0", "3", "2.5"]


@pytest.mark.parametrize("schema", [
    {"not": {"type": "integer"}}, {"not": {"multipleOf": 2}}, {"not": {"minimum": 5}}, {"not": {"enum": [1, 100]}},
    {"oneOf": [{"type": "integer"}, {"minimum": 0}]}, {"type": "number", "not": {"type": "integer"}},
    {"anyOf": [{"type": "integer", "maximum": 10}, {"type": "string"}]}, {"multipleOf": 0.5}, {"type": "integer"}])
def test_number_spellings_only_where_their_value_is_decided(schema):
    """Number languages read exponent forms only in part (12e3 against a bound,
    1.5e+16 as an integer): a value that must fail one of them is taken among
    plain decimals (and zero with any exponent) only, on which they are exact.
    Where nothing constrains a number, or only a complement of schemas that
    allow all numbers or none, every spelling goes."""
    grammar = compiled(schema)
    for text in SPELLINGS:
        if grammar.matches(text):
            assert valid(schema, json.loads(text, parse_float=exact_float)), text
    for exact in ({}, {"type": "number"}, {"not": {"type": "string"}}, {"oneOf": [{"type": "number"}, {"enum": ["a"]}]},
                  {"not": {"type": "string", "format": "email"}}):
        assert all(compiled(exact).matches(text) for text in SPELLINGS), exact
    assert compiled({"multipleOf": 3}).matches("0e5")


@pytest.mark.parametrize("schema", [
    {"not": {"minimum": 5}}, {"not": {"enum": [1, 100]}}, {"oneOf": [{"maximum": 0}, {"minimum": -10}]},
    {"type": "array", "items": {"anyOf": [True, {"enum": [1, 2.5, [1, "a"]]}]}}])
def test_scientific_notation_is_decided_against_bounds_and_values(schema):
    """Bounds and numeric enum/const read normalised scientific notation (what
    json.dumps writes for 1e16 or 1e-07) exactly, so a value that must fail
    them may be written so too (hypothesis found [[1e+16]] rejected, the
    scientific notation being held back as undecided for all of them)."""
    grammar = compiled(schema)
    for text in ["1e+16", "-2e+20", "1e-07", "1.5e+300", "5", "1", "100", "[1e+16]", "[[1e+16]]", "[[1e+16], 1e-07]"]:
        assert grammar.matches(text) == valid(schema, json.loads(text, parse_float=exact_float)), text


@pytest.mark.parametrize("schema, texts", [
    ({"not": {"format": "hostname"}}, ["a.b.c.d.e", "a.b.", "ab--c", "-x", "a b"]),
    ({"not": {"format": "date-time"}}, ["1998-12-31T15:59:60.123-08:00", "0000-01-01T00:00:00Z", "x"]),
    ({"not": {"format": "email"}}, ["a@@b", "@", "ab"]),
    ({"oneOf": [{"format": "hostname"}, {"maxLength": 3}]}, ["a.b.c.d.e", "-x", "abcd"]),
    ({"oneOf": [{"format": "email"}, {"format": "uri"}]}, ["mailto:a@b.c", "http://x", "a@b.c"]),  # only uri fails
    # Where jsonschema's checkers allow more than the format:
    ({"not": {"format": "time"}}, ["00:00:00Z\n", "23:59:60+01:00", "x"]),  # "^...$" takes a final newline
    ({"not": {"format": "uri"}}, ["h://[::0.0.0.05]/", "http://a\n", "a b"]),
    ({"not": {"format": "hostname"}}, ["\u017f.com", "a\n", "-x"]),  # Unicode case folding
    ({"not": {"format": "uuid"}}, ["0x345678-1234-1234-1234-123456789abc", "12345678-1234-1234-1234-12345678-9abc",
                                   "{1234567-1234-1234-1234-123456789abcd}", "1234"]),
    ({"not": {"format": "duration"}}, ["P1Y1D", "-P1D", "PT1.5S", "1D"]),
    ({"not": {"format": "relative-json-pointer"}}, ["\u0661", "0\n", "/a"]),
    ({"format": "iri"}, ["http://[::1]", "http://[1:2:3:4:5:6:7::]", "http://\u00e9/"]),  # its IPv6 grammar
])
def test_formats_are_negated_only_where_their_regex_is_exact(schema, texts):
    """A format's regex may be a subset of the format (hostnames of at most 4
    labels; leap seconds in UTC only): a value that must fail the format is
    never one of the strings on which the regex may be wrong; a value that
    must meet it may be."""
    grammar = compiled(schema)
    for text in texts:
        if accepts(grammar, text):
            assert valid(schema, text), text
    assert accepts(grammar, texts[-1])


def test_strict_properties_forbids_undeclared_keys():
    schema = {"properties": {"a": {"type": "integer"}}, "required": ["a"]}
    grammar = compiled(schema, strict_properties=True)
    assert accepts(grammar, {"a": 1})
    assert not accepts(grammar, {"a": 1, "b": 2})
    explicit = compiled({"properties": {"a": {}}, "additionalProperties": {"type": "string"}}, strict_properties=True)
    assert accepts(explicit, {"a": 1, "b": "x"})
    # Inside a negation strictness only narrows the output, never the meaning.
    negated = compiled({"type": "object", "not": {"properties": {"a": {"type": "string"}}}}, strict_properties=True)
    assert accepts(negated, {"a": 1})
    assert not accepts(negated, {"a": "x"})


def test_declared_names_shadow_the_undeclared_key(tokenizers):
    """An undeclared key is any string, one terminal whatever the names an
    object declares (so its token tables serve every schema); the declared
    names shadow it: lexed as themselves wherever it may come, so that a name
    never passes as an undeclared key (twice, or out of its turn), and a
    mask never lets a name be finished where it may not come."""
    from constrained import json_strings

    schema = {"properties": {"a": {"type": "integer"}, "name": {"type": "string"}}, "required": ["name"]}
    grammar = compiled(schema)
    generic = json_strings.string().digest
    lexer, names = grammar.language.lexer, grammar.language.names
    assert [names[k] for k, d in enumerate(lexer.dfas) if d.digest == generic and names[k].startswith("KEY")]
    for text in ['{"name": "x"}', '{"a": 1, "name": "x", "ab": [1], "nam": 2, "names": 3}']:
        assert valid(schema, json.loads(text)) and grammar.matches(text), text
    for text in ['{"name": "x", "a": 1}', '{"a": 1, "a": 2, "name": "x"}', '{"name": "x", "name": "y"}',
                 '{"a": "1", "name": "x"}']:
        assert not grammar.matches(text), text
    tokenizer = tokenizers("llama3")
    vocab = constrained.vocabulary(tokenizer)
    for prefix, expected in [('{"name": "x", "', {b"ab": True, b"names": True, b"name": True, b"a": True}),
                             ('{"name": "x", "name', {b'"': False, b'":': False, b"s": True, b'":"': False}),
                             ('{"name": "x", "a', {b'"': False, b'":': False, b"b": True}),
                             ('{"a', {b'"': True, b'":': True, b"b": True})]:
        matcher = grammar.matcher(tokenizer)
        for token in encode_exact(tokenizer, prefix):
            matcher.advance(token)
        mask = matcher.mask()
        ids = {text: vocab.tokens.index(text) for text in expected}
        assert {text: bool(int(mask[t >> 5]) >> (t & 31) & 1) for text, t in ids.items()} == expected, prefix


@pytest.mark.parametrize("schema", [
    {"properties": {"a": {"type": "integer"}, "é": {"type": "integer"}}},
    {"properties": {"a": {"type": "integer"}}, "patternProperties": {"^[ab]$": {"type": "integer"}}},
    {"type": "object", "additionalProperties": {"enum": ["x", "é", "a/b", "q\"\n"]}},
    True,
])
def test_strings_are_spelled_as_json_dumps_writes_them(schema):
    """Names and values as json.dumps spells them (either ensure_ascii) and in
    no other spelling (\\u for a printable ASCII character, upper-case hex,
    \\/), so a declared key cannot come back as an undeclared name."""
    grammar = compiled(schema)
    for value in [{"a": 1}, {"é": 2, "a/b": 3, "q\"\n": 4, "\u2028": 5}, {"s": "x"}, {"s": "é"}, {"s": "a/b"}]:
        if valid(schema, value):
            assert accepts(grammar, value) and accepts(grammar, value, ensure_ascii=False)
        else:
            assert not accepts(grammar, value) and not accepts(grammar, value, ensure_ascii=False)
    for text in ['{"\\u0061": "x"}', '{"\\u00E9": "x"}', '{"a\\/b": "x"}', '{"s": "\\u0078"}', '{"s": "\\u00E9"}',
                 '{"s": "a\\/b"}']:
        assert not grammar.matches(text)


DUPLICATES = [  # (schema, JSON text with a repeated undeclared name, whether it is valid as json.loads reads it)
    ({"not": {"additionalProperties": {"type": "string"}}}, '{"x": 1, "x": "s"}', False),
    ({"minProperties": 2}, '{"x": 1, "x": 2}', False),
    ({"not": {"maxProperties": 2}, "properties": {"a": {}, "c": {}}}, '{"a": 1, "b": 2, "b": 3}', False),
    ({"oneOf": [{"additionalProperties": {"type": "integer"}}, {"required": ["a"]}]}, '{"a": 1, "x": "s", "x": 1}', False),
    ({"additionalProperties": {"type": "integer"}}, '{"x": 1, "x": 2}', True),
    ({"maxProperties": 2}, '{"x": 1, "x": 2}', True),
]


@pytest.mark.parametrize("schema, text, valid_as_read", DUPLICATES)
def test_repeated_undeclared_names_never_pass_an_invalid_object(schema, text, valid_as_read):
    """A parser keeps a repeated name's last value: where a repeat could turn a
    rejected object into an accepted one, the engine allows one undeclared
    member per region of names; elsewhere repeats stay allowed."""
    assert valid(schema, json.loads(text)) == valid_as_read
    assert compiled(schema).matches(text) == valid_as_read


def test_a_repeated_region_gives_its_values_one_context_whatever_the_label():
    """Where a second member of a region must fail some schemas, which ones
    does not depend on the label the object gets: the parser reads the value
    before it learns that label, and two contexts for it were a reduce/reduce
    conflict (a recursive anyOf over patternProperties, from MaskBench)."""
    schema = {"$defs": {"P": {"type": "object", "anyOf": [
        {"properties": {"r": {"type": "string"}}}, {"patternProperties": {"^/": {"$ref": "#/$defs/P"}}}]}},
        "$ref": "#/$defs/P"}
    grammar = compiled(schema)
    for value in [{"r": "x"}, {"r": 1, "/a": {}, "/b": {"r": "y"}}, {"/a": 1, "r": "x"}, {"/a": {"r": 2}}]:
        assert valid(schema, value) and accepts(grammar, value), value
    for value in [{"r": 1, "/a": 1}, {"r": 1, "/a": {}, "/b": 2}, {"r": 1, "/a": {"r": 2, "/b": 3}}]:
        assert not valid(schema, value) and not accepts(grammar, value), value


def object_schemas(depth: int = 1):
    """Object schemas where repeated names could matter: counts, value schemas
    for undeclared names, and not / oneOf / anyOf over such schemas."""
    values = st.sampled_from([{}, {"type": "integer"}, {"type": "string"}])
    own = st.fixed_dictionaries({"type": st.just("object")}, optional={
        "properties": st.dictionaries(st.sampled_from("ab"), values, max_size=2),
        "additionalProperties": st.sampled_from([True, False, {"type": "integer"}, {"type": "string"}]),
        "patternProperties": st.just({"^x": {"type": "integer"}}),
        "minProperties": st.integers(0, 3),
        "maxProperties": st.integers(0, 3),
    })
    if depth == 0:
        return own
    inner = object_schemas(depth - 1)
    return st.one_of(own, st.builds(lambda s, n: s | {"not": n}, own, inner),
                     st.builds(lambda s, a, b: s | {"oneOf": [a, b]}, own, inner, inner),
                     st.builds(lambda s, a, b: s | {"anyOf": [a, b]}, own, inner, inner))


@given(schema=object_schemas(), members=st.lists(
    st.tuples(st.sampled_from(["a", "b", "x", "y", "xz"]), st.sampled_from([1, 2, "s", "t"])), max_size=4),
    order=st.sampled_from(["schema", "any"]))
def test_objects_with_repeated_names_are_accepted_only_when_valid_as_parsed(schema, members, order):
    try:
        grammar = compiled(schema, property_order=order)
    except ConstrainedError:
        return  # a schema that needs distinct undeclared names may be refused
    text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members) + "}"
    if grammar.matches(text):
        assert valid(schema, json.loads(text)), text


def test_one_undeclared_member_per_region_only_where_repeats_matter():
    assert accepts(compiled({"not": {"additionalProperties": {"type": "string"}}}), {"x": 1, "y": 2})
    assert accepts(compiled({"anyOf": [{"additionalProperties": {"type": "string"}}, {"required": ["a"]}]}),
                   {"x": "1", "y": "2"})
    assert accepts(compiled({"maxProperties": 3}), {"x": 1, "y": 2, "z": 3})
    assert accepts(compiled({"minProperties": 2, "properties": {"a": {}}}), {"a": 1, "y": 2})
    # Names of at most one character could run out (every one taken), so they are not kept distinct:
    # one undeclared member only, so no object, so no value.
    with pytest.raises(ConstrainedError, match="distinct undeclared property names"):
        json_schema({"type": "object", "propertyNames": {"maxLength": 1}, "minProperties": 2})


def test_counted_objects_keep_their_undeclared_names_distinct():
    """Where members count toward a minProperties over 1, a repeated name would
    count twice though a parser keeps one member: the matcher keeps each
    object's undeclared names distinct instead, however spelled, object by
    object (json_unique.py)."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": {"type": "object", "minProperties": 2}, "minProperties": 3}
    grammar = compiled(schema)
    for text in ['{"a": 1, "x": {"a": 1, "b": 2}, "y": {"a": 1, "b": 2}}',
                 '{"a": 2, "x": {"x": 1, "y": []}, "y": {"x": {}, "z": 2}}',
                 '{"x": {"b": 1, "\u0061": 2}, "y": {"p": [], "q": {"p": 1, "q": 2}}, "\u0078y": {"x": 1, "y": 2}}']:
        assert valid(schema, json.loads(text)) and grammar.matches(text), text
    for text in ['{"a": 1, "x": {"a": 1, "b": 2}, "x": {"a": 1, "b": 2}}',
                 '{"x": {"b": 1, "b": 2}, "y": {"a": 1, "b": 2}}',
                 '{"x": {"a": 1, "\u0061": 2}, "y": {"a": 1, "b": 2}}', '{"a": 1, "x": {"a": 1, "b": 2}}']:
        assert not valid(schema, json.loads(text)) and not grammar.matches(text), text


def test_the_mask_keeps_an_object_from_repeating_an_undeclared_name(tokenizers):
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    token = {t: vocab.tokens.index(t) for t in [b'{"', b'":', b' "', b'x', b'",', b'""', b'":"', b'a', b'"}']}
    matcher = compiled({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 2}).matcher(tok)
    for t in [b'{"', b'":', b' "', b'x', b'",']:  # {"": "x",
        matcher.advance(token[t])
    assert not matcher.is_allowed(token[b'""'])  # the name "" again, in one token
    matcher.advance(token[b' "'])
    assert not matcher.is_allowed(token[b'":']) and not matcher.is_allowed(token[b'":"'])  # it would close "" again
    with pytest.raises(ConstrainedError, match="repeats a string that must be unique"):
        matcher.advance(token[b'":'])
    for t in [b'a', b'":"', b'x', b'"}']:
        matcher.advance(token[t])
    assert matcher.is_accepting() and matcher.text() == '{"": "x", "a":"x"}'


def test_many_combined_object_schemas_compile(monkeypatch):
    """A oneOf of 16 object schemas told apart by one key's value (from
    MaskBench): what each value can reach is worked out per schema, not over
    all 2**17 results together."""
    kinds = [f"k{n}" for n in range(16)]
    schema = {"type": "object", "properties": {"msg": {"enum": kinds}, "arg": {"type": "string"}},
              "required": ["msg"], "oneOf": [
                  {"properties": {"msg": {"const": kind}, "arg": {"maxLength": n}, f"x{n}": {"type": "integer"}},
                   "required": [f"x{n}"] if n % 2 else []} for n, kind in enumerate(kinds)]}
    grammar = compiled(schema)
    for value in [{"msg": "k0"}, {"msg": "k3", "arg": "abc", "x3": 1}, {"msg": "k15", "arg": "", "x15": 2},
                  {"msg": "k4", "x4": 5, "y": None}]:
        assert valid(schema, value) and accepts(grammar, value), value
    for value in [{"msg": "k1"}, {"msg": "k3", "arg": "abcd", "x3": 1}, {"msg": "k2", "x2": "s"}, {"msg": "k16"}]:
        assert not valid(schema, value) and not accepts(grammar, value), value
    # What that costs is budgeted (MaskBench's largest need is about 450,000 nodes evaluated):
    monkeypatch.setattr(json_schema_rules, "MAX_LABEL_WORK", 10)
    with pytest.raises(ConstrainedError, match="combined object or array schemas reach too many states"):
        json_schema(schema)


@pytest.mark.parametrize("schema, text", [
    ({"type": "array", "items": {"type": "integer"}}, json.dumps(list(range(300)))),
    ({"type": "string", "minLength": 100}, json.dumps("x" * 5000)),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, json.dumps({f"k{n}": n for n in range(300)})),
], ids=["array", "string", "map"])
def test_any_number_of_items_members_or_chunks_keeps_the_parser_stack_flat(schema, text):
    """Items past the counted ones (a map's members, a long string's chunks
    likewise) are reduced as they end: the parser stack does not grow with
    them, so the masks where the value may close read a few states, and are
    found again after the next ones instead of computed anew."""
    language = compiled(schema).language
    q, stack = language.start()
    depths = []
    data = text.encode()
    for at in range(0, len(data), 7):
        q, stack = language.step(q, stack, data[at:at + 7])
        depths.append(len(stack))
    assert language.eos_ok(q, stack) and max(depths) < 16


def test_left_recursive_rewrites_the_loops_that_repeat_runs_before_a_rest():
    """``x: run x | rest`` becomes ``x: x_runs rest``, ``x_runs: | x_runs run``
    (a rest may be empty), with the same language; a loop entered where
    another alternative goes on by a symbol that may begin it stays."""
    from constrained.dfa import literal

    terminals = {k: literal(k.lower().encode()) for k in "ABC"}
    rules = {"s": [("B", "x"), ("B", "C")], "x": [(), ("A", "x")]}
    left = left_recursive(rules)
    assert left == {"s": [("B", "x"), ("B", "C")], "x_runs": [(), ("x_runs", "A")], "x": [("x_runs",)]}
    for grammar in (grammar_from_rules(rules, "s", terminals, {}), grammar_from_rules(left, "s", terminals, {})):
        assert [grammar.matches(text) for text in ("b", "baaa", "bc", "bac", "ab")] == [True, True, True, False, False]
    beside = {"s": [("B", "x"), ("B", "A", "C")], "x": [(), ("A", "x")]}
    assert left_recursive(beside) == beside


def test_runs_stay_right_recursive_where_the_parser_tells_them_apart_only_at_the_close(monkeypatch):
    """Under ``contains``, an inner array of integers and one that is not are
    read side by side until their close: counting the first kind's items left
    recursive would make the parser choose at the first comma (an LALR
    conflict), so left_recursive leaves those be and converts the others; and
    where its rules still conflict, json_schema compiles the rules as they are."""
    schema = {"type": "array", "contains": {"type": "array", "items": {"type": "integer"}}}
    schemas = Schemas(schema)
    rules, start, terminals, shadows, glued, *_ = schema_grammar(schemas, schemas.root())
    left = left_recursive(rules)
    assert any(name.endswith("_runs") for name in left)
    assert any(a[-1] == name for name, alternatives in left.items() for a in alternatives if a)
    grammar_from_rules(left, start, terminals, {"WHITESPACE": whitespace()}, glued=glued, shadows=shadows)

    def conflicting(rules):  # the start's first alternative also as a rule of its own: a reduce/reduce conflict
        first = next(iter(rules))
        return {**rules, first: rules[first] + [("twin",)], "twin": rules[first][:1]}
    with pytest.raises(Conflict):
        grammar_from_rules(conflicting(rules), start, terminals, {"WHITESPACE": whitespace()}, glued=glued,
                           shadows=shadows)
    for rewrite in (left_recursive, conflicting):
        monkeypatch.setattr(json_schema_rules, "left_recursive", rewrite)
        grammar = json_schema(schema)
        for value in [[[1, 2, 3]], [["a"], []], [[1, "a"], [2, 3, 4], {}]]:
            assert valid(schema, value) and accepts(grammar, value), value
        for value in [[], [["a"]], [[1, "a"], ["b", 2]], [1, 2]]:
            assert not valid(schema, value) and not accepts(grammar, value), value


def test_contexts_with_the_same_scalar_languages_share_one_product():
    """The product automaton of a context's scalar languages, and the regions
    minimized from it, are built once per set of languages: contexts of other
    schemas with the same languages (branches that repeat a schema) share them."""
    short, xs = {"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^x"}
    schemas = Schemas({"anyOf": [short, xs, dict(short), dict(xs)]})
    (first, second, third, fourth), = schemas.node(schemas.root()).any_of
    builder = _Builder(schemas, False, False)
    one, other = builder.partition(frozenset({first, second})), builder.partition(frozenset({third, fourth}))
    assert one is not other and one.product is other.product
    assert one.labels() == {frozenset(), frozenset({first}), frozenset({second}), frozenset({first, second})}
    assert other.labels() == {frozenset(), frozenset({third}), frozenset({fourth}), frozenset({third, fourth})}
    assert one.region(frozenset({second})) is other.region(frozenset({fourth}))
    assert [other.region(frozenset({fourth})).matches(text) for text in (b'"xyzw"', b'"xy"', b'"abcd"')] == \
        [True, False, False]


def combined_object_schemas():
    """Object schemas under allOf / anyOf / oneOf / not / if-then-else, some
    reached twice (a $ref from two branches)."""
    leaves = [{"required": ["a"]}, {"required": ["b"]}, {"properties": {"a": {"type": "integer"}}},
              {"maxProperties": 1}, {"type": "object"}, True, False]

    def trees(leaves):
        return st.recursive(st.sampled_from(leaves), lambda children: st.one_of(
            *[st.lists(children, min_size=1, max_size=3).map(lambda xs, k=k: {k: xs}) for k in ("allOf", "anyOf", "oneOf")],
            children.map(lambda x: {"not": x}),
            st.tuples(children, children, children).map(lambda t: {"if": t[0], "then": t[1], "else": t[2]})),
            max_leaves=10)
    return st.builds(lambda d, t: {"$defs": {"d": d}, "allOf": [t]}, trees(leaves), trees(leaves + [{"$ref": "#/$defs/d"}]))


@given(schema=combined_object_schemas(), failed=st.integers(0, (1 << 10) - 1))
@example(schema={"$defs": {"d": {"required": ["a"]}}, "allOf": [{"$ref": "#/$defs/d"}, {"not": {"$ref": "#/$defs/d"}}]},
         failed=0)  # d twice: the two results are not independent
def test_reachable_labels_are_those_of_some_results(schema, failed):
    """possible_labels (what each schema can still be, read bottom-up) gives
    exactly the labels of all the ways the open sets can hold."""
    schemas = Schemas(schema)
    product = _Builder(schemas, False, False)._product(frozenset({schemas.root()}), "object")
    assume(len(product.sets) <= 10)
    failed &= (1 << len(product.sets)) - 1
    free = [k for k in range(len(product.sets)) if not failed >> k & 1]
    every = {product.label(sum(1 << k for j, k in enumerate(free) if bits >> j & 1)) for bits in range(1 << len(free))}
    assert product.possible_labels(failed) == every


def test_long_strings_keep_escaped_quotes():
    """Strings counted by grammar rules (over 64 code points allowed) may hold
    escaped quotes anywhere, a lexeme boundary included."""
    schema = {"type": "string", "maxLength": 100}
    grammar = compiled(schema)
    for value in ['x"y', '{"a": "b"}', '"' * 100, "a" * 15 + '"' + "\\" * 20]:
        assert valid(schema, value) and accepts(grammar, value)
    for value in ['"' * 101, 'x"y' * 34]:
        assert not valid(schema, value) and not accepts(grammar, value)


ADDRESS = "https://example.com/schemas/address.json"
DOCUMENTS = {
    ADDRESS: {"type": "object", "properties": {"city": {"$ref": "strings.json#/$defs/name"},
                                               "zip": {"$ref": "strings.json#zip"}}, "required": ["city"]},
    "https://example.com/schemas/strings.json": {"$defs": {"name": {"type": "string", "minLength": 1},
                                                           "zip": {"$anchor": "zip", "pattern": "^[0-9]{5}$"}}},
    "https://example.com/moved.json": {"$id": "https://example.com/real/id.json", "$ref": "#/$defs/n",
                                       "$defs": {"n": {"type": "integer"}}},
}


def test_refs_to_other_documents():
    grammar = json_schema({"properties": {"home": {"$ref": ADDRESS}, "n": {"$ref": "https://example.com/moved.json"}}},
                          documents=DOCUMENTS)
    for value in [{"home": {"city": "A", "zip": "12345"}}, {"home": {"city": "A"}, "n": 3}]:
        assert accepts(grammar, value), value
    for value in [{"home": {"city": ""}}, {"home": {"city": "A", "zip": "1234"}}, {"home": {}}, {"n": "3"}]:
        assert not accepts(grammar, value), value
    # A schema whose own $id places it among the documents refers to them relatively.
    relative = json_schema({"$id": "https://example.com/schemas/person.json", "properties": {"home": {
        "$ref": "address.json"}}}, documents=DOCUMENTS)
    assert accepts(relative, {"home": {"city": "A"}}) and not accepts(relative, {"home": {"city": 1}})


def test_metaschema_vocabularies_decide_which_keywords_apply():
    meta = "https://example.com/meta/no-validation"
    documents = {meta: {"$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True,
                                        "https://json-schema.org/draft/2020-12/vocab/applicator": True}}}
    grammar = json_schema({"$schema": meta, "properties": {"no": False, "n": {"minimum": 10}}}, documents=documents)
    assert accepts(grammar, {"n": 1}) and not accepts(grammar, {"no": 1})
    assert "minimum at /properties/n (its vocabulary is not in use)" in grammar.ignored_keywords
    documents[meta]["$vocabulary"]["https://example.com/vocab/mine"] = True
    with pytest.raises(ConstrainedError, match="requires the vocabulary https://example.com/vocab/mine"):
        json_schema({"$schema": meta}, documents=documents)


@pytest.mark.parametrize("schema, documents, message", [
    ({"properties": {"a": {"$ref": "https://example.com/other.json#/$defs/x"}}}, DOCUMENTS,
     "$ref 'https://example.com/other.json#/$defs/x' at /properties/a names the remote schema "
     "https://example.com/other.json"),
    ({"$ref": ADDRESS + "#/$defs/missing"}, DOCUMENTS, "no schema at /$defs/missing of " + ADDRESS),
    ({"$ref": "https://example.com/moved.json#/$defs/m"}, DOCUMENTS,
     "no schema at /$defs/m of https://example.com/moved.json"),
    ({"$ref": ADDRESS}, {ADDRESS: {"properties": {"city": {"type": "strin"}}}}, f"'type' at {ADDRESS}#/properties/city"),
    ({"$ref": "https://json-schema.org/draft/2020-12/schema"}, None, "metaschema"),
    ({}, {"address.json": {}}, "not an absolute URI"),
    ({}, {ADDRESS: [1]}, "not a schema"),
])
def test_bad_references_are_refused(schema, documents, message):
    with pytest.raises(ConstrainedError) as error:
        json_schema(schema, documents=documents)
    assert message in str(error.value)


def test_json_mode_accepts_any_value():
    grammar = constrained.json()
    for value in [None, 0, -1.5e300, "é\n\"", [], {}, [1, {"a": [True, None, {"": ""}]}]]:
        assert accepts(grammar, value)
    for text in ["", "[1,]", "{'a': 1}", "01", "[1] [2]", '{"a"}', "nul"]:
        assert not grammar.matches(text)


def test_schema_inputs(tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    for source in (json.dumps(schema), path, str(path)):
        grammar = json_schema(source)
        assert accepts(grammar, {"n": 1}) and not accepts(grammar, {"n": "1"})


def test_pydantic_model():
    pydantic = pytest.importorskip("pydantic")

    class Address(pydantic.BaseModel):
        city: str
        zip: str | None = None

    class Person(pydantic.BaseModel):
        name: str
        age: int
        addresses: list[Address] = []

    grammar = json_schema(Person)
    assert accepts(grammar, {"name": "A", "age": 3, "addresses": [{"city": "B", "zip": None}]})
    assert not accepts(grammar, {"name": "A", "age": "3"})
    assert not accepts(grammar, {"name": "A", "age": 3, "addresses": [{"zip": "1"}]})


@pytest.mark.parametrize("schema, message", [
    ({"type": "strin"}, "'type' at the schema root"),
    ({"properties": {"a": {"minLength": -1}}}, "'minLength' at /properties/a"),
    ({"items": {"$ref": "#/$defs/missing"}}, "#/$defs/missing"),
    ({"properties": {"a": {"$ref": "https://example.com/s.json"}}}, "remote"),
    ({"properties": {"a/b": {"anyOf": [{"properties": {f"p{k}": {}}} for k in range(13)], "unevaluatedProperties": False}}},
     "'unevaluatedProperties' at /properties/a~1b"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "'uniqueItems' at the schema root"),
    ({"type": "array", "items": {"type": "object", "additionalProperties": False}, "uniqueItems": True},
     "'uniqueItems' at the schema root: its items may be objects that cannot always take one more property"),
    ({"type": "array", "items": {"type": "object", "maxProperties": 3}, "uniqueItems": True},
     "'uniqueItems' at the schema root: its items may be objects"),
    # One more property would make these invalid: after '[{},{', "}" closes a repeat, and "," leads nowhere.
    ({"type": "array", "items": {"type": "object", "not": {"minProperties": 1}}, "uniqueItems": True},
     "'uniqueItems' at the schema root: its items may be objects"),
    ({"type": "array", "items": {"oneOf": [{"type": "object"}, {"type": "object", "minProperties": 2}]},
      "uniqueItems": True}, "'uniqueItems' at the schema root: its items may be objects"),
    ({"allOf": [{"if": {"properties": {f"p{k}": {"const": 1}}}, "then": {"required": [f"q{k}"]}} for k in range(13)]},
     "the schema is too complex to compile: 13 object schemas combine at /allOf/0/if through schemas they share"),
    ({"anyOf": [{"properties": {"a": {"required": [f"p{k}"]}}} for k in range(13)]},  # 2**13 ways for "a"'s value
     "13 object schemas combine at /anyOf/0/properties/a and give over 4096 outcomes"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "no JSON value"),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 4}}, "required": ["a"]},
     "no JSON value"),
    ({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, "refers to itself"),
    ({"$ref": "#/$defs/b", "$defs": {"b": {"$ref": "#/$defs/b"}}}, "cycle"),
    ({"type": "string", "format": "idn-hostname"}, "'format' at the schema root"),
    # Strings of format regex are a grammar's, and no grammar takes those that fail it, nor DFAs them.
    ({"not": {"format": "regex"}}, "'format' at /not: format 'regex' is enforced only where a string must meet it"),
    ({"oneOf": [{"format": "regex"}, {"type": "string"}]}, "'format' at /oneOf/0"),
    ({"propertyNames": {"format": "regex"}}, "'format' at /propertyNames"),
    ({"type": "array", "items": {"format": "regex"}, "uniqueItems": True}, "'format' at /items"),
    ({"type": "string", "format": "regex", "maxLength": 20}, "'format' at the schema root"),
    ({"properties": {"tags": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "string", "format": "email"}]}}},
     "at /properties/tags (its type, string, number, enum and combinator keywords together) are too complex"),
    ("{not json", "not valid JSON"),
    (42, "a schema is"),
    # Found by mutating MaskBench schemas at random: each crashed with another exception before.
    ({"properties": {"a": {"maxLength": 1e308}}}, "'maxLength' at /properties/a: string lengths are counted up to"),
    ({"type": "string", "minLength": 10**30}, "'minLength' at the schema root"),
    ({"allOf": [{"allOf": True}], "unevaluatedProperties": False}, "'allOf' at /allOf/0 must be a non-empty list"),
])
def test_bad_schemas_are_refused(schema, message):
    with pytest.raises(ConstrainedError, match=None) as error:
        json_schema(schema)
    assert message in str(error.value)


def test_extreme_but_valid_keyword_values_compile():
    """Values that used to crash the compiler (found by mutating MaskBench
    schemas at random): a patternProperties pattern that matches no name
    ("$id": the end, then more) applies to nothing; maxLength on a schema
    without strings, or along with an enum, counts nothing; a multipleOf with
    a 324-digit scale; a huge length skipped by lenient mode."""
    grammar = compiled({"patternProperties": {"$id": {"type": "integer"}}, "additionalProperties": False})
    assert accepts(grammar, {}) and not accepts(grammar, {"$id": 1})
    grammar = compiled({"patternProperties": {"$id": {}}, "required": ["a"]})
    assert accepts(grammar, {"a": "x"}) and not accepts(grammar, {})
    assert accepts(compiled({"type": "integer", "maxLength": 1e308}), 5)
    grammar = compiled({"enum": ["a", "bc"], "maxLength": 10**30})
    assert accepts(grammar, "bc") and not accepts(grammar, "b")
    grammar = compiled({"multipleOf": 5e-324})
    assert accepts(grammar, 1) and accepts(grammar, 0.5) and not grammar.matches("1e-400")
    lenient = json_schema({"type": "string", "minLength": 3, "maxLength": 1e308}, lenient=True)
    assert len(lenient.skipped) == 1 and "'maxLength'" in lenient.skipped[0]
    assert accepts(lenient, "x" * 300) and not accepts(lenient, "ab")


def test_items_counted_without_a_rule_each():
    grammar = compiled({"type": "array", "items": {"type": "integer"}, "maxItems": 100_000})
    assert accepts(grammar, []) and accepts(grammar, [1] * 700)
    assert not accepts(grammar, [1, "x"])


def test_a_rule_per_item_is_refused_past_max_count():
    # contains tells the items apart, so each position needs a rule of its own.
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "contains": {"type": "integer"}, "minItems": 100_000}
    with pytest.raises(ConstrainedError, match="the array at the schema root would need a grammar rule per item") as error:
        json_schema(schema)
    assert "Lower minItems/maxItems" in str(error.value)


def test_a_lexer_past_its_budget_is_refused(monkeypatch):
    """A schema whose lexer would need more (state, terminal) cells than the
    budget is a clear error, not gigabytes of tables."""
    import constrained.lexer

    schema = {"properties": {f"name{i}": {"type": "string", "maxLength": 20} for i in range(4)}}
    json_schema(schema)
    monkeypatch.setattr(constrained.lexer, "_MAX_STATE_TERMINALS", 1000)
    with pytest.raises(ConstrainedError, match="too complex to compile: its lexer would need"):
        json_schema(schema)


def test_unique_strings_however_spelled_are_one_item():
    grammar = compiled({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    assert grammar.matches('["é", "e\\u0301"]')  # (different code points)
    assert not grammar.matches('["é", "\\u00e9"]')
    assert not grammar.matches('["\\ud83d\\ude00", "\U0001F600"]')
    assert not accepts(grammar, ["é", "é"], ensure_ascii=False)


def test_the_mask_keeps_an_array_from_repeating_a_string_item(tokenizers):
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    token = {t: vocab.tokens.index(t) for t in [b'["', b'...', b'..."', b'"', b'",', b'"]', b'.', b'","', b'","","']}
    matcher = compiled({"type": "array", "items": {"type": "string"}, "uniqueItems": True}).matcher(tok)
    matcher.advance(token[b'["'])
    assert matcher.is_allowed(token[b'","']) and not matcher.is_allowed(token[b'","","'])  # "" twice in one token
    for t in [b'...', b'",', b'"']:
        matcher.advance(token[t])
    assert not matcher.is_allowed(token[b'..."'])  # it would close "..." again
    matcher.advance(token[b'...'])
    assert not any(matcher.is_allowed(token[t]) for t in [b'"', b'",', b'"]'])
    assert matcher.is_allowed(token[b'.']) and matcher.is_allowed(token[b'..."'])  # "...." and "......" are new
    with pytest.raises(ConstrainedError, match="repeats a string that must be unique"):
        matcher.advance(token[b'"]'])
    matcher.advance(token[b'.'])
    matcher.advance(token[b'"]'])
    assert matcher.is_accepting() and matcher.text() == '["...","...."]'
    matcher.rollback(2)
    assert not matcher.is_allowed(token[b'"]'])


def test_format_regex_takes_what_both_ecma_262_and_python_take():
    """The format means ECMA-262; jsonschema's checker compiles with Python's
    re. Each takes forms the other refuses, and those are left out."""
    grammar = compiled({"type": "string", "format": "regex"})
    for regex in ["(?<n>x)", "(?<n>a)\\k<n>", "[]", "[^]", "\\cA", "(?<=a+)b", "a{,5}"]:  # ECMA-262 only
        assert not accepts(grammar, regex), regex
    for regex in ["(?P<n>x)", "(?i)a", "\\A", "\\Z", "(?#c)", "a{2"]:  # Python only (or Annex B)
        re.compile(regex)
        assert not accepts(grammar, regex), regex
    assert not accepts(grammar, "(?=a)*")  # a quantified lookahead: both take it, but ECMA-262 only in Annex B
    assert not accepts(grammar, "[a&&b]") and accepts(grammar, "[a&b|]&&")  # Python warns of set operations
    for regex in ["\\u00e9\\x41[\\b\\-]", "😀+|[é-]", "a{0,99}?", "\\/\\'\\ \\~"]:
        re.compile(regex)
        assert accepts(grammar, regex) and accepts(grammar, regex, ensure_ascii=False), regex


@given(data=st.data())
def test_plain_regexes_are_regexes_to_both(data):
    """A string of characters that are not syntax, ".", "^" and "$" (all that
    keywords beside format "regex" may allow, for the format to be dropped) is
    taken by the format's grammar and compiles in Python's re."""
    text = data.draw(members(json_regex.plain(), max_size=12))
    value = json.loads(text)
    re.compile(value)
    assert accepts(compiled({"type": "string", "format": "regex"}), value), value


def test_format_regex_beside_plain_keywords():
    """Beside keywords that allow only plain regexes, the format adds nothing;
    beside others (strings of some length may be any text), it is refused."""
    grammar = compiled({"type": "string", "format": "regex", "minLength": 1, "pattern": "^[0-9:.]+$"})
    assert accepts(grammar, "12:30.5") and not accepts(grammar, "") and not accepts(grammar, "1+")
    for schema in [{"format": "regex", "maxLength": 5}, {"format": "regex", "pattern": "^/.+/$"}]:
        with pytest.raises(ConstrainedError, match="format 'regex' cannot be enforced"):
            json_schema(schema)


def test_caps_leave_regex_strings_uncapped():
    grammar = json_schema({"type": "array", "items": {"type": "string", "format": "regex"}},
                          max_string_length=2, max_items=2)
    assert grammar.uncapped == ("strings of format 'regex' at /items are not capped: grammar rules take them, "
                                "which count no code points",)
    assert accepts(grammar, ["abc+"]) and not accepts(grammar, ["a", "b", "c"]) and not accepts(grammar, ["("])


def test_caps_leave_unique_strings_uncapped():
    grammar = json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                          max_string_length=2, max_items=3)
    assert any("items of the uniqueItems array at the schema root are not capped" in u for u in grammar.uncapped)
    assert accepts(grammar, ["abcdef", "abcde"])
    assert not accepts(grammar, ["a", "a"]) and not accepts(grammar, ["a", "b", "c", "d"])


def test_unique_strings_with_few_endings_never_lead_into_an_earlier_item(tokenizers):
    """Where an item's string can only end in few ways, a token after which
    every one of them is an earlier item is refused before it, not at the
    closing quote: that would be a dead end."""
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    token = {t: vocab.tokens.index(t) for t in [b'["', b'1', b'2', b'x', b'",', b' "', b'"', b'"]', b'abc', b'ab',
                                                 b'c', b'd']}
    enum = compiled({"type": "array", "items": {"enum": [f"{k}x" for k in range(9)]}, "uniqueItems": True})
    matcher = enum.matcher(tok)
    for t in [b'["', b'1', b'x', b'",', b' "']:
        matcher.advance(token[t])
    assert not matcher.is_allowed(token[b'1']) and matcher.is_allowed(token[b'2'])  # "1x" is the only "1..."
    pattern = compiled({"type": "array", "items": {"type": "string", "pattern": "^[0-9]+x$"}, "uniqueItems": True})
    matcher = pattern.matcher(tok)
    for t in [b'["', b'1', b'x', b'",', b' "', b'1']:
        matcher.advance(token[t])
    assert not matcher.is_allowed(token[b'x']) and matcher.is_allowed(token[b'1'])  # "1x" again, or "11..."
    short = compiled({"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": True})
    matcher = short.matcher(tok)
    for t in [b'["', b'abc', b'",', b' "', b'ab']:
        matcher.advance(token[t])
    assert not matcher.is_allowed(token[b'c']) and matcher.is_allowed(token[b'd']) and matcher.is_allowed(token[b'"'])
    matcher.advance(token[b'd'])
    assert matcher.is_allowed(token[b'"]'])
    escaped = compiled({"type": "array", "items": {"enum": ["é", *"abcdefgh"]}, "uniqueItems": True})
    matcher = escaped.matcher(tok)
    for t in [b'["', b'\\', b'u', b'00', b'e', b'9', b'",', b' "']:
        matcher.advance(vocab.tokens.index(t))
    assert not matcher.is_allowed(vocab.tokens.index(b'\\')) and matcher.is_allowed(token[b'd'])  # only "\u00e9"


def test_a_token_that_finishes_an_item_and_begins_another_is_checked_against_both(tokenizers):
    """'","\\' after '["\\u00e9","\\u00e9é' finishes "éé", and its second quote
    begins an escape that can only be "é" or "éé" again: a dead end, though
    other strings are left and the array had one item. (Over 8 strings: the
    matcher keeps them distinct, not the grammar.)"""
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    grammar = compiled({"type": "array", "items": {"enum": ["é", "éé", *"abcdefg"]}, "uniqueItems": True})
    matcher = grammar.matcher(tok)
    for token in encode_exact(tok, '["\\u00e9","\\u00e9é'):
        matcher.advance(token)
    assert not matcher.is_allowed(vocab.tokens.index(b'","\\')) and matcher.is_allowed(vocab.tokens.index(b'","'))


def test_unique_items_are_no_more_than_the_strings_they_may_be():
    items = {"type": "string", "pattern": "^[a-d]?[xé]$"}  # 10 strings (over 8: the matcher keeps them distinct)
    every = [a + b for a in ["", *"abcd"] for b in "xé"]
    assert accepts(compiled({"type": "array", "items": items, "uniqueItems": True, "minItems": 10}), every)
    with pytest.raises(ConstrainedError, match="no JSON value satisfies"):
        json_schema({"type": "array", "items": items, "uniqueItems": True, "minItems": 11})


def test_long_unique_strings_are_one_automaton():
    """Elsewhere rules count a long string's chunks; a unique item's string is
    one lexeme, which the matcher reads, up to the automaton budget."""
    grammar = compiled({"type": "array", "items": {"type": "string", "maxLength": 100}, "uniqueItems": True})
    assert accepts(grammar, ["x" * 100, "x" * 99]) and not accepts(grammar, ["x" * 101])
    assert not accepts(grammar, ["x" * 100, "x" * 100])
    with pytest.raises(ConstrainedError, match="minLength/maxLength at /items .* or is a unique item: .* at most 832"):
        json_schema({"type": "array", "items": {"type": "string", "maxLength": 5000}, "uniqueItems": True})


def test_the_mask_keeps_an_array_from_repeating_an_object_item(tokenizers):
    """An object item that may always take another property: its "}" is
    refused where it would close a repeat, wherever it is in a token, and
    the object goes on."""
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    token = {t: vocab.tokens.index(t) for t in [b'"}', b'"},', b'"}\n', b'",', b'"', b'}', b'{}', b'{"', b'{},\n']}
    grammar = compiled({"type": "array", "items": {"type": "object"}, "uniqueItems": True})
    matcher = grammar.matcher(tok)
    for t in encode_exact(tok, '[{"a": "x"}, {"a": "x'):
        matcher.advance(t)
    assert not any(matcher.is_allowed(token[t]) for t in [b'"}', b'"},', b'"}\n'])
    assert matcher.is_allowed(token[b'",']) and matcher.is_allowed(token[b'"'])
    matcher.advance(token[b'}'])  # (inside the string: a "}" that closes nothing)
    assert matcher.is_allowed(token[b'"}'])
    matcher = grammar.matcher(tok)
    for t in encode_exact(tok, '[{}, '):
        matcher.advance(t)
    assert not matcher.is_allowed(token[b'{}']) and matcher.is_allowed(token[b'{"'])
    assert not grammar.matcher(tok).accepts(encode_exact(tok, '[{}, ') + [token[b'{},\n']])


def test_unique_objects_compare_their_numbers_as_numbers():
    """Equal as numbers, however spelled or long (Python's json would stop at
    4,300 digits, or read 1e400 and 2e400 as one infinity)."""
    grammar = compiled({"type": "array", "items": {"type": "object"}, "uniqueItems": True})
    assert not grammar.matches('[{"a": 100000000000000000000000}, {"a": 1e23}]')
    assert not grammar.matches('[{"a": 0.5}, {"a": 5e-1}]') and grammar.matches('[{"a": 1e400}, {"a": 2e400}]')
    long = "7" * 5000
    assert grammar.matches(f'[{{"a": {long}}}, {{"a": {long}0}}]')
    assert not grammar.matches(f'[{{"a": {long}}}, {{"a": {long}.0}}]')


def test_a_token_may_finish_a_unique_string_and_begin_it_again(tokenizers):
    """'","+' after '["+' finishes "+" and begins a string that can only be
    "+" again (maxLength 1): a dead end, with no item before it."""
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    matcher = compiled({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True}).matcher(tok)
    for token in encode_exact(tok, '["+'):
        matcher.advance(token)
    assert not matcher.is_allowed(vocab.tokens.index(b'","+')) and matcher.is_allowed(vocab.tokens.index(b'","'))


def test_unique_objects_that_may_fail_the_items_schema_are_kept_distinct_too():
    """Under anyOf, a uniqueItems array may hold items that fail its items
    schema (the other branch holds): their objects open where a unique item's
    may, so they are kept distinct as well, as are those that meet it. That
    refuses some valid values, never accepts an invalid one."""
    items = {"type": "object", "properties": {"p": {"type": "string"}}}
    schema = {"anyOf": [{"properties": {"r": {"type": "array", "items": items, "uniqueItems": True}}},
                        {"required": ["x"]}]}
    grammar = compiled(schema)
    assert accepts(grammar, {"r": [{"p": "a"}, {"p": "b"}]}) and accepts(grammar, {"r": [{"p": 1}, {"p": 2}], "x": 0})
    assert not accepts(grammar, {"r": [{"p": "a"}, {"p": "a"}]}) and not accepts(grammar, {"r": [{"p": 1}]})
    assert accepts(grammar, {"r": [{"p": 1}, {"p": 1}], "x": 0})  # (once an item fails, the rest are not kept)
    valid = {"r": [{"p": "a"}, {"p": "a"}], "x": 0}
    assert jsonschema.Draft202012Validator(schema).is_valid(valid) and not accepts(grammar, valid)


def test_lenient_skips_and_reports():
    schema = {"type": "array", "items": {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
              "uniqueItems": True, "maxItems": 2}
    grammar = json_schema(schema, lenient=True)
    assert any("uniqueItems" in s and "the schema root" in s for s in grammar.skipped)
    assert accepts(grammar, [{}, {"a": 1}])
    assert not accepts(grammar, [{}, {}, {}])


def test_annotations_and_unknown_keywords_are_ignored():
    schema = {"title": "T", "description": "d", "examples": [1], "x-vendor": {"type": "string"}, "type": "integer"}
    grammar = json_schema(schema)
    assert accepts(grammar, 1) and not accepts(grammar, "1")
    assert grammar.ignored_keywords == ("x-vendor at the schema root",)
    # A format no draft defines is an annotation too.
    custom = json_schema({"type": "string", "format": "int32", "maxLength": 2})
    assert accepts(custom, "ab") and not accepts(custom, "abc")
    assert custom.ignored_keywords == ("format 'int32' at the schema root",)
    assert "JSON Schema" in grammar.description
    # Up to draft-07 the keywords beside a $ref are ignored, as those drafts say, and reported.
    beside_ref = json_schema({"$schema": DRAFT7, "definitions": {"o": {"type": "object"}},
                              "properties": {"a": {"$ref": "#/definitions/o", "type": "string"}}})
    assert beside_ref.ignored_keywords == ("type at /properties/a (beside $ref, before draft 2019-09)",)


def test_token_level(tokenizers):
    tokenizer = tokenizers("llama3")
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {
        "enum": ["a", "b"]}, "uniqueItems": True}}, "required": ["name"], "additionalProperties": False}
    grammar = compiled(schema)
    good = json.dumps({"name": "Zoë", "tags": ["b", "a"]})
    matcher = grammar.matcher(tokenizer)
    assert matcher.accepts(encode_exact(tokenizer, good))
    for bad in ['{"name": "x", "tags": ["a", "a"]}', '{"tags": []}', '{"name": "x", "other": 1}']:
        assert not grammar.matcher(tokenizer).accepts(encode_exact(tokenizer, bad))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.sampled_from([0.5, -2.25, 1e21]) | st.sampled_from(
        ["", "a", "ab", "x-1", "é"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "kind", "x-1"]), inner,
                                                                max_size=3),
    max_leaves=8)

SOUNDNESS_SCHEMAS = [c[1] for c in CASES if c[0] in (
    "oneOf objects", "oneOf overlapping objects", "not object", "if/then/else", "allOf", "dependentSchemas",
    "contains", "uniqueItems", "uniqueItems of strings", "uniqueItems of objects", "minProperties over undeclared names",
    "enum",
    "patternProperties", "unevaluatedProperties with anyOf",
    "unevaluatedProperties with if/then/else", "unevaluatedProperties with dependentSchemas",
    "unevaluatedItems with prefixItems and contains", "unevaluatedItems with oneOf")]


@given(value=JSON_VALUES, k=st.integers(0, len(SOUNDNESS_SCHEMAS) - 1))
def test_accepted_values_are_valid(value, k):
    schema = SOUNDNESS_SCHEMAS[k]
    if accepts(compiled(schema), value):
        assert valid(schema, value)


# Small schemas where what is evaluated depends on which in-place branches hold.
UNEVALUATED_LEAVES = st.sampled_from([True, {"type": "integer"}, {"type": "string"}, {"const": 1}])


def unevaluated_schemas(kind: str):
    own = {"object": st.fixed_dictionaries({}, optional={
        "properties": st.dictionaries(st.sampled_from(["a", "b"]), UNEVALUATED_LEAVES, min_size=1, max_size=2),
        "patternProperties": st.just({"^x": {"type": "integer"}}),
        "required": st.sampled_from([["a"], ["b"]]),
        "additionalProperties": st.just({"type": "string"})}),
        "array": st.fixed_dictionaries({}, optional={
            "prefixItems": st.lists(UNEVALUATED_LEAVES, min_size=1, max_size=3),
            "items": st.just({"type": "string"}),
            "contains": UNEVALUATED_LEAVES,
            "minContains": st.just(0)})}[kind]
    rest = {"object": "unevaluatedProperties", "array": "unevaluatedItems"}[kind]

    def nest(inner):
        branches = st.lists(inner, min_size=1, max_size=3)
        applicators = st.fixed_dictionaries({}, optional={
            "anyOf": branches, "oneOf": branches, "allOf": branches, "if": inner, "then": inner, "else": inner,
            "not": inner, rest: st.sampled_from([False, {"type": "string"}]),
            **({"dependentSchemas": st.dictionaries(st.just("a"), inner, min_size=1)} if kind == "object" else {})})
        return st.tuples(own, applicators).map(lambda parts: parts[0] | parts[1])

    return st.tuples(st.recursive(own, nest, max_leaves=5), st.sampled_from([False, {"type": "string"}])).map(
        lambda parts: parts[0] | {rest: parts[1]})


UNEVALUATED_VALUES = {
    "object": st.dictionaries(st.sampled_from(["a", "b", "c", "xa"]), st.sampled_from([1, "s", None]), max_size=4),
    "array": st.lists(st.sampled_from([1, "s", None]), max_size=4)}


@given(data=st.data(), kind=st.sampled_from(["object", "array"]))
def test_unevaluated_matches_jsonschema(data, kind):
    """Random unevaluatedProperties / unevaluatedItems schemas: no invalid value is
    accepted, and every valid one is, in some order of its members."""
    schema = data.draw(unevaluated_schemas(kind))
    try:
        grammar = json_schema(schema)
    except ConstrainedError as e:  # too many cases, or no value at all
        assert "unevaluated" in str(e) or "too complex" in str(e) or "no JSON value" in str(e), str(e)
        return
    for value in data.draw(st.lists(UNEVALUATED_VALUES[kind], min_size=10, max_size=10)):
        orders = [dict(p) for p in itertools.permutations(value.items())] if kind == "object" else [value]
        assert any(accepts(grammar, v) for v in orders) == valid(schema, value), (schema, value)
