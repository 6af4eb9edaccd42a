"""``unevaluatedProperties`` and ``unevaluatedItems`` as plain object and array keywords.

A property (item) is *evaluated* when a subschema that applies to the same
value in place (the schema itself, ``allOf``, ``$ref``, the branches of
``anyOf`` / ``oneOf`` that hold, ``if`` with ``then`` when ``if`` holds or
``else`` when it does not, ``dependentSchemas`` whose key is present; never
``not``) declares it: ``properties``, ``patternProperties``,
``additionalProperties``, a nested ``unevaluatedProperties`` (``prefixItems``,
``items``, ``contains``, a nested ``unevaluatedItems``). The others must meet
the unevaluated* schema.

What is evaluated is a union of *terms*: what one subschema declares, and the
conditions (subschemas that must hold) under which it counts. Property names
(item positions) fall into *regions* by the terms that declare them; a member
of the region of terms G is evaluated exactly when the conditions of one term
of G hold, so the keyword is, per region, "one of G's conditions holds, or
every member in the region meets the schema": an ``anyOf`` of those
conditions and an ObjectAtom (ArrayAtom) that holds the region's members to
the schema. Items matched by a ``contains`` that counts only under conditions
do not fit this: for each set of such terms whose conditions hold, the
regions' items may also match their ``contains`` schemas. More than
MAX_REGIONS regions (or MAX_CONTAINS such ``contains``) are refused.
"""

from dataclasses import dataclass
from itertools import combinations

from . import dfa, json_strings
from .errors import ConstrainedError
from .json_references import escape
from .json_schema import FALSE, TRUE, ArrayAtom, Node, ObjectAtom, _string_language
from .json_schema_rules import _nonempty

MAX_REGIONS = 12  # regions of members one keyword tells apart (each an object or array atom)
MAX_CONTAINS = 3  # conditional contains terms (all their subsets are cases)
_DYNAMIC = ("$dynamicRef", "$recursiveRef")


@dataclass(frozen=True)
class Evaluated:
    """What some subschemas evaluate: property names and patterns, or a prefix of
    items and the ``contains`` schemas whose matches count; ``every``: all members."""

    names: tuple = ()
    patterns: tuple = ()
    prefix: int = 0
    contains: tuple = ()
    every: bool = False

    def __or__(self, other: "Evaluated") -> "Evaluated":
        return Evaluated(tuple(dict.fromkeys(self.names + other.names)),
                         tuple(dict.fromkeys(self.patterns + other.patterns)), max(self.prefix, other.prefix),
                         tuple(dict.fromkeys(self.contains + other.contains)), self.every or other.every)


def restrict_unevaluated(schemas, schema: dict, pointer: str, node: Node) -> None:
    """Add to ``node`` what the schema's unevaluatedProperties / unevaluatedItems ask."""
    for key, kind in (("unevaluatedProperties", "object"), ("unevaluatedItems", "array")):
        if key not in schema:
            continue
        rest = schemas.child(schema, key, pointer)
        if rest == TRUE:
            continue
        try:
            terms = _terms(schemas, schema, pointer, kind, (), {})
            make = _object_regions if kind == "object" else _array_regions
            node.any_of += make(schemas, terms, rest, f"{pointer}/{key}")
        except ConstrainedError as e:
            schemas.refuse(key, pointer, str(e))


def _terms(schemas, schema: dict, pointer: str, kind: str, path: tuple, memo: dict) -> dict:
    """{conditions (node ids): Evaluated} for ``schema`` and the subschemas it
    applies in place; ``memo``: the answers for other pointers."""
    if pointer in path:
        raise ConstrainedError(f"the subschemas applied in place refer back to {pointer or '#'} in a cycle")
    if pointer in memo:
        return memo[pointer]
    for key in _DYNAMIC:
        if key in schema:
            raise ConstrainedError(f"what it evaluates depends on {key} at {pointer or 'the schema root'}, "
                                   "a dynamic reference, which is not supported")
    terms = {frozenset(): _own(schemas, schema, pointer, kind, top=not path)}

    def add(child_pointer: str, condition=TRUE):
        child = schemas.schema_at(child_pointer)
        if isinstance(child, dict):
            for c, evaluated in _terms(schemas, child, child_pointer, kind, path + (pointer,), memo).items():
                c = c | {condition} - {TRUE}
                terms[c] = terms[c] | evaluated if c in terms else evaluated

    if "$ref" in schema:
        add(schemas.documents.resolve(schema["$ref"], pointer))
    for key in ("allOf", "anyOf", "oneOf"):
        for k in range(len(schemas.subschema_list(schema, key, pointer))):
            add(f"{pointer}/{key}/{k}", TRUE if key == "allOf" else schemas.child(schema, key, pointer, k))
    if "if" in schema:
        holds = schemas.child(schema, "if", pointer)
        add(f"{pointer}/if", holds)
        if "then" in schema:
            add(f"{pointer}/then", holds)
        if "else" in schema:
            add(f"{pointer}/else", schemas.negation(holds, f"{pointer}/if"))
    for key in ("dependentSchemas", "dependencies") if kind == "object" else ():  # they only apply to objects
        for name, value in schemas.object_keyword(schema, key, pointer).items():
            if isinstance(value, (dict, bool)):
                here = f"{pointer}/{key}/{escape(name)}"
                add(here, schemas.has_keys((name,), here))
    memo[pointer] = terms
    return terms


def _own(schemas, schema: dict, pointer: str, kind: str, top: bool) -> Evaluated:
    """What ``schema``'s own keywords evaluate (a nested unevaluated* evaluates everything)."""
    if kind == "object":
        return Evaluated(names=tuple(schemas.object_keyword(schema, "properties", pointer)),
                         patterns=tuple(schemas.object_keyword(schema, "patternProperties", pointer)),
                         every="additionalProperties" in schema or not top and "unevaluatedProperties" in schema)
    items = schema.get("items")
    if isinstance(items, list):  # draft-04..2019-09 tuples
        prefix, every = len(items), "additionalItems" in schema
    else:
        prefix_items = schema.get("prefixItems", [])
        prefix, every = len(prefix_items) if isinstance(prefix_items, list) else 0, "items" in schema
    contains = (schemas.child(schema, "contains", pointer),) if "contains" in schema else ()
    return Evaluated(prefix=prefix, contains=tuple(c for c in contains if c != FALSE),
                     every=every or TRUE in contains or not top and "unevaluatedItems" in schema)


def _condition(schemas, conditions: frozenset) -> int:
    return schemas.conjunction(sorted(conditions))


def _region_group(schemas, terms: list, atom: int) -> tuple:
    """The anyOf group "a condition of one of ``terms`` holds, or ``atom`` does"."""
    return tuple(dict.fromkeys([_condition(schemas, c) for c, _ in terms] + [atom]))


def _object_regions(schemas, terms: dict, rest: int, pointer: str) -> tuple:
    """anyOf groups, one per region of property names (key DFAs over the JSON string text)."""
    strings = _string_language()

    def names(evaluated: Evaluated):
        if evaluated.every:
            return strings
        parts = [json_strings.enum_strings(evaluated.names)] if evaluated.names else []
        parts += [language for p in evaluated.patterns if (language := _string_language(pattern=p)) is not None]
        return dfa.union(*parts) if len(parts) > 1 else parts[0] if parts else None

    always = names(terms[frozenset()])
    free = strings if always is None else _nonempty(dfa.difference(strings, always))
    regions = [(free, ())] if free is not None else []
    for term in [(c, e) for c, e in terms.items() if c]:
        declared = names(term[1])
        if declared is None:
            continue
        refined = []
        for language, inside in regions:
            refined += [(_nonempty(dfa.intersect(language, declared)), inside + (term,)),
                        (_nonempty(dfa.difference(language, declared)), inside)]
        regions = [(language, inside) for language, inside in refined if language is not None]
        if len(regions) > MAX_REGIONS:
            raise ConstrainedError(_too_many("property names", MAX_REGIONS))
    groups = []
    for language, inside in regions:
        atom = ObjectAtom(patterns=(("unevaluated", language, rest),), explicit_additional=True)
        key = ("unevaluated", pointer, language.digest)
        groups.append(_region_group(schemas, inside, schemas.synthetic(key, lambda: Node(pointer, obj=atom))))
    return tuple(groups)


def _array_regions(schemas, terms: dict, rest: int, pointer: str) -> tuple:
    """One anyOf group: for each set of conditional ``contains`` terms, their
    conditions and a node with one anyOf group per region of positions."""
    always = terms[frozenset()]
    if always.every:
        return ()
    positional = [(c, e) for c, e in terms.items() if c and (e.every or e.prefix > always.prefix)]
    containing = [(c, e) for c, e in terms.items() if c and e.contains and not e.every]
    if len(containing) > MAX_CONTAINS:
        raise ConstrainedError(_too_many("contains schemas", MAX_CONTAINS))
    end = max([always.prefix] + [e.prefix for _, e in positional])
    regions: dict = {}  # terms covering a position (None: the items after ``end``) -> positions
    for position in list(range(always.prefix, end)) + [None]:
        inside = tuple(t for t in positional if t[1].every or position is not None and position < t[1].prefix)
        regions.setdefault(inside, []).append(position)
    if len(regions) > MAX_REGIONS:
        raise ConstrainedError(_too_many("item positions", MAX_REGIONS))
    cases = []
    for size in range(len(containing) + 1):
        for chosen in combinations(containing, size):
            contains = tuple(dict.fromkeys(always.contains + tuple(i for _, e in chosen for i in e.contains)))
            item = _item_rest(schemas, contains, rest, pointer)
            groups = []
            for inside, positions in regions.items():
                atom = ArrayAtom(prefix=tuple(item if p in positions else TRUE for p in range(end)),
                                 items=item if None in positions else TRUE, pointer=pointer)
                atom_id = schemas.synthetic(("unevaluated", pointer, atom), lambda: Node(pointer, arr=atom))
                groups.append(_region_group(schemas, list(inside), atom_id))
            every_region = schemas.synthetic(("unevaluated", pointer, tuple(groups)),
                                             lambda: Node(pointer, any_of=tuple(groups)))
            cases.append(schemas.conjunction([_condition(schemas, c) for c, _ in chosen] + [every_region]))
    return (tuple(dict.fromkeys(cases)),)


def _item_rest(schemas, contains: tuple, rest: int, pointer: str) -> int:
    """A node for items that match one of ``contains`` or meet ``rest``."""
    alternatives = contains + ((rest,) if rest != FALSE else ())
    if len(alternatives) <= 1:
        return alternatives[0] if alternatives else FALSE
    return schemas.synthetic(("unevaluated items", pointer, alternatives),
                             lambda: Node(pointer, any_of=(alternatives,)))


def _too_many(what: str, most: int) -> str:
    return (f"the {what} it leaves unevaluated depend on over {most} combinations of anyOf / oneOf / if / "
            "dependentSchemas branches")
