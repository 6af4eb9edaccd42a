"""Schema nodes (json_schema.py) to an LALR(1) grammar over byte-DFA terminals.

The grammar is a deterministic bottom-up tree automaton written as rules. A
*context* is the set of schemas that apply to a value; its *label* is the subset
the value satisfies. The rule ``value(C, L)`` derives exactly the JSON values
whose label in context C is L:

* scalars: one terminal, the DFA region ``∩ L − ∪ (C − L)`` of the scalar
  languages (the regions of one context are disjoint, so the lexer never has
  to choose);
* objects and arrays: a product automaton of every object (array) keyword set
  that the context's schemas combine (through allOf, anyOf, oneOf, not, ...),
  run over the members (items). Each member's value is classified in its own
  context, the schemas its key brings, and the label it gets drives the
  product's transition. The product's state after the closing bracket says
  which keyword sets hold, so which label the value has. Rules are right
  recursive, one per product state and wanted label, so the parser only learns
  the label at the end, which LR parsing allows.

The product state of an object is (the declared keys done, which keyword
sets already failed, members so far, the regions of undeclared names used
where a repeated name could change the label, and free keys so far: see
_ObjectProduct; where a minProperties counts undeclared names, the matcher
keeps them distinct instead). Declared keys come in chains (_key_chains:
each set's own order; with ``any_order``, cut into pieces as far as
ORDER_STATES allows), each key at most once: a key done passes the keys its
chains list before it, and chains interleave, so the states are the sets of
keys done, within ORDER_STATES (unless the declared names, merged into one
order, are more). With ``any_order``, most declared keys are free instead,
in no chain: counted, not tracked, and kept distinct by the matcher
(_ObjectProduct.settle). Undeclared keys come anywhere between them, and
so may a declared key after its turn, failing the sets that declare it, where
their results cannot change the label (_ObjectProduct.late_failures). An
array's state is
(position, failed sets, ``contains`` matches per set, values seen per
uniqueItems set: only where the items take a few values; unique strings and
objects are kept apart by the matcher instead, _Builder.unique_value).
States that cannot lead to the wanted label are pruned; rules whose language
is empty are removed at the end.

Plain strings allowed more than json_schema.LONG_STRING code points (a
maxLength of 65535 is common) would need a DFA of 24 states per code point;
their length is counted by rules instead, over lexemes of LONG_CHUNK code
points (the last may be shorter; where bounds below make the last one's
length matter, chunks of exactly LONG_CHUNK and a shorter tail, see
_Builder.long_string). Their opening quote and pieces are "glued"
terminals (``grammar(glued=)``): no whitespace may follow them, as none may
sit inside a string. Where their strings must also meet a pattern, format or
enum they become one DFA after all, or an error.

Array items likewise get a rule per position only while something tells them
apart (prefixItems, contains, uniqueItems, combined array schemas), up to
MAX_COUNT of them; once every further item must meet one schema, their number
is counted in runs of runs of items, a few dozen rules for maxItems 100000.
Where any number of runs may come (no maxItems, a string without maxLength,
a map's members), json_schema compiles them left recursive (left_recursive),
so that the parser stack stays flat however long the value grows.

Lexing stays unambiguous because the terminals a parser state accepts are
disjoint (or, for string chunks and tails, a greedy longest match is right;
or an object's undeclared key is any string and its declared names shadow
it: the names win, see _Builder.key_terminal), and because every rule that
several places share is followed by punctuation only: LALR merges the
lookaheads of a shared rule's end, so a rule followed by DFA terminals in one
place and other, overlapping ones elsewhere would let the lexer pick a
terminal that is wrong for the stack at hand.
"""

import dataclasses
import itertools
import json
import math
from functools import cached_property, lru_cache

import numpy as np

from . import dfa, json_formats, json_numbers, json_regex, json_strings
from .errors import ConstrainedError
from .json_references import where
from .json_schema import ANY, FALSE, TRUE, ArrayAtom, Node, Schemas, scalar_literal
from .json_unique import strings_in

MAX_ALTERNATIVES = 60_000  # grammar alternatives one schema may need
MAX_SETS = 64  # object (array) keyword sets combined for one value
MAX_SHARED = 12  # of those, sets whose results are tried both ways together (2**n), see possible_labels
MAX_LABEL_WORK = 2_000_000  # nodes evaluated working out which labels combined schemas can reach
MAX_CHILDREN = 24  # schemas classifying one member or item together
MAX_SUBSETS = 4  # child contexts up to this size try all their labels (2**n)
MAX_UNIQUE = 8  # distinct values uniqueItems can track (2**n states)
LONG_CHUNK = 16  # code points per lexeme of a long string (json_schema.LONG_STRING)
_QUOTE = '"\\""'  # the lark literal for a double quote
RUN_BASE = 8  # runs of counted items, each this many of the next shorter
MAX_COUNT = 500  # positions counted one rule each (minProperties/maxProperties, items along with contains, ...)
LATE_KEY_SETS = 4  # object keyword sets combined up to which a declared key may come late (late_failures)
ORDER_STATES = 64  # sets of declared keys done that interleaved key orders may give one object (_key_chains)


@lru_cache(maxsize=None)
def _universe():
    """(all JSON scalars, all JSON strings, all other scalars) as DFAs."""
    strings = json_strings.string()
    others = dfa.union(dfa.literal(b"null"), dfa.literal(b"true"), dfa.literal(b"false"), json_numbers.number())
    return dfa.union(others, strings), strings, others


@lru_cache(maxsize=256)
def _string_content(lengths: tuple):
    """The text between the quotes of the strings with these numbers of code
    points: the closing quote is a '"' that ends the string (one that follows
    a backslash is part of an escape and stays)."""
    quoted = dfa.union(*[json_strings.string(min_length=n, max_length=n) for n in lengths])
    quote = ord('"')
    after = quoted.transitions[:, quote]
    closing = (after >= 0) & quoted.accepting[np.maximum(after, 0)]
    inside = quoted.transitions.copy()
    inside[closing, quote] = -1
    return dfa.minimize(inside, closing, start=int(quoted.transitions[quoted.start, quote]))


def _nonempty(language):
    return None if language is None or dfa.is_empty(language) else language


def _and(a, b):
    if a is None or b is None:
        return None
    if a is ANY:
        return b
    if b is ANY:
        return a
    return a if a is b else _nonempty(dfa.intersect(a, b))


def _minus(a, b, undecided=None):
    """The texts of a not in b and not ``undecided``: the texts on which b's
    automata may be wrong (Builder.undecided)."""
    if a is None or b is ANY:
        return None
    if b is None:
        return a
    return _nonempty(dfa.difference(_universe()[0] if a is ANY else a, b if undecided is None else dfa.union(b, undecided)))


@lru_cache(maxsize=64)
def _undecided_texts(formats: frozenset, decided_numbers: str | None):
    """The JSON texts on which the automaton of one of ``formats`` may be wrong
    (json_formats.UNDECIDED), and the numbers outside ``decided_numbers`` (a
    regex: those bounds, integer, multipleOf and numeric enum/const read right,
    json_numbers.DECIDED...), or None."""
    parts = [json_strings.matching(json_formats.UNDECIDED[f]) for f in sorted(formats & json_formats.UNDECIDED.keys())]
    if decided_numbers:
        parts.append(dfa.difference(json_numbers.number(), dfa.from_regex(decided_numbers)))
    return dfa.union(*parts) if parts else None


def _reads_numbers_in_part(language) -> bool:
    """Whether ``language`` allows some numbers but not all: then bounds, integer,
    multipleOf or a numeric enum/const made it, which read exponent forms only
    in part (json_numbers)."""
    if language is ANY or language is None:
        return False
    numbers = _and(language, json_numbers.number())
    return numbers is not None and not dfa.is_empty(dfa.difference(json_numbers.number(), numbers))


def _or(parts):
    parts = [p for p in parts if p is not None]
    if any(p is ANY for p in parts):
        return ANY
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else dfa.union(*parts)


def schema_grammar(schemas: Schemas, root: int, *, strict_properties: bool = False, any_order: bool = False,
                   max_string_length: int | None = None, max_items: int | None = None):
    """(rules, start rule, terminal DFAs, the terminals shadowing others,
    glued terminals, messages on where strings are not capped, and None or the
    terminals whose lexemes must be distinct within an array or object with
    the names of the "[" and "{" and of the "]" and "}" terminals, the free
    keys' names, and the "{" terminals of unique items, for json_unique.py)
    for the values valid
    under node ``root``, for grammar_from_rules (whitespace is WHITESPACE);
    ``any_order``: objects take their declared keys in any order, as far as
    ORDER_STATES and the rules allow (_key_chains), and at least in schema
    order; ``max_string_length``, ``max_items``: caps on the string
    values and arrays emitted (see _caps)."""
    if root == FALSE:
        raise ConstrainedError("the schema is false: no JSON value is valid")
    caps = _caps(schemas, max_string_length, max_items)
    context = frozenset({root}) - {TRUE}
    # Interleaved key orders and late keys multiply object states: where the rules grow too many, try again
    # in schema order (any order allows at least that), then with one order per object.
    tries = [(any_order, ORDER_STATES, True), *([(False, ORDER_STATES, True)] if any_order else []), (False, 1, False)]
    # A value with long strings under several labels lexes them all in chunks and tails (see
    # _Builder.long_string), a free key with no value is tracked, and free keys are chosen again where an
    # object's rules were asked for a label that frees fewer (_ObjectProduct.settle): all found once the rules
    # are built, which are then built again.
    k, rigid, unfree, known_labels, stale = 0, frozenset(), frozenset(), {}, set()
    while True:
        free, order_states, late_keys = tries[k]
        builder = _Builder(schemas, strict_properties, free, caps, order_states=order_states, late_keys=late_keys,
                           rigid=rigid, unfree=unfree, known_labels=known_labels)
        try:
            start = builder.value(context, context)
            builder.run()
        except _TooManyRules:
            if k == len(tries) - 1 or not (builder.interleaved or builder.late):
                raise
            k += 1
            continue
        mixed = frozenset(c for c, labels in builder.long_labels.items() if len(labels) > 1) - rigid
        productive = builder.productive if builder.free_values else set()
        valueless = frozenset(key for key, values in builder.free_values.items() if not values & productive)
        if not mixed and not valueless and not builder.stale:
            break
        rigid |= mixed
        unfree |= valueless
        for c in builder.stale:  # (stale twice: every label the object can have)
            known_labels[c] = None if c in stale else known_labels.get(c, set()) | builder.asked[c]
        stale |= builder.stale
    rules = builder.grammar_rules(start)
    distinct = ((frozenset(builder.distinct), *builder.brackets, builder.key_names, frozenset(builder.item_braces))
                if builder.distinct or builder.item_braces else None)
    return (rules, start, builder.terminal_dfas, builder.shadows, builder.glued & builder.terminal_dfas.keys(),
            builder.uncapped, distinct)


def left_recursive(rules: dict) -> dict:
    """``rules`` with each rule that may repeat runs before the rest
    (``x: run x | rest``, its only uses of itself at its ends) written left
    recursive: ``x: x_runs rest``, ``x_runs: | x_runs run`` (an empty
    alternative rather than each rest written twice: smaller LALR tables). The
    parser then reduces each run (an item of a long array, a member of a
    map, a long string's chunk) as it ends, so its stack stays flat however
    many come, and the masks where the value may close read a few states, the
    same after every run. Not where an alternative that leads into x begins
    like one that goes on otherwise (the rules of one value's labels, read
    side by side): the parser, which tells them apart only at the close,
    would have to choose at the end of the first run (an LALR conflict, after
    which json_schema compiles ``rules`` as they are)."""
    loops = _loops(rules)
    beside = _entered_beside_others(rules, loops)
    result = {}
    for name, alternatives in rules.items():
        if name not in loops or name in beside:
            result[name] = alternatives
            continue
        runs, rest = loops[name]
        repeated = f"{name}_runs"
        result[repeated] = [()] + [(repeated,) + r for r in runs]
        result[name] = [(repeated,) + r for r in rest]
    return result


def _loops(rules: dict) -> dict:
    """{x: (runs, rests)} for the rules ``x: run x | rest`` that use
    themselves only at their alternatives' ends, after a run."""
    loops = {}
    for name, alternatives in rules.items():
        runs = [a[:-1] for a in alternatives if a and a[-1] == name]
        rests = [a for a in alternatives if name not in a]
        if runs and rests and len(runs) + len(rests) == len(alternatives) and all(runs) \
                and not any(name in r for r in runs):
            loops[name] = runs, rests
    return loops


def _entered_beside_others(rules: dict, loops: dict) -> set:
    """The loops entered after symbols that another alternative goes on from
    otherwise (by another loop, a rule, or a terminal that may begin the
    loop): where the parser may be reading both at once."""
    starts = {name: {a[0] for a in runs + rests if a} for name, (runs, rests) in loops.items()}
    entries: dict = {}  # the symbols before a loop in an alternative -> the loops entered there
    for name, alternatives in rules.items():
        for a in alternatives:
            if a and a[-1] in loops and a[-1] != name:
                entries.setdefault(a[:-1], set()).add(a[-1])
    lengths = {len(prefix) for prefix in entries}
    beside = set()
    for alternatives in rules.values():
        for a in alternatives:
            for n in lengths:
                entered = entries.get(a[:n]) if n < len(a) else None
                if entered and (len(entered) > 1 or a[n] not in entered
                                and (a[n] in rules or any(a[n] in starts[x] for x in entered))):
                    beside |= entered
    return beside


class _TooManyRules(ConstrainedError):
    """The grammar outgrew MAX_ALTERNATIVES, or working out its combined
    schemas' labels MAX_LABEL_WORK (both grow with the key orders tried)."""


@lru_cache(maxsize=None)
def whitespace():
    """The %ignore'd terminal between tokens (bounded by grammar_from_rules)."""
    return dfa.from_regex("[ \t\n\r]+")


def _caps(schemas: Schemas, max_string_length: int | None, max_items: int | None) -> tuple:
    """Two cap nodes, each None when it caps nothing: one for strings of at
    most ``max_string_length`` code points and arrays of at most ``max_items``
    items, and one for the arrays alone (where capping strings is too complex,
    _Builder._cap). A cap node joins each emitted value's context and label
    (_Builder.value) and is never combined into a schema, so a ``not`` around a
    schema still forbids all it forbade."""
    strings = _cap_node(schemas, max_string_length, max_items) if max_string_length is not None else None
    arrays = _cap_node(schemas, None, max_items) if max_items is not None else None
    return strings, arrays


def _cap_node(schemas: Schemas, max_string_length: int | None, max_items: int | None) -> int:
    def make():
        cap = Node("max_string_length/max_items")
        if max_string_length is not None:
            cap.string_lengths = (0, max_string_length)
            if cap.long_string:  # counted by rules, as a long maxLength is
                cap.scalar = _universe()[2]
            else:
                cap.scalar = dfa.union(_universe()[2], json_strings.string(max_length=max_string_length))
        if max_items is not None:
            cap.arr = ArrayAtom(max_items=max_items, pointer=cap.pointer)
        return cap
    return schemas.synthetic(("cap", max_string_length, max_items), make)


class _Builder:
    def __init__(self, schemas: Schemas, strict: bool, any_order: bool, caps: tuple = (None, None),
                 order_states: int = ORDER_STATES, late_keys: bool = True, rigid: frozenset = frozenset(),
                 unfree: frozenset = frozenset(), known_labels: dict | None = None):
        self.schemas = schemas
        self.strict = strict
        self.late_keys = late_keys and not strict  # see _ObjectProduct.late_failures
        self.late = False  # whether some object takes a late key
        self.any_order = any_order
        self.order_states = order_states  # see _key_chains
        self.interleaved = False  # whether some object's declared keys may interleave
        self.caps = caps  # _caps
        self.rules: dict = {}  # name -> list of alternatives (tuples of symbols)
        self.terminal_dfas: dict = {}  # name -> DFA
        self.glued: set = set()  # terminals inside a long string: no whitespace may follow them
        self.shadows: dict = {}  # name -> the terminals that shadow it (key_terminal)
        # terminals whose lexemes must differ from each other in one array or object (unique_value, key_terminal)
        self.distinct: set = set()
        self.key_names: dict = {}  # free keys' terminals (declared_key) -> their names
        self.item_braces: set = set()  # the "{" terminals of objects that are unique items (unique_value)
        # Free keys of objects that count them (_ObjectProduct.settle): (context, name) -> their values' rules;
        # and the (context, name) pairs to track instead, as one of those has no value.
        self.free_values: dict = {}
        self.unfree = unfree
        # Per object context, the labels its rules are built for, in earlier builds (None: all it can have) and
        # in this one; and the contexts where one of this build's came too late to choose its free keys
        # (_ObjectProduct.settle).
        self.known_labels = known_labels or {}
        self.asked: dict = {}
        self.stale: set = set()
        self._terminal_names: dict = {}  # (DFA digest, terminals shadowing it, distinct) -> name
        self._key_terminals: dict = {}  # (object context, cell, free keys) -> key_terminal()
        self._names: dict = {}  # key -> rule name
        self._todo: list = []  # (name, function building its alternatives)
        self._alternatives = 0
        self._label_work = 0  # nodes evaluated by _Product.possible_labels
        self._scalar_memo: dict = {}
        self._products: dict = {}
        self._partitions: dict = {}
        self._scalar_products: dict = {}  # (languages, undecided, universe) -> _ScalarProduct: partitions share them
        self._length_splits: dict = {}
        self._regex_labels: dict = {}  # context -> regex_labels()
        self._shapers: dict = {}
        self._undecided: dict = {}  # frozenset of nodes -> undecided()
        self._in_part: dict = {}  # node -> whether its scalars read numbers in part (_reads_numbers_in_part)
        self._caps_chosen: dict = {}  # context -> its cap node (_cap)
        self.uncapped: list = []  # messages: where strings are not capped
        # Contexts whose long strings are lexed in chunks and tails (long_string), and per context the
        # labels whose long strings were asked for.
        self.rigid = rigid
        self.long_labels: dict = {}

    # Names and the work list.

    def _rule(self, key, prefix: str, build) -> str:
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"{prefix}{len(self._names)}"
            self._todo.append((name, build))
        return name

    def run(self) -> None:
        while self._todo:
            name, build = self._todo.pop()
            alternatives = build()
            self._alternatives += len(alternatives)
            if self._alternatives > MAX_ALTERNATIVES:
                raise _TooManyRules(
                    f"the schema is too complex to compile: its grammar needs over {MAX_ALTERNATIVES} rules "
                    "(many combined object schemas, or large counts such as maxItems)")
            self.rules[name] = alternatives

    def spend_label_work(self, nodes: int) -> None:
        """Count nodes evaluated for the labels combined schemas can reach; past
        MAX_LABEL_WORK the schema is refused (like a grammar with too many rules)."""
        self._label_work += nodes
        if self._label_work > MAX_LABEL_WORK:
            raise _TooManyRules(
                "the schema is too complex to compile: its combined object or array schemas reach too many "
                "states (allOf, anyOf, oneOf, not, if/then/else, with keys in many orders)")

    def terminal(self, language, hint: str, shadowed_by: frozenset = frozenset(), distinct: bool = False,
                 name: str | None = None) -> str:
        """The terminal of a DFA; equal languages (minimal DFAs with equal tables)
        share one, unless other terminals shadow them (see ``key_terminal``) or
        its lexemes must be distinct (``unique_value``; ``name``: a free key's,
        declared_key)."""
        key = (language.digest, shadowed_by, distinct, name)
        terminal = self._terminal_names.get(key)
        if terminal is None:
            terminal = self._terminal_names[key] = f"{hint}{len(self._terminal_names)}"
            self.terminal_dfas[terminal] = language
            if shadowed_by:
                self.shadows[terminal] = shadowed_by
            if distinct:
                self.distinct.add(terminal)
            if name is not None:
                self.key_names[terminal] = name
        return terminal

    def key_terminal(self, product, cell: int) -> str:
        """The terminal of an undeclared key in ``product``'s ``cell``. Where
        undeclared keys are any string, the object's declared names are not
        cut out of it (a DFA of its own per set of names, whose token tables no
        other object shares): they shadow it instead (grammar_from_rules'
        ``shadows``): wherever it is lexed, so are the names, and a name wins,
        so that it never passes as an undeclared key. Every other string stays,
        so the lexer can always finish an undeclared key that is not a name.
        Undeclared keys of an object whose members are counted are distinct
        (``_ObjectProduct.distinct_keys``)."""
        key = (product.context, cell, product.free_bits)
        if key not in self._key_terminals:  # (asked for each member of each state: thousands of times)
            names = frozenset(self.declared_key(product, k) for k in range(len(product.keys))) \
                if product.shadowed else frozenset()
            self._key_terminals[key] = self.terminal(product.cells[cell].language, "KEY", shadowed_by=names,
                                                     distinct=product.distinct_keys)
        return self._key_terminals[key]

    def declared_key(self, product, position: int) -> str:
        """The terminal of a declared key; a free key's (_ObjectProduct.settle)
        is distinct, and the matcher knows its name."""
        name = product.keys[position] if product.free_bits >> position & 1 else None
        return self.terminal(product.key_languages[position], "KEY", distinct=name is not None, name=name)

    # Values.

    def value(self, context: frozenset, label: frozenset, brace: str = '"{"') -> str:
        """The rule deriving the values whose label in ``context`` is ``label``
        (and that meet the caps, _cap); their objects open with ``brace``."""
        cap = self._cap(context)
        if cap is not None:
            context, label = context | {cap}, label | {cap}
        return self._rule(("value", context, label, brace), "value", lambda: self._value(context, label, brace))

    def unique_value(self, context: frozenset, label: frozenset, pointer: str, most: int | None) -> str:
        """``value``'s rule for an item of a uniqueItems array whose items are
        strings or objects (_ArrayProduct._distinct_items) and whose items
        schema holds, kept from repeating an earlier item of the same array by
        the matcher (json_unique.py). A string is one terminal, marked
        ``distinct``; so that a repeated item can always be avoided, the array
        holds at most ``most`` items, no more than the strings the terminal has,
        unless the item may be an object instead. (Its strings are one DFA even
        where they are long: rules that count chunks would hide them from the
        matcher.) An object opens with a "{" terminal of its own
        (``item_braces``), and it must always be able to take another
        property, so that a repeat can always be avoided before its "}" (an
        ``open`` object that no maxProperties or minProperties counts). A cap on strings leaves
        them (``uncapped``): it would only make them fewer."""
        cap = self._cap(context)
        strings, arrays = self.caps
        if cap is not None and cap == strings:
            cap = arrays
            message = (f"strings that are items of the uniqueItems array at {where(pointer)} are not capped: capped, "
                       "they would be too few strings for an array without a bound")
            if message not in self.uncapped:
                self.uncapped.append(message)
        if cap is not None:
            context, label = context | {cap}, label | {cap}

        def build():
            region = self.scalar_region(context, label)
            obj = self.object_start(context, label)
            why = None
            if obj is not None and not self._open(context):
                why = ("its items may be objects that cannot always take one more property of any name and value "
                       "(additionalProperties is false or a schema, propertyNames or strict_properties limit them, "
                       "or maxProperties or minProperties count them), so that a repeat could not always be avoided")
            elif (obj is None and region is not None and not dfa.endless(region)
                  and (count := strings_in(region)) is not None and (most is None or most > count)):
                why = (f"its items may be {count} strings, fewer than the "
                       f"{'unbounded number' if most is None else most} of items the array may hold")
            if why is not None:
                self.schemas.refuse("uniqueItems", pointer, why)
                return self._value(context, label)  # (lenient: uniqueItems skipped)
            alternatives = [(self._item_brace(), obj)] if obj is not None else []
            if region is not None:
                alternatives.append((self.terminal(region, "DISTINCT", distinct=True),))  # (one DFA, however long)
            return alternatives
        return self._rule(("unique", context, label), "value", build)

    def _open(self, context) -> bool:
        """Whether an object of ``context`` can always take another property
        and keep its label (_ObjectProduct.open), with no maxProperties or
        minProperties counting them: one more member could pass a count that
        a schema the label needs to fail makes (under not, oneOf, if)."""
        product = self._product(context, "object")
        product.prepare()
        return product.open and not product.counting and not any(atom.min_properties for atom in product.sets)

    def _item_brace(self) -> str:
        """The "{" of an object that is a unique item: a terminal of its own, so
        that the matcher knows where such an item begins."""
        name = self.terminal(dfa.literal(b"{"), "ITEM")
        self.item_braces.add(name)
        return name

    def _cap(self, context):
        """The cap node for values in ``context``: strings and arrays, or where
        strings meet a pattern, format, enum or const and the cap on them makes
        automata too large to compile, or are regexes (whose rules count no
        code points), arrays only (listed in ``uncapped``)."""
        strings, arrays = self.caps
        if strings is None:
            return arrays
        if context not in self._caps_chosen:
            self._caps_chosen[context] = strings
            pointer = self._shaped_by(context)
            if pointer is not None and self.regex_labels(context) is not None:
                self._caps_chosen[context] = arrays
                self.uncapped.append(f"strings of format 'regex' at {where(pointer)} are not capped: grammar rules "
                                     "take them, which count no code points")
            elif pointer is not None:
                try:
                    self.partition(context | {strings})
                except ConstrainedError:
                    self._caps_chosen[context] = arrays
                    self.uncapped.append(
                        f"strings at {where(pointer)} are not capped: with their pattern, format, enum or const, "
                        f"strings of at most {self.schemas.node(strings).string_lengths[1]} code points exceed the "
                        "automaton budget")
        return self._caps_chosen[context]

    def _value(self, context, label, brace: str = '"{"') -> list:
        alternatives = []
        lengths, regexes = self._strings_by_rules(context)
        region = self.scalar_region(context, label, nonstring=lengths is not None or regexes is not None)
        if region is not None:
            alternatives.append((self.terminal(_universe()[0] if region is ANY else region, "SCALAR"),))
        if lengths is not None and lengths.get(label):
            self.long_labels.setdefault(context, set()).add(label)
            alternatives.append((self._opening(), self.long_string(tuple(lengths[label]), context not in self.rigid)))
        if regexes is not None:
            alternatives += self._regex_strings(context, label, *regexes)
        obj = self.object_start(context, label)
        if obj is not None:
            alternatives.append((brace, obj))
        arr = self.array_start(context, label)
        if arr is not None:
            alternatives.append(('"["', arr))
        return alternatives

    def _strings_by_rules(self, context) -> tuple:
        """(length_split, regex_labels) of ``context``: where either is not None,
        its strings are derived by rules and its scalar terminal leaves them out."""
        lengths = self.length_split(context)
        return lengths, self.regex_labels(context) if lengths is None else None

    def scalar(self, i: int, nonstring: bool = False):
        """The scalar language of node ``i`` (ANY, None or a DFA), combinators
        included; only its numbers, booleans and null with ``nonstring``."""
        key = (i, nonstring)
        if key in self._scalar_memo:
            if self._scalar_memo[key] is _IN_PROGRESS:
                self._cycle(i)
            return self._scalar_memo[key]
        self._scalar_memo[key] = _IN_PROGRESS
        node = self.schemas.node(i)
        try:
            language = self._combined_scalar(node, nonstring)
        except ConstrainedError as e:
            del self._scalar_memo[key]  # not in progress any more: a caller may go on without this node
            if not str(e).startswith("the combined automaton is too complex"):  # raised and placed deeper down
                raise
            raise ConstrainedError(f"the scalar values allowed at {where(node.pointer)} (its type, string, number, "
                                   f"enum and combinator keywords together) are too complex to compile: {e}") from None
        self._scalar_memo[key] = language
        return language

    def _combined_scalar(self, node, nonstring: bool):
        if node.regex_strings and not nonstring:  # (see regex_labels)
            self.schemas.refuse("format", node.pointer, "format 'regex' is enforced only where a string must meet "
                                "it and no other string keyword applies: not under not, nor where oneOf or anyOf "
                                "tell strings apart by it, nor for names, unique items or capped strings")
            node = dataclasses.replace(node, scalar=_or([node.scalar, _universe()[1]]), regex_strings=False)
        if nonstring:
            language = _and(node.scalar, _universe()[2])
        elif node.long_string is not None:
            language = _or([node.scalar, self._long_string_dfa(node)])
        else:
            language = node.scalar
        for j in node.all_of:
            language = _and(language, self.scalar(j, nonstring))
        for group in node.any_of:
            language = _and(language, _or([self.scalar(j, nonstring) for j in group]))
        for group in node.one_of:
            parts = [self.scalar(j, nonstring) for j in group]
            exactly_one = [_minus(p, _or(parts[:k] + parts[k + 1:]), self.undecided(group[:k] + group[k + 1:]))
                           for k, p in enumerate(parts)]
            language = _and(language, _or(exactly_one))
        for j in node.not_:
            language = _minus(language, self.scalar(j, nonstring), self.undecided([j]))
        return language

    def _long_string_dfa(self, node):
        """The strings of ``node.long_string`` as one DFA, where they meet other
        string constraints (patterns, formats, enums, keys)."""
        low, high = node.long_string
        try:
            return _nonempty(json_strings.string(min_length=low, max_length=high))
        except ConstrainedError as e:
            raise ConstrainedError(
                f"minLength/maxLength at {where(node.pointer)} cannot be enforced where the string also meets a "
                f"pattern, format, enum or property name, or is a unique item: {e}") from None

    def scalar_region(self, context, label, nonstring: bool = False):
        """The DFA of the scalars whose label in ``context`` is ``label`` (ANY: all), or None."""
        if not context:  # no schema: every scalar
            return _universe()[2] if nonstring else ANY
        if len(context) == 1:  # the common case, without a product
            (i,) = context
            language = self.scalar(i, nonstring)
            return language if label else _minus(_universe()[2] if nonstring else ANY, language, self.undecided(context))
        return self.partition(context, nonstring).region(label)

    def _placed(self, error: ConstrainedError, nodes: list) -> ConstrainedError:
        """``error`` (a budget) with the pointers of the ``nodes`` whose scalars it combined."""
        places = [where(self.schemas.node(i).pointer) for i in nodes]
        return ConstrainedError(f"{error} at {places[0]}" + (f" (with {', '.join(places[1:4])})" if places[1:] else "")
                                + ": simplify the scalar constraints that apply to one value there")

    # Long strings: '"', chunks of LONG_CHUNK code points, a shorter tail, '"'.

    def length_split(self, context):
        """When strings in ``context`` are told apart by their length only and some
        schema counts more than LONG_STRING code points: label -> [(low, high or
        None)] lengths. Else None (strings are classified by DFAs)."""
        if context in self._length_splits:
            return self._length_splits[context]
        order = self.closure(context)
        nodes = [self.schemas.node(i) for i in order]
        split = None
        if any(n.long_string for n in nodes) and self._shaped_by(context) is None:
            bounds = [n.string_lengths for n in nodes if n.string_lengths]
            points = sorted({0} | {low for low, _ in bounds} | {high + 1 for _, high in bounds if high is not None})
            split = {}
            for k, low in enumerate(points):
                high = points[k + 1] - 1 if k + 1 < len(points) else None
                atoms = {i: (n.string_lengths[0] <= low and (n.string_lengths[1] is None or
                                                             (high is not None and high <= n.string_lengths[1])))
                         if n.string_lengths else self._string_kind(n) for i, n in zip(order, nodes)}
                label = _label(self.schemas, order, atoms, context)
                split.setdefault(label, []).append((low, high))
        self._length_splits[context] = split
        return split

    def _shaped_by(self, context):
        """The pointer of a schema of ``context`` that tells strings apart by more
        than their length (a pattern, format, enum or const), or None when each
        allows all strings, none, or a range of lengths."""
        if context not in self._shapers:
            self._shapers[context] = next(
                (n.pointer for n in map(self.schemas.node, self.closure(context))
                 if not n.string_lengths and self._string_kind(n) is None), None)
        return self._shapers[context]

    def _string_kind(self, node):
        """Whether a node's own keywords allow every string (True), none (False),
        or only some (None)."""
        if node.regex_strings:
            return None
        if node.scalar is None or node.scalar is ANY:
            return node.scalar is ANY
        strings = _universe()[1]
        if dfa.is_empty(dfa.intersect(node.scalar, strings)):
            return False
        return True if dfa.is_empty(dfa.difference(strings, node.scalar)) else None

    def _opening(self) -> str:
        """The opening quote of a string whose text is lexed in pieces (glued)."""
        opening = self.terminal(dfa.literal(b'"'), "OPEN")
        self.glued.add(opening)
        return opening

    def long_string(self, lengths: tuple, flexible: bool = True) -> str:
        """The rest of a string after its opening quote, for strings whose number
        of code points is in ``lengths``: lexemes of LONG_CHUNK code points,
        then the closing quote.

        Where the lengths are one range, the lexemes are TEXT, of 1 to
        LONG_CHUNK code points (the lexer ends one only at LONG_CHUNK code
        points or at the quote, so only the last may be short, and one
        terminal is alive inside all the others), but where the bounds make
        the last one's length matter: its own terminal at the maximum
        (_last_text), and at the minimum, where the string may also go on, a
        chunk of exactly LONG_CHUNK or a shorter tail (_flexible). Else (or
        not ``flexible``) every lexeme is a chunk or a tail, both alive inside
        a chunk where the string may end in the next one (``_count``). The
        two ways overlap, so the strings of one value's labels must all be
        lexed the second way where a value may take several (see
        ``schema_grammar``)."""
        if flexible and len(lengths) == 1:
            return self._flexible(*lengths[0])
        chunk = self._glued_text((LONG_CHUNK,))

        def tail(lengths):
            short = tuple(t for t in range(1, LONG_CHUNK) if _member(lengths, t))
            return self._glued_text(short)
        return self.counted(lengths, _Unit((chunk,), LONG_CHUNK, _QUOTE, tail))

    def _flexible(self, low: int, high: int | None) -> str:
        """``long_string`` for the lengths low..high (None: unbounded), in TEXT lexemes."""
        def rule(build) -> str:
            return self._rule(("long", low, high), "count", build)

        text = self._glued_text(tuple(range(1, LONG_CHUNK + 1)))
        if low <= 1:
            # Counted are the code points after the first: a string of n > 0 is (n - 1) // LONG_CHUNK full
            # lexemes, then the last, with the rest (1 to LONG_CHUNK).
            rest = self.counted(((0, None if high is None else high - 1),),
                                _Unit((text,), LONG_CHUNK, _QUOTE, self._last_text, last=True))
            return rule(lambda: [(_QUOTE,), (rest,)]) if low == 0 else rest
        full = (low - 1) // LONG_CHUNK  # lexemes before the one where the string may end: full ones
        least = low - full * LONG_CHUNK  # what that one holds at least if it is the last (2 to LONG_CHUNK)
        if full:
            after = self._flexible(least, None if high is None else high - full * LONG_CHUNK)
            return self.counted(((full * LONG_CHUNK,) * 2,), _Unit((text,), LONG_CHUNK, after))
        chunk = self._glued_text((LONG_CHUNK,))

        def build():
            most = LONG_CHUNK - 1 if high is None else min(high, LONG_CHUNK - 1)
            alternatives = [(self._glued_text(tuple(range(low, most + 1))), _QUOTE)] if low <= most else []
            if high is None or high >= LONG_CHUNK:
                alternatives.append((chunk, _QUOTE))
            if high is None or high > LONG_CHUNK:
                alternatives.append((chunk, self._flexible(1, None if high is None else high - LONG_CHUNK)))
            return alternatives
        return rule(build)

    def _last_text(self, lengths: tuple) -> str | None:
        """The terminal of a long string's last lexeme, where ``lengths`` are
        the numbers of code points after the string's first that may be left:
        it holds one more than those (1 to LONG_CHUNK)."""
        return self._glued_text(tuple(t + 1 for t in range(LONG_CHUNK) if _member(lengths, t)))

    def _glued_text(self, lengths: tuple) -> str | None:
        """The glued terminal of a string's text of one of these numbers of code
        points (None where there are none)."""
        if not lengths:
            return None
        name = self.terminal(_string_content(lengths), "TEXT")
        self.glued.add(name)
        return name

    def counted(self, lengths: tuple, unit: "_Unit") -> str:
        """The rest of a sequence of units whose total (in code points or items)
        is in ``lengths``, counted in runs: any number of the longest runs, then
        fewer than make one of those of the next shorter runs, and so on down to
        single units, then the tail and the close. Runs of ``shared`` units are
        rules of their own, each of RUN_BASE shorter runs, so counting to n takes
        about 2 RUN_BASE log n short rules; other runs are written out, one
        level of about sqrt(n) units."""
        top = max(max(low, high + 1 if high is not None else 0) for low, high in lengths) // unit.size
        if unit.shared:
            spans = [1]
            while spans[-1] * RUN_BASE <= top:
                spans.append(spans[-1] * RUN_BASE)
        else:
            group = max(1, math.isqrt(top))
            spans = [1, group] if group > 1 else [1]
        return self._count(lengths, unit, tuple(spans), None)

    def _count(self, lengths: tuple, unit: "_Unit", spans: tuple, most: int | None) -> str:
        """At most ``most`` (None: any number) runs of ``spans[-1]`` units, then
        the rest in shorter runs."""
        def build():
            span = spans[-1] * unit.size
            if len(spans) > 1:
                alternatives = [(self._count(_clip(lengths, span - 1), unit, spans[:-1], spans[-1] // spans[-2] - 1),)]
            else:
                alternatives = [(unit.close,)] if _member(lengths, 0) and not unit.last else []
                tail = unit.tail(lengths) if unit.tail else None
                if tail is not None:
                    alternatives.append((tail, unit.close))
            rest = _clip(_shift(lengths, span), None if most is None else most * span - 1)
            if rest and most != 0:
                later = self._count(rest, unit, spans, None if most is None else most - 1)
                alternatives.append(self._run(unit, spans) + (later,))
            return alternatives
        return self._rule(("count", lengths, unit.key, spans, most), "count", build)

    def _run(self, unit: "_Unit", spans: tuple) -> tuple:
        """The symbols of a run of ``spans[-1]`` units."""
        if len(spans) == 1:
            return unit.symbols
        symbols = self._run(unit, spans[:-1]) * (spans[-1] // spans[-2])
        if not unit.shared:
            # Written out: a rule shared by runs of different lengths would end where LALR merges
            # what may follow it, string tails of other lengths included.
            return symbols
        return (self._rule(("run", unit.key, spans), "count", lambda: [symbols]),)

    # Strings of format "regex": a grammar, not a DFA (json_regex.py).

    def regex_labels(self, context):
        """Where a schema of ``context`` takes strings of format "regex" and
        every other one takes all strings or none: (the label of those
        strings, the label of the others); else None (strings are classified
        by DFAs, and a regex format among them is refused, _combined_scalar)."""
        if context not in self._regex_labels:
            order = self.closure(context)
            nodes = [self.schemas.node(i) for i in order]
            found = None
            if any(n.regex_strings for n in nodes) and not any(n.long_string for n in nodes):
                kinds = {i: self._string_kind(n) for i, n in zip(order, nodes) if not n.regex_strings}
                if None not in kinds.values():
                    found = tuple(_label(self.schemas, order, kinds | {i: valid for i, n in zip(order, nodes)
                                                                      if n.regex_strings}, context)
                                  for valid in (True, False))
            self._regex_labels[context] = found
        return self._regex_labels[context]

    def _regex_strings(self, context, label, regexes: frozenset, others: frozenset) -> list:
        """The strings of ``label`` where ``regex_labels`` are (``regexes``, ``others``)."""
        if label == regexes == others:  # (the format decides nothing here)
            return [(self.terminal(_universe()[1], "SCALAR"),)]
        if label == regexes:
            return [(self._opening(), self.regex_rest())]
        if label == others:
            pointer = next(self.schemas.node(i).pointer for i in self.closure(context)
                           if self.schemas.node(i).regex_strings)
            self.schemas.refuse("format", pointer, "format 'regex' is enforced only where a string must meet it: "
                                "the strings that fail it are no grammar's (not under not, nor where oneOf or "
                                "anyOf tell strings apart by it)")
        return []

    def regex_rest(self) -> str:
        """The rest of a string of format "regex" after its opening quote: its
        pieces as glued terminals, groups nested by rules (json_regex.py)."""
        def glued(name: str) -> str:
            terminal = self.terminal(json_regex.piece(name), "REGEX")
            self.glued.add(terminal)
            return terminal

        def rule(name: str, build) -> str:
            return self._rule(("regex", name), "regex", build)

        # (left recursive, so that the parser's stack stays as deep as the groups are: masks are remembered
        # under the top of the stack they read, and a long regex reads the same few states again)
        body = rule("body", lambda: [(alternative,), (body, glued("bar"), alternative)])
        terms = glued("terms")
        alternative = rule("alternative", lambda: [(), (terms,), (grouped,), (grouped, terms)])
        grouped = rule("grouped", lambda: [(alternative, group)])
        group = rule("group", lambda: [(glued("group"), body, glued("close_group")),
                                       (glued("group"), body, glued("close_group"), glued("quantifier")),
                                       (glued("lookahead"), body, glued("close_group"))])
        return rule("string", lambda: [(body, _QUOTE)])

    def undecided(self, nodes) -> object:
        """The texts on which the scalar languages of ``nodes`` may be wrong
        (_undecided_texts of the formats and numbers their closure meets), or
        None: a value that must fail them is never one of these."""
        key = frozenset(nodes)
        if key not in self._undecided:
            closure = self.closure(key)
            nodes = [self.schemas.node(j) for j in closure]
            numbers = [n for j, n in zip(closure, nodes) if self._numbers_in_part(j)]
            decided = None if not numbers else json_numbers.DECIDED if any(n.counts_digits for n in numbers) \
                else json_numbers.DECIDED_BY_VALUE
            self._undecided[key] = _undecided_texts(frozenset(n.format for n in nodes) - {None}, decided)
        return self._undecided[key]

    def _numbers_in_part(self, i: int) -> bool:
        if i not in self._in_part:
            self._in_part[i] = _reads_numbers_in_part(self.schemas.node(i).scalar)
        return self._in_part[i]

    def finite_values(self, i: int):
        """The values node ``i`` allows, {JSON-equality key: value}, when they are
        a few scalars; else None."""
        language = self.scalar(i)
        if language is ANY or not self.scalars_only(i):
            return None
        if language is None:
            return {}
        candidates = [True, False, None] + [v for j in self.closure({i}) for v in self.schemas.node(j).values]
        found = {_equality_key(v): v for v in candidates
                 if language.matches(json.dumps(v, ensure_ascii=False).encode())}
        others = _nonempty(dfa.difference(language, _or([scalar_literal(v) for v in found.values()]))) if found else language
        if len(found) > MAX_UNIQUE or others is not None:
            return None
        return found

    def scalars_only(self, i: int) -> bool:
        """Whether no object and no array satisfies node ``i``."""
        return not any(frozenset({i}) in self._product(frozenset({i}), kind).possible_labels(0)
                       for kind in ("object", "array"))

    def _cycle(self, i: int):
        raise ConstrainedError(
            f"the schema at {where(self.schemas.node(i).pointer)} refers to itself for the same value "
            "(through $ref, allOf, anyOf, oneOf or not) without descending into a property or an item, "
            "so no value can be checked against it")

    def closure(self, context, preorder: bool = False) -> list:
        """The nodes that apply to the same value as ``context``, each after the
        nodes it combines (``preorder``: each before them, but after those whose
        keyword comes before its "properties": the order a reader meets their
        property names in the schema)."""
        before, after, state = [], [], {}

        def visit(i):
            if state.get(i) == 2:
                return
            if state.get(i) == 1:
                self._cycle(i)
            state[i] = 1
            node = self.schemas.node(i)
            for j in node.leading if preorder else ():
                visit(j)
            before.append(i)
            for j in node.combines:
                visit(j)
            state[i] = 2
            after.append(i)

        for i in sorted(context):
            visit(i)
        return before if preorder else after

    def _product(self, context, kind: str):
        key = (context, kind)
        if key not in self._products:
            self._products[key] = (_ObjectProduct if kind == "object" else _ArrayProduct)(self, context)
        return self._products[key]

    def _children(self, requirements, extra=()):
        """The child context of a member or item, as a list in a fixed order."""
        ids = []
        for r in list(requirements) + list(extra):
            if r not in (TRUE, FALSE) and r not in ids:
                ids.append(r)
        if len(ids) > MAX_CHILDREN:
            raise ConstrainedError(
                f"the schema is too complex to compile: {len(ids)} schemas apply to one property or item at once "
                f"(at {where(self.schemas.node(ids[0]).pointer)})")
        return ids

    def _labels(self, ids):
        """The labels a value may have in the child context ``ids``: every subset
        of a small context (empty ones are pruned with the grammar), else only
        those some scalar, object or array can have."""
        if len(ids) <= MAX_SUBSETS:
            return [frozenset(ids[k] for k in range(len(ids)) if mask >> k & 1) for mask in range(1 << len(ids))]
        context = frozenset(ids)
        lengths, regexes = self._strings_by_rules(context)
        labels = (set(self.partition(context, nonstring=lengths is not None or regexes is not None).labels())
                  | set(lengths or ()) | set(regexes or ()))
        for kind in ("object", "array"):
            labels |= self._product(context, kind).possible_labels(0)
        return sorted(labels, key=sorted)

    def partition(self, context, nonstring: bool = False) -> "_Partition":
        hit = self._partitions.get((context, nonstring))
        if hit is None:
            nodes = sorted(context)
            try:
                languages = [self.scalar(i, nonstring) for i in nodes]
                undecided = [self.undecided([i]) for i in nodes]
                universe = _universe()[2] if nonstring else _universe()[0]
                key = (tuple(map(_language_key, languages)), tuple(map(_language_key, undecided)), universe.digest)
                product = self._scalar_products.get(key)
                if product is None:
                    product = self._scalar_products[key] = _ScalarProduct(languages, undecided, universe)
            except ConstrainedError as e:
                raise self._placed(e, nodes) from None
            never = {i for i, language in zip(nodes, languages) if language is None}
            hit = self._partitions[(context, nonstring)] = _Partition(nodes, product, never)
        return hit

    # Objects: "{" then members, each with a declared key (one not done yet, which
    # passes the keys its chain lists before it) or an undeclared one, then "}". Rules per
    # (product state, wanted label).

    def object_start(self, context, label):
        product = self._product(context, "object")
        if not product.can_reach(0, label):
            return None
        state = product.settle(label)
        return self._rule(("ostart", context, label, state), "object",
                          lambda: self._close(product, label, state, '"}"') + self._members(product, label, state))

    def _close(self, product, label, state, bracket: str) -> list:
        return [(bracket,)] if product.final_label(state) == label else []

    def _object_later(self, product, label, state) -> str:
        return self._rule(("olater", product.context, label, state), "object",
                          lambda: self._close(product, label, state, '"}"')
                          + [('","',) + alt for alt in self._members(product, label, state)])

    def _members(self, product, label, state) -> list:
        """The alternatives for the next member: an undeclared key, a free one
        (_ObjectProduct.settle), or a declared one not done yet (which passes
        the keys its schemas list before it)."""
        alternatives = []
        for c, cell in enumerate(product.cells):
            if not self.strict or cell.allowed_strict:
                must_fail = product.repeat_must_fail(state, c, label)
                if must_fail is not None:
                    alternatives += self._member(product, label, state, self.key_terminal(product, c),
                                                 cell.requirements, state[0], c, must_fail)
        for c in range(len(product.chains)):
            declared = self._declared(product, label, state, c)
            if declared is not None:
                alternatives.append((declared,))
        failed, count = state[1] | product.count_failures(state[2] + 1), min(state[2] + 1, product.count_cap)
        if product.free and product.can_reach(failed, label):  # (every free member moves the state alike)
            counts = state[4]
            for g, (positions, _, counted) in enumerate(product.groups):
                if counts[g] < len(positions) or not counted:
                    after = (state[0], failed, count, state[3], (*counts[:g], counts[g] + counted, *counts[g + 1:]))
                    alternatives.append((self._free_members(product, g), self._object_later(product, label, after)))
        for position in product.late_keys:
            after = product.late_failures(state, position, label)
            if after is not None:
                self.late = True
                alternatives += self._member(product, label, (state[0], after, *state[2:]),
                                             self.declared_key(product, position), product.key_requirements[position],
                                             state[0])
        return alternatives

    def _free_members(self, product, g: int) -> str:
        """The rule for a member with a key of free group g (_ObjectProduct.settle):
        one for every state and label, as they all move the state alike."""
        def build():
            positions, _, counted = product.groups[g]
            alternatives = []
            for position in positions:
                ids = self._children(product.key_requirements[position])
                value = self.value(frozenset(ids), frozenset(ids))
                alternatives.append((self.declared_key(product, position), '":"', value))
                if counted:
                    self.free_values.setdefault((product.context, product.keys[position]), set()).add(value)
            return alternatives
        return self._rule(("ofree", product.context, g), "member", build)

    def _declared(self, product, label, state, c: int):
        """The rule for a member with the first key of chain c not done, or a later
        one (the keys in between left out, and the keys other chains list before
        it), or None. A key shared by chains comes through the first of them, so
        that each member has one derivation."""
        done, failed = state[:2]
        position = next((k for k in product.chains[c] if not done >> k & 1), None)
        if position is None:
            return None

        def build():
            alternatives = []
            if product.owner[position] == c:
                skipped = product.before[position] & ~done
                after, bits = failed, skipped
                while bits:  # a required key skipped fails the sets requiring it
                    after |= product.requires[(bits & -bits).bit_length() - 1]
                    bits &= bits - 1
                if product.can_reach(after, label):
                    alternatives += self._member(product, label, (done, after, *state[2:]),
                                                 self.declared_key(product, position),
                                                 product.key_requirements[position], done | skipped | 1 << position)
            skip = (done | 1 << position, failed | product.requires[position], *state[2:])
            rest = self._declared(product, label, skip, c) if product.can_reach(skip[1], label) else None
            return alternatives + ([(rest,)] if rest is not None else [])
        return self._rule(("odeclared", product.context, label, state, c), "member", build)

    def _member(self, product, label, state, key: str, requirements, done: int, cell: int = -1,
                must_fail: tuple = ()) -> list:
        """Alternatives ``key ":" value later`` for each label of the member's
        value; ``cell``: the region of an undeclared key (-1: a declared one),
        ``must_fail``: schemas its value may not satisfy."""
        _, failed, count, used, free = state
        alive = [(k, r) for k, r in enumerate(requirements) if not failed >> k & 1]
        failed_before = ([r for k, r in enumerate(requirements) if failed >> k & 1]
                         if cell >= 0 and product.repeatable(cell) else [])
        ids = self._children([r for _, r in alive], failed_before)  # (see _ObjectProduct.repeat_matters)
        too_many = product.count_failures(count + 1)
        alternatives = []
        for child_label in self._labels(ids):
            new_failed = failed | too_many | _unmet(alive, child_label)
            if product.can_reach(new_failed, label) and not child_label & set(must_fail):
                after = (done, new_failed, min(count + 1, product.count_cap),
                         used | product.repeat_matters(cell, new_failed, label) << cell if cell >= 0 else used, free)
                alternatives.append((key, '":"', self.value(frozenset(ids), child_label),
                                     self._object_later(product, label, after)))
        return alternatives

    # Arrays: "[" then items, "," between them, then "]".

    def array_start(self, context, label):
        product = self._product(context, "array")
        if not product.can_reach(0, label):
            return None
        state = product.prepare()
        return self._rule(("astart", context, label, state), "array",
                          lambda: self._close(product, label, state, '"]"') + self._items(product, label, state, ()))

    def _array_later(self, product, label, state) -> str:
        counted = self._uniform_items(product, label, state)
        if counted is not None:
            return counted
        return self._rule(("alater", product.context, label, state), "array",
                          lambda: self._close(product, label, state, '"]"')
                          + self._items(product, label, state, ('","',)))

    def _uniform_items(self, product, label, state):
        """When every further item must meet the same requirement and only their
        number still matters (minItems, maxItems): the counted rule for the rest
        of the array; else None."""
        position, failed, counts, seen = state
        alive = [k for k in range(len(product.sets)) if not failed >> k & 1]
        if any(product.sets[k].contains is not None or product.values[k] or position < len(product.sets[k].prefix)
               for k in alive):
            return None
        requirements = [(k, product.sets[k].items) for k in alive]
        ids = self._children([r for _, r in requirements])
        viable = [child for child in self._labels(ids) if product.can_reach(failed | _unmet(requirements, child), label)]
        if len(viable) != 1 or _unmet(requirements, viable[0]):
            return None
        # Item counts from here on where the label is the wanted one; beyond a set's maxItems the set fails.
        bounds = [(product.sets[k].min_items, 0) for k in alive]
        bounds += [(product.most_items(k) + 1, 1 << k) for k in alive if product.most_items(k) is not None]
        points = sorted({position} | {count for count, _ in bounds if count > position})
        lengths = []
        for i, low in enumerate(points):
            over = sum(bit for count, bit in bounds if count <= low)
            if product.final_label((min(low, product.count_cap), failed | over, counts, seen)) != label:
                continue
            high = points[i + 1] - 1 - position if i + 1 < len(points) else None
            if lengths and lengths[-1][1] == low - position - 1:
                lengths[-1] = (lengths[-1][0], high)
            else:
                lengths.append((low - position, high))
        if not lengths:  # no number of items gives the label
            return self._rule(("nothing",), "array", list)
        value = self._item(product, frozenset(ids), viable[0], requirements)
        return self.counted(tuple(lengths), _Unit(('","', value), 1, '"]"', shared=True))

    def _items(self, product, label, state, separator) -> list:
        position, failed, counts, seen = state
        if position >= MAX_COUNT:
            k = max(range(len(product.sets)), key=lambda k: product.item_count(k))
            if product.set_nodes[k] in self.caps:
                schema = next(i for i in product.set_nodes if i not in self.caps)
                raise ConstrainedError(
                    f"max_items={product.sets[k].max_items} would need a grammar rule per item beyond {MAX_COUNT} "
                    f"items in the arrays at {where(self.schemas.node(schema).pointer)}, whose items prefixItems, "
                    f"contains or combined array schemas tell apart: lower max_items to at most {MAX_COUNT}")
            raise ConstrainedError(
                f"the array at {where(self.schemas.node(product.set_nodes[k]).pointer)} would need a grammar rule "
                f"per item beyond {MAX_COUNT} items: "
                "items are counted without one only once every further item must meet one schema and nothing else "
                "tells them apart (prefixItems, contains, array schemas combined by anyOf, oneOf, not). "
                f"Lower minItems/maxItems there to at most {MAX_COUNT}, or drop what tells the items apart")
        alive = [(k, product.item_requirement(k, position)) for k in range(len(product.sets)) if not failed >> k & 1]
        contains = {k: product.sets[k].contains for k, _ in alive if product.sets[k].contains is not None}
        distinct = {k: product.values[k] for k, _ in alive if product.values[k]}
        ids = self._children([r for _, r in alive], list(contains.values()) + [i for v in distinct.values() for i in v])
        alternatives = []
        for child_label in self._labels(ids):
            new_failed, new_counts, new_seen = failed | _unmet(alive, child_label), list(counts), list(seen)
            for k, node in contains.items():
                if node == TRUE or node in child_label:
                    new_counts[k] = min(counts[k] + 1, product.contains_caps[k])
                    if product.sets[k].max_contains is not None and new_counts[k] > product.sets[k].max_contains:
                        new_failed |= 1 << k
            for k, values in distinct.items():
                bit = sum(1 << j for j, value in enumerate(values) if value in child_label)
                if seen[k] & bit:
                    new_failed |= 1 << k
                new_seen[k] |= bit
            if product.can_reach(new_failed, label):
                after = (min(position + 1, product.count_cap), new_failed,
                         tuple(0 if new_failed >> k & 1 else c for k, c in enumerate(new_counts)),
                         tuple(0 if new_failed >> k & 1 else c for k, c in enumerate(new_seen)))
                item = self._item(product, frozenset(ids), child_label, alive)
                alternatives.append(separator + (item, self._array_later(product, label, after)))
        return alternatives

    def _item(self, product, context: frozenset, label: frozenset, requirements: list) -> str:
        """The rule of an item (``requirements``: (set, its schema for the item)
        of the sets not failed): ``unique_value``'s where the product's items
        must be distinct strings and this one meets their schema, else ``value``'s."""
        k = product.distinct_set
        if k is not None and dict(requirements).get(k) in label:
            return self.unique_value(context, label, product.sets[k].pointer, product.most_items(k))
        if k is not None and k in dict(requirements) and product.distinct_objects and self._open(context):
            # An item that fails the items schema (the array may, under anyOf say) where it could meet it instead:
            # its objects are lexed where a unique item's are, so they open with the same "{", and are kept
            # distinct too (which may only refuse an array that fails uniqueItems anyway, never lead nowhere).
            return self.value(context, label, self._item_brace())
        return self.value(context, label)

    # The grammar.

    def grammar_rules(self, start: str) -> dict:
        """The productive rules ``start`` reaches, string literals made terminals."""
        productive = self.productive
        if start not in productive:
            raise ConstrainedError(
                "no JSON value satisfies the schema: its constraints contradict each other (for example a required "
                "property whose schema nothing satisfies, minimum above maximum, or disjoint allOf branches), or "
                "an object would need distinct undeclared property names that the matcher cannot keep apart "
                "(for minProperties over names that may run out of endings, such as under a propertyNames "
                "maxLength: declare the names as properties)")
        literals: dict = {}

        def symbol(s: str) -> str:
            if s[0] == '"':  # its own terminal: the closing quote of a long string is not the glued opening one
                if s not in literals:
                    literals[s] = f"LITERAL{len(self._terminal_names) + len(literals)}"
                    self.terminal_dfas[literals[s]] = dfa.literal(json.loads(s).encode())
                return literals[s]
            return s

        rules, todo = {}, [start]
        used_terminals = set()
        while todo:
            name = todo.pop()
            if name in rules:
                continue
            kept = [tuple(symbol(s) for s in alt) for alt in self.rules[name]
                    if all(s in productive or not s[0].islower() for s in alt)]
            rules[name] = kept
            for alt in kept:
                todo += [s for s in alt if s[0].islower() and s not in rules]
                used_terminals.update(s for s in alt if s[0].isupper())
        self.shadows = {n: names for n, names in self.shadows.items() if n in used_terminals}
        self.distinct &= used_terminals
        self.item_braces &= used_terminals
        self.key_names = {t: name for t, name in self.key_names.items() if t in used_terminals}
        self.brackets = ([literals[s] for s in ('"["', '"{"') if s in literals] + sorted(self.item_braces),
                         [literals[s] for s in ('"]"', '"}"') if s in literals])
        used_terminals.update(*self.shadows.values())
        self.terminal_dfas = {n: d for n, d in self.terminal_dfas.items() if n in used_terminals}
        return rules

    @cached_property
    def productive(self) -> set:
        """The rules that derive at least one string (a rule appears once all the
        rules of one of its alternatives do), once they are all built."""
        waiting: dict = {}  # rule -> [(owner, alternative index)]
        missing = {}
        productive, todo = set(), []
        for name, alternatives in self.rules.items():
            for k, alt in enumerate(alternatives):
                rules = {s for s in alt if s[0].islower()}
                missing[(name, k)] = len(rules)
                for s in rules:
                    waiting.setdefault(s, []).append((name, k))
                if not rules and name not in productive:
                    productive.add(name)
                    todo.append(name)
        while todo:
            for owner, k in waiting.get(todo.pop(), ()):
                missing[(owner, k)] -= 1
                if missing[(owner, k)] == 0 and owner not in productive:
                    productive.add(owner)
                    todo.append(owner)
        return productive


_IN_PROGRESS = object()


def _equality_key(value):
    """Equal JSON values (1 and 1.0 too) have equal keys."""
    return (type(value).__name__ if isinstance(value, (bool, str)) or value is None else "number", value)


class _Partition:
    """A universe (the scalars, or the non-string ones) split by which of some
    languages (``nodes`` names them, one each) its texts belong to, by the
    ``_ScalarProduct`` of those languages: the labels its texts have, and the
    minimal DFA of a label's texts."""

    def __init__(self, nodes: list, product: "_ScalarProduct", never: set):
        self.nodes, self.product, self.never = nodes, product, never

    def labels(self) -> set:
        bits = self.product.bits
        return {frozenset(self.nodes[bits[k]] for k in np.flatnonzero(row)) for row in self.product.rows}

    def region(self, label: frozenset):
        if label & self.never:
            return None
        return self.product.region(tuple(self.nodes[k] in label for k in self.product.bits))


def _language_key(language):
    """What tells a scalar language apart (ANY, None or a DFA), for _ScalarProduct's key."""
    return language if language is ANY or language is None else language.digest


class _ScalarProduct:
    """One product automaton of a universe and some languages (None: a language
    left out), with a minimal DFA per way of belonging to them on demand:
    many contexts of a schema ask for the same languages (the same $ref in
    several places, the same type in several branches), so they share one.
    A text that must not belong to a language lies outside the ``undecided``
    strings of that language too (those it may be wrong on)."""

    def __init__(self, languages: list, undecided: list, universe):
        dfas = [universe] + [universe if language is ANY else language for language in languages if language is not None]
        self.bits = [k for k, language in enumerate(languages) if language is not None]  # column -> language index
        # Then the strings each language may be wrong on (one column per distinct set).
        distinct = list(dict.fromkeys(u for k, u in enumerate(undecided) if u is not None and k in self.bits))
        self.undecided_of = {k: distinct.index(u) for k, u in enumerate(undecided) if u is not None and k in self.bits}
        dfas += distinct
        # Breadth-first over tuples of states, a whole layer at a time, on byte
        # classes no DFA tells apart; -1 is dead.
        byte_class, _ = dfa.byte_classes(np.vstack([d.transitions for d in dfas]))
        first_byte = np.unique(byte_class, return_index=True)[1]
        tables = [np.vstack([d.transitions[:, first_byte], np.full((1, len(first_byte)), -1, dtype=np.int32)])
                  for d in dfas]
        weights = np.random.default_rng(0).integers(1, 2**62, size=len(dfas))
        ids = {tuple(0 for _ in dfas): 0}
        states = [np.zeros(len(dfas), dtype=np.int64)]
        rows: list = []
        layer = np.zeros((1, len(dfas)), dtype=np.int64)
        while len(layer):
            following = np.stack([table[layer[:, k]] for k, table in enumerate(tables)], axis=-1)  # (F, classes, k)
            following[following[:, :, 0] < 0] = -1  # only the universe's texts
            flat = following.reshape(-1, len(dfas)).astype(np.int64)
            with np.errstate(over="ignore"):
                _, first, inverse = np.unique(flat @ weights, return_index=True, return_inverse=True)
            if not np.array_equal(flat[first][inverse.ravel()], flat):  # a hash collision: compare whole rows
                _, first, inverse = np.unique(flat, axis=0, return_index=True, return_inverse=True)
            targets = np.full(len(first), -1, dtype=np.int32)
            fresh = []
            for u, column in enumerate(flat[first].tolist()):
                if column[0] >= 0:
                    key = tuple(column)
                    if key not in ids:
                        ids[key] = len(ids)
                        fresh.append(column)
                    targets[u] = ids[key]
            if len(ids) > dfa.MAX_STATES:
                raise ConstrainedError(f"the schema is too complex to compile: the scalar languages combined "
                                       f"exceed {dfa.MAX_STATES} automaton states")
            rows.append(targets[inverse.ravel()].reshape(len(layer), -1))
            layer = np.array(fresh, dtype=np.int64).reshape(-1, len(dfas))
            states.extend(layer)
        self.transitions = np.ascontiguousarray(np.vstack(rows)[:, byte_class])
        comps = np.array(states)
        member = np.zeros((len(states), len(dfas)), dtype=bool)
        for k, d in enumerate(dfas):
            live = comps[:, k] >= 0
            member[live, k] = d.accepting[comps[live, k]]
        self.accepting = member[:, 0]
        self.member = member[:, 1:1 + len(self.bits)]
        self._maybe = member[:, 1 + len(self.bits):]  # in the undecided columns
        self._regions: dict = {}

    @cached_property
    def rows(self) -> np.ndarray:
        """The ways the universe's texts belong to the languages: rows of bools, one per column."""
        return np.unique(self.member[self.accepting], axis=0)

    def region(self, wanted: tuple):
        """The minimal DFA of the texts that belong to the languages of the
        columns ``wanted`` marks and to no other, or None."""
        if wanted not in self._regions:
            accepting = self.accepting & (self.member == np.array(wanted, dtype=bool)).all(axis=1)
            for column, k in enumerate(self.bits):  # a text that must fail a language: not one it may be wrong on
                if not wanted[column] and k in self.undecided_of:
                    accepting &= ~self._maybe[:, self.undecided_of[k]]
            self._regions[wanted] = dfa.minimize(self.transitions, accepting) if accepting.any() else None
        return self._regions[wanted]


def _member(lengths: tuple, n: int) -> bool:
    return any(low <= n and (high is None or n <= high) for low, high in lengths)


def _shift(lengths: tuple, by: int) -> tuple:
    """The lengths minus ``by``, those that stay non-negative."""
    return tuple((max(low - by, 0), None if high is None else high - by)
                 for low, high in lengths if high is None or high >= by)


class _Unit:
    """What counted rules repeat: ``symbols`` standing for ``size`` code points
    (or one item), the closing symbol, and for strings ``tail(lengths)``: the
    terminal of the shorter rests in ``lengths``, or with ``last``, of the
    last lexeme, which then always comes before the close. Runs of ``shared``
    units may be rules of their own: only punctuation follows their end."""

    def __init__(self, symbols: tuple, size: int, close: str, tail=None, shared: bool = False, last: bool = False):
        self.symbols, self.size, self.close, self.tail, self.shared, self.last = symbols, size, close, tail, shared, last
        self.key = (symbols, size, close, last)


def _clip(lengths: tuple, top: int | None) -> tuple:
    """The lengths up to ``top`` (None: all)."""
    if top is None:
        return lengths
    return tuple((low, top if high is None else min(high, top)) for low, high in lengths if low <= top)


def _label(schemas, order, atoms: dict, context) -> frozenset:
    """The nodes of ``context`` a value satisfies, given whether it satisfies each
    node's own keywords (``atoms``); ``order`` lists nodes after those they combine."""
    can = {}
    for i in order:
        can[i] = _outcome(schemas.node(i), 2 if atoms[i] else 1, can)
    return frozenset(i for i in context if can[i] == 2)


def _outcome(node: Node, own: int, can: dict) -> int:
    """What ``node`` can be (bit 0: fail, bit 1: hold), given what its own
    keywords can be (``own``) and the nodes it combines (``can``), where those
    are independent of each other."""
    if not node.combining:
        return own
    terms = [own] + [can[j] for j in node.all_of]
    for g in node.any_of:  # at least one holds
        terms.append((2 if any(can[j] & 2 for j in g) else 0) | (1 if all(can[j] & 1 for j in g) else 0))
    for g in node.one_of:  # exactly one: as many hold as any number from those that must to those that can
        least, most = sum(can[j] == 2 for j in g), sum(can[j] >> 1 for j in g)
        terms.append((2 if least <= 1 <= most else 0) | (1 if not least == most == 1 else 0))
    terms += [(can[j] & 1) << 1 | can[j] >> 1 for j in node.not_]
    return (2 if all(t & 2 for t in terms) else 0) | (1 if any(t & 1 for t in terms) else 0)


def _key_chains(atoms: list, any_order: bool, order_states: int = ORDER_STATES, leave_out=frozenset()) -> list:
    """The orders declared keys must keep: each keyword set's properties in
    schema order (names only required have none), so that the keys of sets that
    combine may interleave. Neighbouring chains (in the order a reader meets
    their sets) are joined, the shortest pair first, while they give more
    than ``order_states`` sets of keys done (_joined, _sets_done), in the order
    of all of them merged (_merged_order); all are one chain where they
    disagree (a cycle). With ``any_order``, the chains are then cut
    into pieces that interleave (_cut): any order allows all that schema order
    does, and more as far as ``order_states`` allows. The names ``leave_out``
    are in no chain (free keys, _ObjectProduct.settle)."""
    names = list(dict.fromkeys(name for atom in atoms for name in [p[0] for p in atom.properties] + list(atom.required)
                               if name not in leave_out))
    chains = [list(chain) for chain in dict.fromkeys(tuple(dict.fromkeys(p[0] for p in atom.properties
                                                                         if p[0] not in leave_out))
                                                     for atom in atoms) if chain]
    ordered = {name for chain in chains for name in chain}
    chains += [[name] for name in names if name not in ordered]
    merged = _merged_order(chains)
    place = {name: k for k, name in enumerate(merged)}
    if any(place[a] > place[b] for chain in chains for a, b in zip(chain, chain[1:])):  # no order keeps them all
        chains = [merged]
    chains = [keys for _, keys in _joined([(None, chain) for chain in chains], order_states, place)]
    return _cut(chains, order_states, place) if any_order else chains


def _cut(chains: list, order_states: int, place: dict) -> list:
    """``chains`` cut into pieces, each keeping its chain's order, while they
    give at most ``order_states`` sets of keys done (_pieces). A key several
    chains hold is in the pieces of one of them only (in a piece of another
    too, it would wait for the keys before it there): the one that lists it
    earliest, or where the pieces would then give more than ``order_states``
    sets, the first holding it; where neither fits, the chains stay as they
    are."""
    earliest, first = {}, {}  # name -> (its place in a chain, that chain)
    for c, chain in enumerate(chains):
        for k, name in enumerate(chain):
            earliest[name] = min(earliest.get(name, (k, c)), (k, c))
            first.setdefault(name, (k, c))
    for owner in (earliest, first):
        pieces = _pieces([[name for name in chain if owner[name][1] == c] for c, chain in enumerate(chains)],
                         order_states, place)
        if _sets_done([(None, piece) for piece in pieces], order_states) <= order_states:
            return pieces
    return chains


def _pieces(owned: list, order_states: int, place: dict) -> list:
    """Each chain's keys in ``owned`` (no key in two) cut into pieces: every
    key a piece of its own, then neighbouring pieces of one chain joined, the
    shortest pair first, while they would give more than ``order_states`` sets
    of keys done. Where that leaves a chain whole, the most even cut of it in
    two that fits is made (the joins would take 15 keys back to one piece,
    where 11 and 4 fit). A chain of over ``order_states`` / 2 keys stays whole
    from the start: no cut of it fits."""
    pieces = _joined([(c, piece) for c, keys in enumerate(owned) if keys
                      for piece in ([[name] for name in keys] if 2 * len(keys) <= order_states else [keys])],
                     order_states, place)
    for c in range(len(owned)):
        own = [k for k, (owner, _) in enumerate(pieces) if owner == c]
        if len(own) != 1:  # cut already, or no keys of its own
            continue
        k = own[0]
        keys = pieces[k][1]
        others = _sets_done(pieces, order_states) // (len(keys) + 1)  # (exact: pieces share no key)
        fits = [a for a in range(1, len(keys) // 2 + 1) if (a + 1) * (len(keys) - a + 1) * others <= order_states]
        if fits:
            pieces[k:k + 1] = [(c, keys[:-fits[-1]]), (c, keys[-fits[-1]:])]
    return [piece for _, piece in pieces]


def _joined(parts: list, order_states: int, place: dict) -> list:
    """``parts``, (chain or None, keys) pairs, with neighbours joined, the
    shortest pair first, while they give more than ``order_states`` sets of
    keys done; parts of one chain (None: any parts). A joined part takes its
    keys in their ``place`` in one order that every part keeps (the chains
    merged, see _key_chains), so that a key several parts hold never waits in
    one of them for keys that another lists after it."""
    parts = list(parts)
    while _sets_done(parts, order_states) > order_states:
        joinable = [i for i in range(len(parts) - 1) if parts[i][0] == parts[i + 1][0]]
        if not joinable:
            break
        i = min(joinable, key=lambda i: len(parts[i][1]) + len(parts[i + 1][1]))
        parts[i:i + 2] = [(parts[i][0], sorted({*parts[i][1], *parts[i + 1][1]}, key=place.__getitem__))]
    return parts


def _sets_done(parts: list, cap: int) -> int:
    """How many sets of keys done ``parts``, (chain, keys in order) pairs,
    give, or some number over ``cap`` where they give more. A key comes done
    with the keys before it in every part holding it (_ObjectProduct.before),
    so parts that share no key give the product of their lengths plus one;
    where they share keys, the sets reached are counted."""
    names = [name for _, keys in parts for name in keys]
    if len(names) == len(set(names)):
        return math.prod(len(keys) + 1 for _, keys in parts)
    number = {name: k for k, name in enumerate(dict.fromkeys(names))}
    passes = [earlier | 1 << k for k, earlier in enumerate(_listed_before([keys for _, keys in parts], number))]
    seen, todo = {0}, [0]
    while todo and len(seen) <= cap:
        done = todo.pop()
        for k, with_it in enumerate(passes):
            if not done >> k & 1 and (after := done | with_it) not in seen:
                seen.add(after)
                todo.append(after)
    return len(seen)


def _listed_before(chains: list, number: dict) -> list:
    """Per key (numbered by ``number``), the keys (bits) that the chains
    holding it list before it: the keys that come done with it."""
    before = [0] * len(number)
    for chain in chains:
        listed = 0
        for name in chain:
            before[number[name]] |= listed
            listed |= 1 << number[name]
    return before


def _merged_order(orders: list) -> list:
    """The names of ``orders`` (lists of property names, in schema order) in one
    order that keeps each list's own order where the lists agree, so that output
    in the order of any one combined schema is allowed. Among names free to come
    next the earliest listed goes first; where the lists disagree (a cycle), the
    earliest listed of the rest breaks it."""
    first = {}
    after = {}  # name -> names a list puts right after it
    for names in orders:
        for k, name in enumerate(names):
            first.setdefault(name, len(first))
            after.setdefault(name, set())
            if k:
                after[names[k - 1]].add(name)
    waiting = {name: 0 for name in first}
    for name in first:
        for later in after[name]:
            waiting[later] += 1
    merged, left = [], sorted(first, key=first.get)
    while left:
        name = next((n for n in left if not waiting[n]), left[0])
        left.remove(name)
        merged.append(name)
        for later in after[name]:
            waiting[later] -= 1
    return merged


@lru_cache(maxsize=1024)
def _undeclared_names(keys: frozenset):
    """The JSON strings other than ``keys`` (None: none), a DFA shared by the
    objects that declare the same keys (in several contexts, or schemas)."""
    return _nonempty(dfa.minus_finite(_universe()[1], json_strings.enum_strings(sorted(keys))))


def _subsets(members: list):
    """Every subset of ``members`` (set numbers), as bits."""
    for mask in range(1 << len(members)):
        yield sum(1 << member for j, member in enumerate(members) if mask >> j & 1)


def _unmet(alive, label) -> int:
    """The sets (bits) whose requirement a value with ``label`` does not meet."""
    return sum(1 << k for k, r in alive if r == FALSE or (r != TRUE and r not in label))


class _Product:
    """The object (or array) keyword sets that apply to the values of one
    context, and the label their results give. A product state records which
    sets failed (bits of ``failed``); subclasses say how members (items) move it."""

    kind = ""

    def __init__(self, builder: _Builder, context: frozenset):
        self.builder = builder
        self.context = context
        schemas = builder.schemas
        self.order = builder.closure(context)
        atoms = {i: getattr(schemas.node(i), "obj" if self.kind == "object" else "arr") for i in self.order}
        self.constant = {i: atom is ANY for i, atom in atoms.items() if atom is ANY or atom is None}
        self.set_nodes = [i for i in self.order if i not in self.constant]
        self.sets = [atoms[i] for i in self.set_nodes]
        self.number = {i: k for k, i in enumerate(self.set_nodes)}
        if len(self.sets) > MAX_SETS + any(i in builder.caps for i in self.set_nodes):  # a cap is no schema
            self._refuse(len(self.sets), "")
        self._labels: dict = {}
        self._reachable: dict = {}
        self._prepared = None

    def label(self, results: int) -> frozenset:
        """The label of a value whose sets hold as the bits of ``results`` say."""
        hit = self._labels.get(results)
        if hit is None:
            atoms = dict(self.constant)
            for k, i in enumerate(self.set_nodes):
                atoms[i] = bool(results >> k & 1)
            hit = self._labels[results] = _label(self.builder.schemas, self.order, atoms, self.context)
        return hit

    def possible_labels(self, failed: int) -> set:
        """The labels a value can still get once the sets in ``failed`` failed:
        for each way the sets still open that are shared hold (see _reach),
        what each node of the context can still be, read bottom-up (the other
        sets each reach a node through one child only, so its children's
        results are independent)."""
        labels = self._reachable.get(failed)
        if labels is None:
            support, shared_sets = self._reach
            shared = [k for k in range(len(self.sets)) if shared_sets >> k & 1 and not failed >> k & 1]
            if len(shared) > MAX_SHARED:
                self._refuse(len(shared), f" through schemas they share (at most {MAX_SHARED})")
            self.builder.spend_label_work(len(self.order) << len(shared))
            # Only the nodes that those sets reach change from one way to the next.
            open_shared = sum(1 << k for k in shared)
            varying = [i for i in self.order if support[i] & open_shared]
            base = self._outcomes(failed, 0, self.order, {})
            labels = set()
            for results in _subsets(shared):
                can = self._outcomes(failed, results, varying, dict(base)) if results else base
                options = [[(i, False)] * (can[i] & 1) + [(i, True)] * (can[i] >> 1) for i in sorted(self.context)]
                if math.prod(map(len, options)) > 1 << MAX_SHARED:
                    self._refuse(len(self.sets), f" and give over {1 << MAX_SHARED} outcomes")
                labels |= {frozenset(i for i, holds in pick if holds) for pick in itertools.product(*options)}
            self._reachable[failed] = labels
        return labels

    def _refuse(self, count: int, how: str):
        raise ConstrainedError(
            f"the schema is too complex to compile: {count} {self.kind} schemas combine at "
            f"{where(self.builder.schemas.node(self.set_nodes[0]).pointer)}{how} (allOf, anyOf, oneOf, not, "
            "if/then/else)")

    def _outcomes(self, failed: int, results: int, nodes: list, can: dict) -> dict:
        """``can`` with, per node of ``nodes`` (in ``order``), what it can be
        (bit 0: fail, bit 1: hold) once the sets in ``failed`` failed and the
        shared ones hold as ``results`` says (the other sets may do either)."""
        known = failed | self._reach[1]
        for i in nodes:
            k = self.number.get(i)
            if k is None:
                own = 2 if self.constant[i] else 1
            elif known >> k & 1:
                own = 1 + (results >> k & 1)  # (a failed set has no bit in results)
            else:
                own = 3
            can[i] = _outcome(self.builder.schemas.node(i), own, can)
        return can

    @cached_property
    def _reach(self) -> tuple:
        """(per node, the sets (bits) whose result reaches it; the sets whose
        result reaches some node through two of its children (a schema two
        branches $ref, say), or two nodes of the context: possible_labels tries
        both results of each)."""
        support, shared = {}, 0
        for i in self.order:
            seen = 1 << self.number[i] if i in self.number else 0
            for j in self.builder.schemas.node(i).combines:
                shared |= seen & support[j]
                seen |= support[j]
            support[i] = seen
        seen = 0
        for i in self.context:
            shared |= seen & support[i]
            seen |= support[i]
        return support, shared

    def can_reach(self, failed: int, label: frozenset) -> bool:
        return label in self.possible_labels(failed)

    def final_label(self, state) -> frozenset:
        failed = state[1]
        return self.label(sum(1 << k for k in range(len(self.sets)) if not failed >> k & 1 and self.complete(k, state)))

    def prepare(self):
        """Work out the transitions' ingredients (once); returns the start state."""
        if self._prepared is None:
            self._prepared = self._prepare()
        return self._prepared


class _ObjectProduct(_Product):
    """State: (the declared keys done, as bits; failed sets; members so far;
    regions of undeclared names used, see repeat_must_fail; free keys so far,
    see settle)."""

    kind = "object"

    def _prepare(self):
        builder = self.builder
        # Each set's declared names in schema order, sets in the order a reader meets them.
        rank = {i: k for k, i in enumerate(builder.closure(self.context, preorder=True))}
        self._atoms = [atom for _, atom in sorted(zip(self.set_nodes, self.sets), key=lambda p: rank[p[0]])]
        chains = _key_chains(self._atoms, builder.any_order, builder.order_states)
        builder.interleaved |= len(chains) > 1
        self.keys = keys = _merged_order(chains)
        self.position = {name: k for k, name in enumerate(keys)}
        self._set_chains(chains)
        self.free, self.free_bits, self.groups = None, 0, []  # see settle
        self._harmful: dict = {}  # label -> the sets whose failure it allows
        self.key_languages = [scalar_literal(k) for k in keys]
        self.requires = [sum(1 << k for k, atom in enumerate(self.sets) if name in atom.required) for name in keys]
        self.required_keys = [sum(1 << j for j, name in enumerate(keys) if name in atom.required) for atom in self.sets]
        self.count_cap = max((max(a.min_properties, a.max_properties + 1 if a.max_properties is not None else 0)
                              for a in self.sets), default=0)
        if self.count_cap > MAX_COUNT:
            raise ConstrainedError(f"minProperties/maxProperties of {self.count_cap - 1} at "
                                   f"{where(builder.schemas.node(self.set_nodes[0]).pointer)} are too large to "
                                   f"enforce exactly (at most {MAX_COUNT})")
        strings = _universe()[1]
        # None: any name; an empty language (propertyNames: false) allows none.
        self.names = [None if a.names == TRUE else _and(builder.scalar(a.names), strings) or dfa.empty()
                      for a in self.sets]
        self.key_requirements = [
            self._requirements(lambda language, text=json.dumps(k, ensure_ascii=False).encode(): language.matches(text),
                               name=k)
            for k in keys]
        splitters = []  # the languages that tell undeclared keys apart
        for atom, names in zip(self.sets, self.names):
            splitters += [language for _, language, _ in atom.patterns] + ([names] if names is not None else [])
        # Undeclared keys are any string, the declared names shadowing it (see _Builder.key_terminal),
        # where patternProperties and propertyNames do not split them.
        self.shadowed = bool(self.keys) and not splitters
        self.cells = [_Cell(self, strings, frozenset())] if self.shadowed else self._cells(strings, splitters)
        # A repeated undeclared name would make a count of members wrong: where the count matters, the
        # matcher keeps those names distinct (json_unique.py), if each can always end another way.
        self.distinct_keys = (any(a.min_properties > 1 for a in self.sets) and bool(self.cells)
                              and all(dfa.endless(cell.language) for cell in self.cells))
        self._misleading: dict = {}
        self.declaring = [sum(1 << j for j, atom in enumerate(self.sets)
                              if name in atom.required or any(name == p[0] for p in atom.properties)) for name in keys]
        self.judging = [sum(1 << j for j, r in enumerate(requirements) if r not in (TRUE, FALSE))
                        for requirements in self.key_requirements]
        self.counting = sum(1 << j for j, a in enumerate(self.sets) if a.max_properties is not None)
        self.late_keys = [k for k, requirements in enumerate(self.key_requirements)
                          if any(not self.declaring[k] >> j & 1 and r != FALSE for j, r in enumerate(requirements))
                          ] if builder.late_keys and len(self.sets) <= LATE_KEY_SETS else []
        unfree = {name for context, name in builder.unfree if context == self.context}
        self.plain = [k for k, name in enumerate(keys) if builder.any_order and _plain_name(name)
                      and FALSE not in self.key_requirements[k] and name not in unfree]
        # A region of undeclared keys where any further member may go, whatever came before: then a free
        # key (settle) is never the only way on, and free keys need no count.
        self.open = any(dfa.endless(cell.language) and all(r == TRUE for r in cell.requirements)
                        and (not builder.strict or cell.allowed_strict) and not self.repeatable(c)
                        for c, cell in enumerate(self.cells))
        return (0, 0, 0, 0, ())

    # With property_order="any", a declared key need not have a bit in ``done``:
    # it is free, any number of times as far as the grammar knows, and the
    # matcher keeps the names of an object distinct (json_unique.py). That is
    # exact where a derivation that repeats a free member can always do
    # without the repeat, or give the member another name:
    # * a free key asks nothing of the sets whose failure the label allows
    #   (a second value could fail one where the first did not), and none of
    #   those counts members (a repeat could pass its maxProperties); the
    #   other sets must hold, so every free member moves the state alike:
    #   members + 1, no set failed, one more of its group;
    # * the state counts the members of each group of free keys that the same
    #   sets require, up to the group's size, so a group complete is a set's
    #   required keys all given, and a group not complete has a name left; its
    #   keys all have a value (schema_grammar checks, else builds again with
    #   the key tracked), so that name may come wherever a repeat could;
    # * the keys no set requires need no count in an ``open`` object: there
    #   any member may come instead.

    def settle(self, label) -> tuple:
        """The state at "{" of the rules for ``label``. The first label fixes the
        free keys (``free``, as bits ``free_bits``, by the sets requiring them
        ``groups``: (positions, those sets as bits, whether the state counts
        them: all but the keys no set requires in an ``open`` object)) for
        every label, so that the states move alike under each (the labels
        asked for in earlier builds count too, builder.known_labels); a later
        label that would free fewer makes the build stale (builder.stale)."""
        start = self.prepare()
        builder = self.builder
        builder.asked.setdefault(self.context, set()).add(label)
        if self.free is None:
            labels = builder.known_labels.get(self.context, set())
            labels = (self.possible_labels(0) if labels is None else labels) | {label}
            self.free = tuple(p for p in self.plain if all(self._frees(p, other) for other in labels))
            self.free_bits = sum(1 << p for p in self.free)
            by_sets: dict = {}
            for p in self.free:
                by_sets.setdefault(self.requires[p], []).append(p)
            self.groups = [(tuple(positions), requiring, bool(requiring) or not self.open)
                           for requiring, positions in by_sets.items()]
            if self.free:
                builder.interleaved = True
                self._set_chains(_key_chains(self._atoms, builder.any_order, builder.order_states,
                                             leave_out=frozenset(self.keys[p] for p in self.free)))
        elif not all(self._frees(p, label) for p in self.free):
            builder.stale.add(self.context)
        return (*start[:4], (0,) * len(self.groups))

    def _frees(self, position: int, label) -> bool:
        """Whether a declared key may be free in an object built for ``label``."""
        harmful = self._harmful.get(label)
        if harmful is None:
            harmful = self._harmful[label] = [k for k in range(len(self.sets)) if self.can_reach(1 << k, label)]
        return all(self.sets[k].max_properties is None and self.key_requirements[position][k] == TRUE
                   for k in harmful)

    def _set_chains(self, chains: list) -> None:
        """The declared keys' ``chains`` as positions, the first chain holding
        each key (``owner``), and per key the keys its chains list before it."""
        self.chains = [[self.position[name] for name in chain] for chain in chains]
        self.owner = {}
        for c, chain in enumerate(self.chains):
            for k in chain:
                self.owner.setdefault(k, c)
        self.before = _listed_before(chains, self.position)

    def _requirements(self, member_of, name=None) -> list:
        """Per set, the node a member's value must satisfy (FALSE: the key is not
        allowed), given ``member_of(key language)`` for the member's key."""
        out = []
        for atom, names in zip(self.sets, self.names):
            if names is not None and not member_of(names):
                out.append(FALSE)
                continue
            declared = dict(atom.properties).get(name) if name is not None else None
            matched = [child for _, language, child in atom.patterns if member_of(language)]
            if declared is None and not matched:
                out.append(atom.additional)
            else:
                out.append(self.builder.schemas.conjunction(([declared] if declared is not None else []) + matched))
        return out

    def _cells(self, strings, splitters: list) -> list:
        """The undeclared keys other than the declared names, split by the
        ``splitters`` into regions where every set asks the same."""
        rest = _undeclared_names(frozenset(self.keys)) if self.keys else strings
        cells = [(rest, frozenset())] if rest is not None else []
        for splitter in splitters:
            refined = []
            for language, inside in cells:
                both = _nonempty(dfa.intersect(language, splitter))
                if both is not None:
                    refined.append((both, inside | {id(splitter)}))
                    language = _nonempty(dfa.difference(language, splitter))
                if language is not None:
                    refined.append((language, inside))
            cells = refined
            if len(cells) > 64:
                raise ConstrainedError("the schema is too complex to compile: patternProperties and propertyNames "
                                       "split the property names into too many regions")
        return [_Cell(self, language, inside) for language, inside in cells]

    def count_failures(self, count: int) -> int:
        return sum(1 << k for k, a in enumerate(self.sets) if a.max_properties is not None and count > a.max_properties)

    def complete(self, k: int, state) -> bool:
        done, _, count, _, counts = state
        return (not self.required_keys[k] & ~done & ~self.free_bits and count >= self.sets[k].min_properties
                and all(n == len(positions) for (positions, requiring, _), n in zip(self.groups, counts)
                        if requiring >> k & 1))

    # Two undeclared members of one region may have the same name. A JSON parser
    # keeps the last value, and the object then has one member fewer than were
    # counted: a set failed by an earlier value, or failed or passed on the count
    # alone, may hold otherwise. State bit ``used`` marks a region that has a
    # member already where that could matter; a second member there is allowed
    # only where it cannot change the label. The schemas its value must then
    # fail depend on the label, which the parser learns only after the value:
    # so the value's context holds the requirements of every set failed so far
    # whatever the label (two contexts for one value would be a reduce/reduce
    # conflict), and each label keeps the value's labels that fail them.
    # Where a set counts members toward a minProperties over 1, that would
    # allow one undeclared member per region; the names are kept distinct
    # there instead (``distinct_keys``), and none of this applies.

    def repeatable(self, cell: int) -> bool:
        """Whether a repeated name in ``cell`` could ever change a label."""
        return not self.distinct_keys and any(
            a.min_properties > 1 or r not in (TRUE, FALSE) or a.max_properties is not None
            for r, a in zip(self.cells[cell].requirements, self.sets))

    def repeat_matters(self, cell: int, failed: int, label: frozenset) -> bool:
        """Whether a later member in ``cell`` could change the label (see above)."""
        if self.distinct_keys:
            return False
        if any(a.min_properties > 1 for a in self.sets):
            return True
        requirements = self.cells[cell].requirements
        return any((r not in (TRUE, FALSE) or a.max_properties is not None) and self.can_reach(failed | 1 << k, label)
                   for k, (r, a) in enumerate(zip(requirements, self.sets)))

    def repeat_must_fail(self, state, cell: int, label: frozenset):
        """For another member in ``cell``: None where it could give ``label``
        only because its name repeats one before; else the schemas its value
        must not satisfy (those on which sets failed, maybe under that name)."""
        _, failed, count, used, _ = state
        if not used >> cell & 1:
            return ()
        requirements = self.cells[cell].requirements
        must_fail = []
        for k, atom in enumerate(self.sets):
            if failed >> k & 1:
                if requirements[k] not in (TRUE, FALSE) and self._misleads(failed, 1 << k, label):
                    must_fail.append(requirements[k])
            elif (count < atom.min_properties and self._misleads(failed, 1 << k, label, passed=True)
                  or atom.max_properties is not None and self._misleads(failed, 1 << k, label)):
                return None
        return tuple(must_fail)

    # A declared key may come after its turn, once it is done: passed over (the
    # instance is in the order of a set that leaves it undeclared), or given
    # already (its name repeats). Tracking which would cost a bit per key, so
    # such a member fails every set whose result it may make wrong: those that
    # declare or require the key, count members, or already failed, maybe on an
    # earlier value under that name. It is allowed only where none of those
    # wrong failures can change the label: where another set decides it.

    def late_failures(self, state, position: int, label: frozenset) -> int | None:
        """The failed sets after a late member with key ``position`` (see above),
        or None where it must not come late."""
        done, failed, count = state[:3]
        if not done >> position & 1:
            return None
        wrong = (self.declaring[position] | self.counting | failed & self.judging[position]
                 | sum(1 << k for k, a in enumerate(self.sets) if a.min_properties > count))
        after = failed | wrong
        if not self.can_reach(after, label) or self._misleads(after, wrong, label):
            return None
        return after

    def _misleads(self, failed: int, wrong: int, label: frozenset, passed: bool = False) -> bool:
        """Whether ``label``, reached with the sets ``failed`` failed, could be
        wrong because some of the sets ``wrong`` hold after all though counted
        failed (with ``passed``: fail after all though counted holding)."""
        key = (failed, wrong, label, passed)
        hit = self._misleading.get(key)
        if hit is None:
            free = [k for k in range(len(self.sets)) if not (failed | wrong) >> k & 1]
            if len(free) + wrong.bit_count() > MAX_SHARED:
                hit = True  # too many ways to try: it may (so the callers refuse the member)
            else:
                extras = list(_subsets([k for k in range(len(self.sets)) if wrong >> k & 1]))[1:]  # not the empty one
                hit = any(self.label(counted) == label != self.label(real)
                          for results in _subsets(free) for extra in extras
                          for counted, real in [(results | extra, results) if passed else (results, results | extra)])
            self._misleading[key] = hit
        return hit


def _plain_name(name: str) -> bool:
    """Whether a property name has one spelling, its characters as they are (so
    the matcher can find the tokens that spell a prefix of it)."""
    return name.isascii() and name.isprintable() and '"' not in name and "\\" not in name


class _Cell:
    """A region of undeclared keys: its DFA, what each set asks of the value, and
    whether strict_properties lets it through (every set that declares
    properties allows more, explicitly or by a pattern)."""

    def __init__(self, product: _ObjectProduct, language, inside: frozenset):
        self.language = language
        self.requirements = product._requirements(lambda splitter: id(splitter) in inside)
        self.allowed_strict = all(
            atom.explicit_additional and atom.additional != FALSE
            or any(id(pattern) in inside for _, pattern, _ in atom.patterns)
            or not (atom.properties or atom.patterns)
            for atom in product.sets)


class _ArrayProduct(_Product):
    """State: (position, failed sets, contains matches per set, distinct values
    seen per uniqueItems set)."""

    kind = "array"

    def _prepare(self):
        self.distinct_set = None  # the set whose items the matcher keeps distinct (_distinct_values)
        self.distinct_strings = None  # how many strings those items may be, where they are finitely many strings
        self.distinct_objects = False  # whether those items may be objects
        self.values = [self._distinct_values(k, a) for k, a in enumerate(self.sets)]
        self.count_cap = max((self.item_count(k) for k in range(len(self.sets))), default=0)
        at = where(self.builder.schemas.node(self.set_nodes[0]).pointer) if self.sets else ""
        self.contains_caps = [
            max(a.min_contains, a.max_contains + 1 if a.max_contains is not None else 0) if a.contains is not None
            else 0 for a in self.sets]
        if max(self.contains_caps, default=0) > MAX_COUNT:
            raise ConstrainedError(f"minContains/maxContains at {at} are too large to enforce exactly "
                                   f"(at most {MAX_COUNT})")
        return (0, 0, tuple(0 for _ in self.sets), tuple(0 for _ in self.sets))

    def item_count(self, k: int) -> int:
        """Set ``k``'s items are counted up to this position (beyond, they are alike)."""
        atom, most = self.sets[k], self.most_items(k)
        return max(len(atom.prefix), atom.min_items, most + 1 if most is not None else 0)

    def most_items(self, k: int) -> int | None:
        """The most items set ``k`` allows: maxItems, or with uniqueItems the
        number of values the items can take."""
        most = self.sets[k].max_items
        distinct = len(self.values[k]) or (self.distinct_strings if k == self.distinct_set else None)
        if distinct is not None:
            most = distinct if most is None else min(most, distinct)
        return most

    def item_requirement(self, k: int, position: int) -> int:
        atom, most = self.sets[k], self.most_items(k)
        if most is not None and position >= most:
            return FALSE
        return atom.prefix[position] if position < len(atom.prefix) else atom.items

    def complete(self, k: int, state) -> bool:
        position, _, counts, _ = state
        atom = self.sets[k]
        return position >= atom.min_items and (atom.contains is None or counts[k] >= atom.min_contains)

    def _distinct_values(self, k: int, atom: ArrayAtom) -> tuple:
        """For uniqueItems: one constant node per value the items can take, when
        they can only take a few scalar values (else an error); () otherwise."""
        if not atom.unique or (atom.max_items is not None and atom.max_items <= 1):
            return ()
        builder, schemas = self.builder, self.builder.schemas
        positions = list(atom.prefix)
        if atom.max_items is None or atom.max_items > len(atom.prefix):
            positions.append(atom.items)
        values: dict = {}
        for node in positions:
            found = builder.finite_values(node)
            if found is None:
                kinds = self._distinct_items(atom)
                if kinds is not None:
                    self.distinct_set = k  # enforced by the matcher, see _Builder.unique_value
                    strings, self.distinct_objects = kinds
                    self.distinct_strings = None if self.distinct_objects else strings_in(strings)
                    return ()
                schemas.refuse("uniqueItems", atom.pointer, "it is only enforced for items that take at most "
                                f"{MAX_UNIQUE} scalar values (enum, const, boolean), or that are strings or objects "
                                "(of a schema without prefixItems or contains, combined with no other array "
                                "schema)")
                return ()
            values.update(found)
        if len(values) > MAX_UNIQUE:
            schemas.refuse("uniqueItems", atom.pointer, f"the items take {len(values)} values, and distinct values "
                            f"are only tracked for up to {MAX_UNIQUE}")
            return ()
        return tuple(schemas.constant(v, atom.pointer) for v in values.values())

    def _distinct_items(self, atom: ArrayAtom):
        """Where ``atom``'s items are all strings or objects that the matcher can
        keep distinct (no other array schema applies to the value, and the items
        have one schema, with no prefixItems, that allows no other kind of
        value): (the language of their strings or None, whether they may be
        objects); else None."""
        items, builder = atom.items, self.builder
        schemas = [i for i in self.set_nodes if i not in builder.caps]
        if len(schemas) != 1 or atom.prefix or atom.contains is not None or items in (TRUE, FALSE):
            return None
        language = builder.scalar(items)
        if language is ANY or language is not None and not dfa.is_empty(dfa.difference(language, _universe()[1])):
            return None
        context = frozenset({items})
        if context in builder._product(context, "array").possible_labels(0):
            return None
        objects = context in builder._product(context, "object").possible_labels(0)
        return (language, objects) if language is not None or objects else None
