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
conditions (subschemas that must hold) under which it counts. Conditions only
add evaluated members, so the keyword holds exactly when, for some set Q of
terms whose conditions all hold, the members no term of Q declares meet the
schema: the actual set of holding terms is one such Q, and any other Q's
members are a subset of it. Each Q becomes an ``anyOf`` branch: its conditions
and an ObjectAtom (ArrayAtom) that leaves Q's members free and holds the rest
to the schema, one atom per different set of members. Sets of terms that
cannot hold together (two ``oneOf`` branches, ``then`` and ``else``) are left
out; more than MAX_CASES atoms are refused.
"""

from dataclasses import dataclass, field

from .errors import ConstrainedError
from .json_schema import FALSE, TRUE, ArrayAtom, Node, ObjectAtom, _escape, _string_language

MAX_CASES = 16  # different sets of evaluated members one keyword may tell apart
MAX_SETS_OF_TERMS = 256  # sets of terms that can hold together, looked through to find them
_TOO_MANY = ("the members it leaves unevaluated depend on too many combinations of anyOf / oneOf / if / "
             "dependentSchemas branches")
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

    def covers(self, other: "Evaluated") -> bool:
        return self.every or not other.every and set(other.names) <= set(self.names) and set(
            other.patterns) <= set(self.patterns) and other.prefix <= self.prefix and set(
            other.contains) <= set(self.contains)


@dataclass(frozen=True)
class _Condition:
    """A subschema that must hold (``node``); conditions of one ``group`` with
    different ``choice``s exclude each other (``oneOf`` branches, if / else)."""

    node: int
    group: str
    choice: object = field(default=None, compare=False)


def restrict_unevaluated(schemas, schema: dict, pointer: str, base: str, node: Node) -> None:
    """Add to ``node`` what the schema's unevaluatedProperties / unevaluatedItems ask."""
    for key, kind in (("unevaluatedProperties", "object"), ("unevaluatedItems", "array")):
        if key not in schema:
            continue
        rest = schemas._child(schema, key, pointer, base)
        if rest == TRUE:
            continue
        where = f"{pointer}/{key}"
        try:
            cases = _cases(_terms(schemas, schema, pointer, base, kind, (), {}))
            branches = [schemas.conjunction([c.node for c in conditions]
                                            + [_rest(schemas, kind, evaluated, rest, where)])
                        for conditions, evaluated in cases]
        except ConstrainedError as e:
            schemas._refuse(key, pointer, str(e))
            continue
        if TRUE not in branches:
            node.any_of += (tuple(dict.fromkeys(branches)),)


def _terms(schemas, schema: dict, pointer: str, base: str, kind: str, path: tuple, memo: dict) -> dict:
    """{conditions: Evaluated} for ``schema`` (``base``: its own base URI) and the
    subschemas it applies in place; ``memo``: the answers for other pointers."""
    if pointer in path:
        raise ConstrainedError(f"the subschemas applied in place refer back to {pointer or '#'} in a cycle")
    if pointer in memo:
        return memo[pointer]
    for key in _DYNAMIC:
        if key in schema:
            raise ConstrainedError(f"what it evaluates depends on {key} at {pointer or 'the schema root'}, "
                                   "a dynamic reference, which is not supported")
    terms = {frozenset(): _own(schemas, schema, pointer, base, kind, top=not path)}

    def add(child_pointer: str, child_base: str, more=()):
        child = schemas._at(child_pointer)
        if isinstance(child, dict):
            for c, evaluated in _terms(schemas, child, child_pointer, schemas._base(child, child_base), kind,
                                       path + (pointer,), memo).items():
                c |= set(more)
                terms[c] = terms[c] | evaluated if c in terms else evaluated

    if "$ref" in schema:
        add(*schemas._resolve(schema["$ref"], pointer, base))
    for key in ("allOf", "anyOf", "oneOf"):
        for k in range(len(schema.get(key, ()))):
            here = f"{pointer}/{key}/{k}"
            more = () if key == "allOf" else (_Condition(schemas._child(schema, key, pointer, base, k),
                                                         f"{pointer}/{key}" if key == "oneOf" else here, k),)
            add(here, base, more)
    if "if" in schema:
        holds = schemas._child(schema, "if", pointer, base)
        add(f"{pointer}/if", base, (_Condition(holds, f"{pointer}/if", True),))
        if "then" in schema:
            add(f"{pointer}/then", base, (_Condition(holds, f"{pointer}/if", True),))
        if "else" in schema:
            add(f"{pointer}/else", base,
                (_Condition(schemas.negation(holds, f"{pointer}/if"), f"{pointer}/if", False),))
    for key in ("dependentSchemas", "dependencies") if kind == "object" else ():  # they only apply to objects
        for name, value in schemas._map(schema, key, pointer).items():
            if isinstance(value, (dict, bool)):
                here = f"{pointer}/{key}/{_escape(name)}"
                add(here, base, (_Condition(schemas.has_keys((name,), here), here),))
    memo[pointer] = terms
    return terms


def _own(schemas, schema: dict, pointer: str, base: str, kind: str, top: bool) -> Evaluated:
    """What ``schema``'s own keywords evaluate (a nested unevaluated* evaluates everything)."""
    if kind == "object":
        return Evaluated(names=tuple(schemas._map(schema, "properties", pointer)),
                         patterns=tuple(schemas._map(schema, "patternProperties", pointer)),
                         every="additionalProperties" in schema or not top and "unevaluatedProperties" in schema)
    items = schema.get("items")
    if isinstance(items, list):  # draft-04..2019-09 tuples
        prefix, every = len(items), "additionalItems" in schema
    else:
        prefix_items = schema.get("prefixItems", [])
        prefix, every = len(prefix_items) if isinstance(prefix_items, list) else 0, "items" in schema
    contains = (schemas._child(schema, "contains", pointer, base),) if "contains" in schema else ()
    return Evaluated(prefix=prefix, contains=tuple(c for c in contains if c != FALSE),
                     every=every or TRUE in contains or not top and "unevaluatedItems" in schema)


def _cases(terms: dict) -> list:
    """[(conditions, Evaluated)] for the sets of terms that can hold together,
    leaving out a set when a smaller one evaluates the same members under fewer
    conditions."""
    always = terms[frozenset()]
    chosen = [((), frozenset())]  # (terms, their conditions), grown one term at a time
    for term in [(c, e) for c, e in terms.items() if not always.covers(e)]:
        chosen += [(terms_ + (term,), conditions | term[0]) for terms_, conditions in chosen
                   if not _exclusive(conditions | term[0])]
        if len(chosen) > MAX_SETS_OF_TERMS:
            raise ConstrainedError(_TOO_MANY)
    cases = {}  # key of the members evaluated -> (Evaluated, [conditions])
    for terms_, conditions in sorted(chosen, key=lambda t: len(t[1])):
        evaluated = always
        for _, e in terms_:
            evaluated = evaluated | e
        _, kept = cases.setdefault(_key(evaluated), (evaluated, []))
        if not any(other <= conditions for other in kept):
            kept.append(conditions)
    if len(cases) > MAX_CASES:
        raise ConstrainedError(_TOO_MANY)
    return [(conditions, evaluated) for evaluated, kept in cases.values() for conditions in kept]


def _key(evaluated: Evaluated):
    if evaluated.every:
        return True
    return (frozenset(evaluated.names), frozenset(evaluated.patterns), evaluated.prefix,
            frozenset(evaluated.contains))


def _exclusive(conditions: frozenset) -> bool:
    """Whether two of the conditions cannot hold together."""
    choices = {}
    for c in conditions:
        if choices.setdefault(c.group, c.choice) != c.choice:
            return True
    return False


def _rest(schemas, kind: str, evaluated: Evaluated, rest: int, pointer: str) -> int:
    """A node holding for values whose members that ``evaluated`` leaves out meet ``rest``."""
    if evaluated.every:
        return TRUE
    if kind == "object":
        patterns = tuple((p, language, TRUE) for p in evaluated.patterns
                         if (language := _string_language(pattern=p)) is not None)
        atom = ObjectAtom(properties=tuple((name, TRUE) for name in evaluated.names), patterns=patterns,
                          additional=rest, explicit_additional=True)
        return schemas.synthetic(("unevaluated", pointer, _key(evaluated)), lambda: Node(pointer, obj=atom))
    items = rest
    if evaluated.contains:
        alternatives = evaluated.contains + ((rest,) if rest != FALSE else ())
        items = alternatives[0] if len(alternatives) == 1 else schemas.synthetic(
            ("unevaluated items", pointer, alternatives), lambda: Node(pointer, any_of=(alternatives,)))
    return schemas.synthetic(("unevaluated", pointer, _key(evaluated)), lambda: Node(
        pointer, arr=ArrayAtom(prefix=(TRUE,) * evaluated.prefix, items=items, pointer=pointer)))
