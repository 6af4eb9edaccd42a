"""JSON Schema as a constraint: ``json_schema(schema)``, and ``json()`` for any JSON value.

A schema compiles in three steps:

1. *Resolve and normalise* (this module): the document is read, ``$ref``s are
   resolved (json_references.py: JSON pointers, ``$anchor``, ``$id``s, other
   documents the caller passes), and every subschema the root reaches becomes
   a ``Node``: what its own keywords allow per JSON type (scalars as one byte
   DFA over their JSON text, objects and arrays as an ``ObjectAtom`` /
   ``ArrayAtom``), and how it combines other nodes
   that apply to the same value (``allOf``, ``anyOf``, ``oneOf``, ``not``, with
   ``$ref`` next to other keywords, ``if``/``then``/``else``, ``enum`` of objects
   and ``dependent*`` written in terms of those).
2. *Combine* (json_schema_rules.py): a deterministic bottom-up tree automaton
   over JSON values. A value is classified by which of the schemas that apply
   to it (its *context*) it satisfies (its *label*): scalars by disjoint DFA
   regions, objects and arrays by product automata over their members. Every
   boolean combination is exact this way, and recursion is just a rule that
   refers to itself.
3. *Emit* an LALR(1) grammar whose nonterminals are (context, label) pairs and
   whose terminals are byte DFAs, compiled by ``grammar_from_rules()``.

Semantics (draft 2020-12, plus the draft-04/06/07 spellings ``definitions``,
``dependencies``, array-form ``items`` with ``additionalItems``, boolean
``exclusiveMinimum``/``exclusiveMaximum``, draft-04 ``id``; a document whose
``$schema`` is draft-04 or -03 also gets their integers: no fraction or
exponent, so ``1.0`` is not one; one whose ``$schema`` is draft-03 to -07 gets
their ``$ref``, which stands for its target alone):

* Keywords: type, enum, const, multipleOf, minimum, maximum, exclusiveMinimum,
  exclusiveMaximum, minLength, maxLength, pattern (ECMA-262, unanchored),
  format ("regex" by grammar rules: json_regex.py), properties, required,
  additionalProperties, patternProperties, propertyNames, minProperties
  (over undeclared names too, which the matcher keeps distinct),
  maxProperties, dependentRequired,
  dependentSchemas, items, prefixItems, additionalItems, minItems, maxItems,
  contains, minContains, maxContains, uniqueItems (where the items are a small
  finite set of scalars, or strings of one automaton, which the matcher keeps
  distinct: json_unique.py), allOf, anyOf, oneOf, not,
  if/then/else, $ref, $defs, $anchor, $id, unevaluatedProperties and
  unevaluatedItems (json_unevaluated.py).
  Boolean schemas.
* Annotations (title, description, default, examples, deprecated, readOnly,
  ...) and keywords no draft defines (``x-...``, typos) are ignored, as the
  specification says; their names are kept in ``.ignored_keywords``.
* ``$ref``: JSON pointers, ``$anchor``, ``$id`` (relative or absolute, URNs
  too), and other documents the caller passes as ``documents``; a reference
  to anything else is an error naming its URI. ``$dynamicRef`` in its dynamic
  scope: a schema reached through different resources is a node per scope.
* A ``$schema`` among ``documents`` whose ``$vocabulary`` leaves out the
  applicator, validation or unevaluated vocabulary makes their keywords
  annotations; a required vocabulary this module does not know is an error.
* Keywords that cannot be enforced exactly (uniqueItems over objects,
  ...) are errors naming the keyword and its JSON pointer; with
  ``lenient=True`` they are skipped instead and listed in ``.skipped``.
* Spec defaults: additionalProperties allows any value under an undeclared
  key; ``strict_properties=True`` forbids undeclared keys where a schema
  declares properties and does not ask for others explicitly.
* Output order: declared properties (``properties`` and ``required`` names of
  every schema that applies to an object) keep each schema's ``properties``
  order; where schemas combine (allOf, anyOf, oneOf, if/then/else, $ref ...)
  their keys may interleave, within a budget of states
  (json_schema_rules._key_chains; past it, or where the orders disagree,
  merged into one that keeps the first schema's, reading the schemas a
  schema combines by keywords written before its ``properties`` first, in
  the order written, then its own keys, then the others), and a key only
  some alternatives declare may come late (_ObjectProduct.late_failures);
  with ``property_order="any"``, a declared key whose name has one spelling
  is free where a second value under its name could not change the result
  (json_schema_rules._ObjectProduct.settle): it comes anywhere, once (the
  matcher keeps those names distinct: json_unique.py); the other orders are
  cut into pieces that interleave as far as that budget allows
  (json_schema_rules._cut): every such key free where an object has at most
  6, and never less than schema order allows. Undeclared ones may come
  anywhere between them. Array items
  and object members are separated by ``,``; whitespace between tokens is
  bounded (``max_ignored`` bytes per gap).
* Caps (``max_string_length``, ``max_items``, off by default) restrict every
  emitted value, not the schemas: a node for them joins each value's context
  (json_schema_rules._caps). Strings whose pattern, format, enum or const make
  the capped automaton too large keep the schema's language (``.uncapped``),
  and so do the items of a uniqueItems array of strings.
* Two undeclared names may be equal (a JSON parser keeps the last value) and
  no grammar tells names apart, so where a repeated name could change the
  result (hide a value that failed, inflate the count for minProperties or
  maxProperties), an object takes one undeclared member per region of names
  (json_schema_rules._ObjectProduct.repeat_must_fail).
* Numbers compare by value (an ``enum`` of ``1`` also allows ``1.0``); strings
  by code points, however their characters are spelled.
* Strings (values and property names) are written in json.dumps spellings:
  each character as json.dumps spells it with ensure_ascii on or off
  (json_strings' default, which every string language here uses, so that
  differences between them stay exact). An ASCII character has one spelling,
  not one per way of escaping it, so keys, enums and formats take several
  times fewer states; a string counted in code points takes a fifth more
  (its \\u escapes leave out printable ASCII, which splits their hex digits).
"""

import json as json_lib
import numbers
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import dfa, json_numbers, json_regex, json_strings
from .errors import ConstrainedError
from .grammar import MAX_IGNORED, Grammar, grammar_from_rules
from .json_references import Documents, escape, where
from .lalr_tables import Conflict

ANY = "any"  # an atom with no constraint for its type (Node.scalar / .obj / .arr)
TYPES = ("null", "boolean", "integer", "number", "string", "object", "array")

# Keywords that only annotate or organise (the specification has them ignored by validation).
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "id", "$anchor",
    "$defs", "definitions", "deprecated", "readOnly", "writeOnly", "contentMediaType",
    "contentEncoding", "contentSchema", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor",
})
# Keywords this compiler enforces.
ENFORCED = frozenset({
    "type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "format", "properties", "required", "additionalProperties",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
    "dependentSchemas", "dependencies", "items", "prefixItems", "additionalItems", "minItems", "maxItems",
    "contains", "minContains", "maxContains", "uniqueItems", "allOf", "anyOf", "oneOf", "not", "if", "then",
    "else", "$ref", "$dynamicRef", "unevaluatedProperties", "unevaluatedItems",
})
REFERENCES = ("$ref", "$dynamicRef")
# Keywords of the specification that cannot be enforced exactly.
REFUSED = {
    "$recursiveRef": "it is draft 2019-09's; draft 2020-12 spells it $dynamicRef (with $dynamicAnchor)",
}
# The 2020-12 vocabularies whose keywords a metaschema's $vocabulary may leave out, and the others known.
VOCABULARY = "https://json-schema.org/draft/2020-12/vocab/"
VOCABULARY_KEYWORDS = {
    VOCABULARY + "applicator": frozenset({
        "prefixItems", "items", "contains", "additionalProperties", "properties", "patternProperties",
        "dependentSchemas", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not"}),
    VOCABULARY + "validation": frozenset({
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
        "maxProperties", "minProperties", "required", "dependentRequired"}),
    VOCABULARY + "unevaluated": frozenset({"unevaluatedItems", "unevaluatedProperties"}),
}
OTHER_VOCABULARIES = frozenset(VOCABULARY + v for v in (
    "core", "content", "meta-data", "format-annotation", "format-assertion"))
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
LONG_STRING = 64  # plain strings allowed more code points than this are counted by grammar rules, not one DFA
MAX_LONG_STRING = 1_000_000  # the largest length counted so (compiling takes ~1 s there, and grows with the count)
# Formats the drafts define: enforced, or refused where they cannot be. Others are annotations.
SPEC_FORMATS = (
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
)
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


@dataclass(frozen=True)
class ObjectAtom:
    """What an object must satisfy under one schema's own object keywords.
    Children are node ids (TRUE: anything, FALSE: nothing)."""

    properties: tuple = ()  # (name, node id), schema order
    required: tuple = ()  # names, in order
    patterns: tuple = ()  # (pattern, key DFA over the JSON string text, node id)
    additional: int = 0  # node id for keys neither declared nor matched by a pattern
    explicit_additional: bool = False  # additionalProperties is in the schema (strict_properties keeps it)
    names: int = 0  # propertyNames: node id the key (as a JSON string) must satisfy
    min_properties: int = 0
    max_properties: int | None = None


@dataclass(frozen=True)
class ArrayAtom:
    """What an array must satisfy under one schema's own array keywords."""

    prefix: tuple = ()  # node ids of the first items
    items: int = 0  # node id of the items after the prefix
    min_items: int = 0
    max_items: int | None = None
    contains: int | None = None
    min_contains: int = 1
    max_contains: int | None = None
    unique: bool = False
    pointer: str = ""  # for uniqueItems errors


@dataclass(eq=False)
class Node:
    """One schema: its own constraints per JSON type (a scalar DFA, ANY or None;
    an ObjectAtom, ANY or None; an ArrayAtom, ANY or None) and the nodes it
    combines for the same value."""

    pointer: str
    scalar: object = ANY
    obj: object = ANY
    arr: object = ANY
    all_of: tuple = ()
    any_of: tuple = ()  # groups of node ids: at least one holds in each
    one_of: tuple = ()  # groups of node ids: exactly one holds in each
    not_: tuple = ()  # node ids that must not hold
    values: tuple = ()  # the scalar values its enum / const lists
    # the nodes it combines by $ref, $dynamicRef, allOf, anyOf, oneOf or if/then/else written before its
    # "properties", in the order written: a reader meets their property names before its own
    leading: tuple = ()
    string_lengths: tuple | None = None  # (minLength, maxLength or None) where only lengths restrict its strings
    format: str | None = None  # the format its strings meet
    # whether its numbers meet integer or multipleOf, which read scientific notation in part (json_numbers)
    counts_digits: bool = False
    regex_strings: bool = False  # its strings are those of format "regex": derived by rules (json_regex.py)

    @property
    def long_string(self) -> tuple | None:
        """(minLength, maxLength or None) when the node's strings are long ones,
        counted by grammar rules and left out of ``scalar``."""
        lengths = self.string_lengths
        return lengths if lengths and max(lengths[0], lengths[1] or 0) > LONG_STRING else None

    @property
    def combines(self) -> tuple:
        """Every node this one refers to for the same value."""
        return self.all_of + tuple(i for g in self.any_of + self.one_of for i in g) + self.not_

    @property
    def combining(self) -> bool:
        """Whether it combines any node (``combines`` without building it: asked in hot loops)."""
        return bool(self.all_of or self.any_of or self.one_of or self.not_)


TRUE, FALSE = 0, 1


def json_schema(schema, *, documents: dict | None = None, strict_properties: bool = False,
                property_order: str = "schema", lenient: bool = False, max_ignored: int = MAX_IGNORED,
                max_string_length: int | None = None, max_items: int | None = None) -> Grammar:
    """Output that is a JSON value valid under ``schema``: a dict (or bool), JSON
    text, the path of a JSON file, or a pydantic model class.

    ``documents`` maps absolute URIs to the other schema documents that
    ``$ref``s may name (``{"https://example.com/address.json": {...}}``); json_schema
    never fetches anything, so a ``$ref`` to any other URI is an error naming it.
    ``strict_properties`` forbids properties a schema does not declare (unless
    it allows them explicitly); ``property_order="any"`` lets an object's
    declared properties come in any order, a free one at most once (where a
    property's name has several spellings, or a second value under its name
    could change the result, as under ``anyOf``, it is tracked: its order is
    kept as far as a budget of states allows; see the module's doc) (default
    "schema": schema order, which also guides a model through the schema); ``lenient`` skips keywords that cannot be
    enforced exactly instead of refusing the schema (see ``.skipped``);
    ``max_ignored`` bounds the whitespace between two tokens;
    ``max_string_length`` and ``max_items`` cap the string values (in code
    points) and arrays of the output, whatever the schema allows, so that a
    rambling model is made to close them (property names, numbers and depth
    are not capped; strings whose pattern, format, enum or const make the
    capped automaton too large are not either, nor the items of a uniqueItems
    array of strings, and they are listed in ``.uncapped``). A cap only takes values away: a schema no value of which
    fits (a required string with minLength above the cap) is refused as having
    no valid value."""
    from .json_schema_rules import left_recursive, schema_grammar, whitespace

    document, source = _load(schema)
    schemas = Schemas(document, documents, lenient=lenient)
    root = schemas.root()
    if property_order not in ("schema", "any"):
        raise ConstrainedError(f"property_order is 'schema' or 'any', got {property_order!r}")
    for name, cap in (("max_string_length", max_string_length), ("max_items", max_items)):
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or cap < 0):
            raise ConstrainedError(f"{name} is a non-negative integer or None, got {cap!r}")
    max_string_length, max_items = (None if cap is None else int(cap) for cap in (max_string_length, max_items))
    with dfa.gc_paused():  # the builder's objects live until it finishes
        rules, start, terminals, shadows, glued, uncapped, distinct = schema_grammar(
            schemas, root, strict_properties=strict_properties, any_order=property_order == "any",
            max_string_length=max_string_length, max_items=max_items)

    def compile_rules(rules):
        return grammar_from_rules(rules, start, terminals, {"WHITESPACE": whitespace()}, glued=glued, shadows=shadows,
                                  max_ignored=max_ignored, description=f"JSON Schema from {source}")
    try:
        compiled = compile_rules(left_recursive(rules))
    except Conflict:  # a rule of runs the parser must tell from another until the close (see left_recursive)
        compiled = compile_rules(rules)
    if distinct is not None:
        from .json_unique import DistinctItemsGrammar
        compiled = DistinctItemsGrammar(compiled, *distinct)
    compiled.skipped = tuple(schemas.skipped)
    compiled.uncapped = tuple(uncapped)
    compiled.ignored_keywords = tuple(sorted(schemas.ignored))
    return compiled


def json(*, max_ignored: int = MAX_IGNORED, max_string_length: int | None = None,
         max_items: int | None = None) -> Grammar:
    """Output that is any JSON value (JSON mode); the options as for json_schema()."""
    compiled = json_schema(True, max_ignored=max_ignored, max_string_length=max_string_length, max_items=max_items)
    compiled.description = "any JSON value"
    return compiled


def _load(schema):
    """(document, description of where it came from)."""
    if isinstance(schema, (dict, bool)):
        return schema, "a dict" if isinstance(schema, dict) else repr(schema)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema(), f"pydantic model {schema.__name__}"
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"') or schema in ("true", "false"):
        return _parse_json(schema, "the schema text"), "JSON text"
    if isinstance(schema, (str, Path)):
        path = Path(schema)
        if not path.is_file():
            raise ConstrainedError(
                f"schema {str(schema)[:80]!r} is neither JSON text nor the path of a file: pass a dict, "
                "JSON text, a path or a pydantic model class")
        return _parse_json(path.read_text(), str(path)), str(path)
    raise ConstrainedError(
        f"a schema is a dict, a bool, JSON text, a path or a pydantic model class, got {type(schema).__name__}")


def _parse_json(text: str, source: str):
    try:
        return json_lib.loads(text)
    except ValueError as e:
        raise ConstrainedError(f"{source} is not valid JSON: {e}") from None


class Schemas:
    """The nodes of one schema document (and the other ``documents`` its
    ``$ref``s name), numbered as they are reached. Ids 0 and 1 are the schemas
    ``true`` and ``false``; ``node(i)`` normalises on first use. Nodes of the
    document are known by their location (see json_references.py)."""

    def __init__(self, document, documents=None, lenient: bool = False):
        self.documents = Documents(document, documents)
        self.lenient = lenient
        # Draft-04 (and -03) define an integer as a number without a fraction or exponent part;
        # later drafts as an integer value (1.0 is one). The document's own $schema decides.
        declared = document.get("$schema") if isinstance(document, dict) else None
        self.integers_without_fraction = isinstance(declared, str) and any(
            f"draft-0{n}/" in declared for n in (3, 4))
        # Up to draft-07 a $ref stands for the schema it names: keywords beside it are ignored.
        self.ref_alone = isinstance(declared, str) and any(f"draft-0{n}/" in declared for n in (3, 4, 6, 7))
        self.unused = self._unused_keywords(declared)
        self.skipped: list[str] = []
        self.ignored: set[str] = set()
        self.nodes: list = [Node("true"), Node("false", scalar=None, obj=None, arr=None)]
        self._ids: dict = {}  # ("schema", location, dynamic scope) or synthetic key -> id
        self._todo: dict = {}  # id -> (location, dynamic scope) not normalised yet
        self._scope = ()  # the dynamic scope of the schema being normalised (json_references.Documents.enter)

    def root(self) -> int:
        return self.node_id("")

    def node(self, i: int) -> Node:
        pending = self._todo.pop(i, None)
        if pending is not None:
            self.nodes[i] = self._normalise(*pending)
        return self.nodes[i]

    # Node ids.

    def node_id(self, pointer: str, outer: tuple = ()) -> int:
        """The id of the schema at ``pointer``, reached in the dynamic scope
        ``outer``; a schema that is only a ``$ref`` (with annotations) is the
        schema it refers to."""
        seen = []
        scope = self.documents.enter(outer, pointer)
        while True:
            key = ("schema", pointer, scope)
            if key in self._ids:
                i = self._ids[key]
                break
            schema = self.schema_at(pointer)
            if schema is True or (isinstance(schema, dict) and not any(k in ENFORCED or k in REFUSED for k in schema)):
                self._ignore_unknown(schema, pointer)
                i = TRUE
                break
            if schema is False:
                i = FALSE
                break
            references = [k for k in REFERENCES if isinstance(schema, dict) and k in schema]
            beside = [k for k in schema if k != references[0] and (k in ENFORCED or k in REFUSED)] if references else []
            if references == ["$ref"] and self.ref_alone:
                self.ignored.update(f"{k} at {where(pointer)} (beside $ref, before draft 2019-09)" for k in beside)
                beside = []
            if len(references) == 1 and not beside:
                if key in seen:
                    raise ConstrainedError(f"$ref at {where(pointer)} refers to itself in a cycle of references "
                                           "that never reaches a schema")
                seen.append(key)
                self._ignore_unknown(schema, pointer)
                target = self._target(schema, references[0], pointer, scope)
                if target is None:
                    i = TRUE
                    break
                pointer, scope = target, self.documents.enter(scope, target)
                continue
            i = len(self.nodes)
            self.nodes.append(None)
            self._todo[i] = (pointer, scope)
            break
        for k in seen:
            self._ids[k] = i
        self._ids[key] = i
        return i

    def _target(self, schema: dict, key: str, pointer: str, scope: tuple):
        """The location the reference ``key`` ($ref or $dynamicRef) of ``schema``
        names in the dynamic ``scope``; None when lenient skips a $dynamicRef."""
        if key == "$ref":
            return self.documents.resolve(schema[key], pointer)
        target = self.documents.resolve_dynamic(schema[key], pointer, scope)
        if target is None:
            self.refuse(key, pointer, "it is outside the keywords that hold schemas, so its dynamic scope is "
                         "not known")
        return target

    def synthetic(self, key, make) -> int:
        """The id of a node made by ``make()`` that is not in the document, one per key."""
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self.nodes)
            self.nodes.append(None)  # make() may add nodes of its own
            self.nodes[i] = make()
        return i

    def conjunction(self, ids) -> int:
        """A node that holds when every node of ``ids`` holds."""
        ids = tuple(sorted(set(ids) - {TRUE}))
        if FALSE in ids:
            return FALSE
        if len(ids) <= 1:
            return ids[0] if ids else TRUE
        return self.synthetic(("and", ids), lambda: Node(self.nodes[ids[0]].pointer if self.nodes[ids[0]] else "",
                                                         all_of=ids))

    def negation(self, i: int, pointer: str) -> int:
        if i in (TRUE, FALSE):
            return FALSE if i == TRUE else TRUE
        return self.synthetic(("not", i), lambda: Node(pointer, not_=(i,)))

    # Normalisation.

    def _normalise(self, pointer: str, scope: tuple) -> Node:
        self._scope = scope
        schema = self.schema_at(pointer)
        if not isinstance(schema, dict):
            raise ConstrainedError(f"malformed schema at {where(pointer)}: a schema is an object or a boolean, "
                                   f"got {json_lib.dumps(schema)[:60]}")
        self._ignore_unknown(schema, pointer)
        for key in schema:
            if key in REFUSED:
                self.refuse(key, pointer, REFUSED[key])
        types = self._types(schema, pointer)
        node = Node(pointer)
        node.scalar = self._scalar(schema, pointer, types, node)
        node.obj = self._object(schema, pointer) if "object" in types else None
        node.arr = self._array(schema, pointer) if "array" in types else None
        self._combinators(schema, pointer, node)
        if "unevaluatedProperties" in schema or "unevaluatedItems" in schema:
            from .json_unevaluated import restrict_unevaluated
            restrict_unevaluated(self, schema, pointer, node)
        for key in ("enum", "const"):
            if key in schema:
                self._restrict_to_values(node, schema, key, pointer)
        if node.long_string is not None:
            self._bound_long_string(node, pointer)
        return node

    def _bound_long_string(self, node: Node, pointer: str) -> None:
        """Refuse lengths of plain strings past MAX_LONG_STRING (or, lenient,
        drop them): the rules counting them grow with the count."""
        low, high = node.string_lengths
        for key, value in (("minLength", low), ("maxLength", high)):
            if value is not None and value > MAX_LONG_STRING:
                self.refuse(key, pointer, f"string lengths are counted up to {MAX_LONG_STRING:,} code points "
                                          f"(the grammar grows with the count), got {value:,}")
        low, high = (low if low <= MAX_LONG_STRING else 0, high if high is None or high <= MAX_LONG_STRING else None)
        node.string_lengths = low, high
        if node.long_string is None:  # (lenient, and short now: a DFA, as _string gives short strings)
            node.scalar = _or_languages(node.scalar, _string_language(min_length=low, max_length=high))

    def _unused_keywords(self, metaschema_uri) -> frozenset:
        """The keywords of the vocabularies that the document's metaschema (when
        it is one of ``documents``) leaves out of its ``$vocabulary``."""
        metaschema = self.documents.named(metaschema_uri) if isinstance(metaschema_uri, str) else None
        vocabularies = metaschema.get("$vocabulary") if isinstance(metaschema, dict) else None
        if not isinstance(vocabularies, dict):
            return frozenset()
        for uri, required in vocabularies.items():
            if required is True and uri not in VOCABULARY_KEYWORDS and uri not in OTHER_VOCABULARIES:
                raise ConstrainedError(f"the metaschema {metaschema_uri} requires the vocabulary {uri}, which "
                                       "json_schema does not know")
        return frozenset().union(*(keys for uri, keys in VOCABULARY_KEYWORDS.items() if uri not in vocabularies))

    def schema_at(self, pointer: str):
        """The schema at ``pointer`` without the keywords of unused vocabularies."""
        schema = self.documents.at(pointer)
        if not self.unused or not isinstance(schema, dict) or not self.unused & schema.keys():
            return schema
        for key in self.unused & schema.keys():
            self.ignored.add(f"{key} at {where(pointer)} (its vocabulary is not in use)")
        return {k: v for k, v in schema.items() if k not in self.unused}

    def _ignore_unknown(self, schema, pointer: str) -> None:
        if isinstance(schema, dict):
            for key in schema:
                if key not in ENFORCED and key not in ANNOTATIONS and key not in REFUSED:
                    self.ignored.add(f"{key} at {where(pointer)}")

    def refuse(self, key: str, pointer: str, why: str) -> None:
        """A keyword that cannot be enforced: an error, or skipped when lenient."""
        message = f"unsupported keyword {key!r} at {where(pointer)}: {why}"
        if not self.lenient:
            raise ConstrainedError(message + " (lenient=True skips it)")
        self.skipped.append(message)

    def child(self, schema: dict, key: str, pointer: str, *path) -> int:
        """The node of the subschema at ``pointer``/``key``/``path`` (in the current dynamic scope)."""
        return self.node_id("/".join([pointer, escape(key)] + [escape(s) for s in path]), self._scope)

    def _types(self, schema: dict, pointer: str) -> set:
        value = schema.get("type", list(TYPES))
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or not all(isinstance(t, str) and t in TYPES for t in names):
            raise ConstrainedError(f"malformed schema: 'type' at {where(pointer)} must be one of {list(TYPES)} "
                                   f"or a non-empty list of them, got {json_lib.dumps(value)[:80]}")
        return set(names)

    # Scalars.

    def _scalar(self, schema: dict, pointer: str, types: set, node: Node):
        """The DFA of the scalars the schema's own keywords allow (ANY: all, None:
        none); long plain strings are left to ``node.long_string``."""
        parts = []
        if "null" in types:
            parts.append(dfa.literal(b"null"))
        if "boolean" in types:
            parts.append(scalar_literal(True))
            parts.append(scalar_literal(False))
        if "number" in types or "integer" in types:
            integer = "number" not in types
            node.counts_digits = integer or "multipleOf" in schema
            parts.append(self._number(schema, pointer, integer=integer))
        if "string" in types:
            parts.append(self._string(schema, pointer, node))
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        if types >= {"null", "boolean", "number", "string"} and not any(
                k in schema for k in _STRING_KEYWORDS + _NUMBER_KEYWORDS):
            return ANY
        return dfa.union(*parts) if len(parts) > 1 else parts[0]

    def _number(self, schema: dict, pointer: str, integer: bool):
        args = {}
        for key, name in (("minimum", "minimum"), ("maximum", "maximum"), ("multipleOf", "multiple_of")):
            if key in schema:
                args[name] = self._number_value(schema, key, pointer)
        for key, bound, name in (("exclusiveMinimum", "minimum", "exclusive_minimum"),
                                 ("exclusiveMaximum", "maximum", "exclusive_maximum")):
            value = schema.get(key)
            if isinstance(value, bool):  # draft-04: a flag on minimum / maximum
                if value and bound in args:
                    args[name] = args.pop(bound)
            elif key in schema:
                args[name] = self._number_value(schema, key, pointer)
        if "multiple_of" in args and args["multiple_of"] <= 0:
            raise ConstrainedError(f"malformed schema: 'multipleOf' at {where(pointer)} must be positive")
        try:
            return _number_language(integer, integer and self.integers_without_fraction, **args)
        except ConstrainedError as e:
            keys = ", ".join(repr(k) for k in _NUMBER_KEYWORDS if k in schema)
            self.refuse(keys or "type", pointer, str(e))
            return _number_language(integer, integer and self.integers_without_fraction)

    def _number_value(self, schema: dict, key: str, pointer: str):
        value = schema[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
                float("inf"), float("-inf")):
            raise ConstrainedError(f"malformed schema: {key!r} at {where(pointer)} must be a number, got {value!r}")
        return value

    def _string(self, schema: dict, pointer: str, node: Node):
        """The DFA of the strings the schema's string keywords allow, or None for
        long ones (``node.long_string``) and regexes (``node.regex_strings``);
        sets ``node.string_lengths`` where only lengths restrict them."""
        args = {}
        for key, name in (("minLength", "min_length"), ("maxLength", "max_length")):
            if key in schema:
                args[name] = self._count(schema, key, pointer)
        for key in ("pattern", "format"):
            if key in schema:
                if not isinstance(schema[key], str):
                    raise ConstrainedError(f"malformed schema: {key!r} at {where(pointer)} must be a string")
                args[key] = schema[key]
        if args.get("format") not in (None,) + SPEC_FORMATS:  # a custom format only annotates
            self.ignored.add(f"format {args.pop('format')!r} at {where(pointer)}")
        node.format = args.get("format")
        if node.format == "regex" and set(args) == {"format"} and not schema.keys() & {"enum", "const"}:
            node.regex_strings = True  # no DFA takes them: grammar rules do (json_schema_rules.regex_rest)
            return None
        if node.format == "regex" and set(args) != {"format"} and _plain_regexes(args):
            del args["format"]  # every string the others allow is a regular expression
        if set(args) <= {"min_length", "max_length"}:
            node.string_lengths = args.get("min_length", 0), args.get("max_length")
            if node.long_string:
                return None
        for key in ("format", "pattern"):  # each on its own first, to name what fails
            if key in args:
                try:
                    _string_language(**{key: args[key]})
                except ConstrainedError as e:
                    self.refuse(key, pointer, str(e))
                    del args[key]
        try:
            return _string_language(**args)
        except ConstrainedError as e:
            self.refuse("/".join(k for k in _STRING_KEYWORDS if k in schema), pointer, str(e))
            return _string_language()

    def _restrict_to_values(self, node: Node, schema: dict, key: str, pointer: str) -> None:
        """``enum`` / ``const``: the scalar part becomes those literals; objects and
        arrays must equal one of the listed ones."""
        values = schema[key] if key == "enum" else [schema[key]]
        if not isinstance(values, list):
            raise ConstrainedError(f"malformed schema: 'enum' at {where(pointer)} must be a list")
        node.values += tuple(v for v in values if not isinstance(v, (dict, list)))
        strings = [v for v in values if isinstance(v, str)]
        if node.long_string is not None:  # the listed strings of fitting length, as a DFA like the rest
            low, high = node.long_string
            fitting = [v for v in strings if low <= len(v) and (high is None or len(v) <= high)]
            if fitting:
                node.scalar = _or_languages(node.scalar, _enum_strings(tuple(fitting)))
        node.string_lengths = None
        literals = [scalar_literal(v) for v in values if not isinstance(v, (dict, list, str))]
        if strings:
            literals.append(_enum_strings(tuple(strings)))
        scalar = dfa.union(*literals) if len(literals) > 1 else literals[0] if literals else None
        if node.scalar is None or scalar is None:
            node.scalar = None
        else:
            node.scalar = scalar if node.scalar is ANY else _nonempty(dfa.intersect(node.scalar, scalar))
        structured = [self.constant(v, f"{pointer}/{key}") for v in values if isinstance(v, (dict, list))]
        if not any(isinstance(v, dict) for v in values):
            node.obj = None
        if not any(isinstance(v, list) for v in values):
            node.arr = None
        if structured:
            scalar_part = self.synthetic(("scalars", pointer, key), lambda: Node(pointer, scalar, None, None))
            node.any_of += (tuple(structured) + (scalar_part,),)

    def constant(self, value, pointer: str) -> int:
        """A node that holds exactly for ``value`` (objects: these members in this order)."""
        def make():
            if isinstance(value, dict):
                members = tuple((k, self.constant(v, pointer)) for k, v in value.items())
                atom = ObjectAtom(properties=members, required=tuple(value), additional=FALSE)
                return Node(pointer, scalar=None, obj=atom, arr=None)
            if isinstance(value, list):
                atom = ArrayAtom(prefix=tuple(self.constant(v, pointer) for v in value), items=FALSE,
                                 min_items=len(value))
                return Node(pointer, scalar=None, obj=None, arr=atom)
            return Node(pointer, scalar=scalar_literal(value), obj=None, arr=None, values=(value,))
        return self.synthetic(("const", json_lib.dumps(value)), make)

    # Objects and arrays.

    def _object(self, schema: dict, pointer: str):
        keys = ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                "minProperties", "maxProperties")
        if not any(k in schema for k in keys):
            return ANY
        properties = self.object_keyword(schema, "properties", pointer)
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ConstrainedError(f"malformed schema: 'required' at {where(pointer)} must be a list of strings")
        patterns = []
        for pattern in self.object_keyword(schema, "patternProperties", pointer):
            try:
                key_language = _string_language(pattern=pattern)
            except ConstrainedError as e:
                self.refuse("patternProperties", f"{pointer}/patternProperties/{escape(pattern)}", str(e))
                continue
            if key_language is not None:  # (a pattern that matches no name, such as "$id", applies to nothing)
                patterns.append((pattern, key_language, self.child(schema, "patternProperties", pointer, pattern)))
        return ObjectAtom(
            properties=tuple((name, self.child(schema, "properties", pointer, name)) for name in properties),
            required=tuple(dict.fromkeys(required)),
            patterns=tuple(patterns),
            additional=self.child(schema, "additionalProperties", pointer)
            if "additionalProperties" in schema else TRUE,
            explicit_additional="additionalProperties" in schema,
            names=self.child(schema, "propertyNames", pointer) if "propertyNames" in schema else TRUE,
            min_properties=self._count(schema, "minProperties", pointer) or 0,
            max_properties=self._count(schema, "maxProperties", pointer),
        )

    def _array(self, schema: dict, pointer: str):
        keys = ("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems")
        if not any(k in schema for k in keys):
            return ANY
        items = schema.get("items")
        if isinstance(items, list):  # draft-04..2019-09: a tuple, then additionalItems
            prefix = tuple(self.child(schema, "items", pointer, k) for k in range(len(items)))
            rest = self.child(schema, "additionalItems", pointer) if "additionalItems" in schema else TRUE
        else:
            prefix_items = schema.get("prefixItems", [])
            if not isinstance(prefix_items, list):
                raise ConstrainedError(f"malformed schema: 'prefixItems' at {where(pointer)} must be a list")
            prefix = tuple(self.child(schema, "prefixItems", pointer, k) for k in range(len(prefix_items)))
            rest = self.child(schema, "items", pointer) if "items" in schema else TRUE
        contains = self.child(schema, "contains", pointer) if "contains" in schema else None
        unique = schema.get("uniqueItems", False)
        if not isinstance(unique, bool):
            raise ConstrainedError(f"malformed schema: 'uniqueItems' at {where(pointer)} must be a boolean")
        min_contains = self._count(schema, "minContains", pointer)
        return ArrayAtom(
            prefix=prefix,
            items=rest,
            min_items=self._count(schema, "minItems", pointer) or 0,
            max_items=self._count(schema, "maxItems", pointer),
            contains=contains,
            min_contains=1 if min_contains is None else min_contains,
            max_contains=self._count(schema, "maxContains", pointer),
            unique=unique,
            pointer=pointer,
        )

    def object_keyword(self, schema: dict, key: str, pointer: str) -> dict:
        """The value of keyword ``key`` ({} when absent), which must be an object."""
        value = schema.get(key, {})
        if not isinstance(value, dict):
            raise ConstrainedError(f"malformed schema: {key!r} at {where(pointer)} must be an object")
        return value

    def subschema_list(self, schema: dict, key: str, pointer: str) -> list:
        """The value of keyword ``key`` ([] when absent), which must be a non-empty list (allOf, anyOf, oneOf)."""
        value = schema.get(key, [])
        if not isinstance(value, list) or (key in schema and not value):
            raise ConstrainedError(f"malformed schema: {key!r} at {where(pointer)} must be a non-empty list")
        return value

    def _count(self, schema: dict, key: str, pointer: str):
        if key not in schema:
            return None
        value = schema[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConstrainedError(f"malformed schema: {key!r} at {where(pointer)} must be a non-negative integer, "
                                   f"got {value!r}")
        return value

    # Combinators.

    def _combinators(self, schema: dict, pointer: str, node: Node) -> None:
        written = {key: k for k, key in enumerate(schema)}
        leading = []  # (place written, nodes) of the combinators written before "properties"
        all_of = []
        for key in REFERENCES:
            if key in schema and (target := self._target(schema, key, pointer, self._scope)) is not None:
                all_of.append(self.node_id(target, self._scope))
                leading.append((written[key], (all_of[-1],)))
        for key in ("allOf", "anyOf", "oneOf"):
            if key in schema:
                group = self.subschema_list(schema, key, pointer)
                ids = tuple(self.child(schema, key, pointer, k) for k in range(len(group)))
                leading.append((written[key], ids))
                if key == "allOf":
                    all_of += ids
                elif key == "anyOf":
                    node.any_of += (ids,)
                else:
                    node.one_of += (ids,)
        if "not" in schema:
            node.not_ += (self.child(schema, "not", pointer),)
        if "if" in schema and ("then" in schema or "else" in schema):
            condition = self.child(schema, "if", pointer)
            then = self.child(schema, "then", pointer) if "then" in schema else TRUE
            otherwise = self.child(schema, "else", pointer) if "else" in schema else TRUE
            node.any_of += ((self.conjunction([condition, then]),
                             self.conjunction([self.negation(condition, pointer + "/if"), otherwise])),)
            leading.append((written["if"], node.any_of[-1]))
        self._dependencies(schema, pointer, node)
        node.all_of = tuple(all_of)
        own = written.get("properties", -1)
        node.leading = tuple(i for place, ids in sorted(leading) if place < own for i in ids)

    def _dependencies(self, schema: dict, pointer: str, node: Node) -> None:
        """dependentRequired / dependentSchemas (draft-04..07: dependencies): when
        the key is present, the object must also satisfy the other schema."""
        for key in ("dependentRequired", "dependentSchemas", "dependencies"):
            for name, value in self.object_keyword(schema, key, pointer).items():
                where = f"{pointer}/{key}/{escape(name)}"
                if isinstance(value, list):
                    if not all(isinstance(v, str) for v in value):
                        raise ConstrainedError(f"malformed schema: {key!r} at {where} must list property names")
                    then = self.has_keys(tuple(value), where)
                elif key == "dependentRequired":
                    raise ConstrainedError(f"malformed schema: {key!r} at {where} must be a list of names")
                else:
                    then = self.child(schema, key, pointer, name)
                absent = self.negation(self.has_keys((name,), where), where)
                node.any_of += ((absent, then),)

    def has_keys(self, names: tuple, pointer: str) -> int:
        """A node that holds for non-objects and for objects with all of ``names``."""
        if not names:
            return TRUE
        return self.synthetic(("has", names), lambda: Node(pointer, obj=ObjectAtom(required=names)))


def _or_languages(a, b):
    return b if a is None else a if a is ANY else dfa.union(a, b)


def _nonempty(language):
    return None if language is None or dfa.is_empty(language) else language


def _plain_regexes(args: dict) -> bool:
    """Whether every string that the keywords in ``args`` but format allow is
    a regular expression of plain characters (json_regex.plain)."""
    try:
        others = _string_language(**{k: v for k, v in args.items() if k != "format"})
    except ConstrainedError:
        return False
    return others is not None and dfa.is_empty(dfa.difference(others, json_regex.plain()))


@lru_cache(maxsize=4096)
def _string_language(**args):
    return _nonempty(json_strings.string(**args))


@lru_cache(maxsize=1024)
def _enum_strings(values: tuple):
    return json_strings.enum_strings(values) if len(values) > 1 else json_strings.string_literal(values[0])


@lru_cache(maxsize=1024)
def _number_language(integer: bool, digits_only: bool, **args):
    """Numbers (or integers) within ``args``; ``digits_only``: spelled without a
    fraction or exponent part (draft-04 integers)."""
    language = (json_numbers.integer if integer else json_numbers.number)(**args)
    if digits_only:
        language = dfa.intersect(language, dfa.from_regex(json_numbers.PLAIN_INTEGER))
    return _nonempty(language)


@lru_cache(maxsize=16384, typed=True)  # typed: 1, 1.0 and True are different literals
def scalar_literal(value):
    """The DFA of the scalar ``value`` (a string in json.dumps spellings)."""
    if value is None:
        return dfa.literal(b"null")
    if isinstance(value, bool):
        return dfa.literal(b"true" if value else b"false")
    if isinstance(value, str):
        return json_strings.string_literal(value)
    if isinstance(value, (int, float)):
        return json_numbers.number(minimum=value, maximum=value)
    raise ConstrainedError(f"malformed schema: {value!r} is not a JSON value")

