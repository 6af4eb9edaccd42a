"""Lark grammars as constraints: ``grammar(text_or_path, start="start")``.

Lark reads the grammar and builds its LALR(1) parse table; this module drives
that table itself, on terminal names only, and lexes byte by byte the way lark's
contextual lexer does:

* In a parser state, the *acceptable* terminals A are those with an action in
  the state's row of the parse table, plus the ``%ignore`` terminals (exactly
  the terminals lark's contextual lexer tries there).
* A lexeme grows greedily: the next byte extends it if some terminal of A can
  still complete after it. Otherwise the lexeme so far must be complete for a
  terminal of A, which is emitted (ties: higher priority first, then a string
  literal before a regex, which is what lark's "unless" rule does for keywords
  that a NAME-like regex also matches, then lark's own terminal order) and the
  byte starts the next lexeme, in the parser state after that terminal (ignored
  terminals leave the parser alone). No backtracking: a byte that fits nowhere
  is not allowed.
* A terminal is only *valid* if the parser really shifts it after its
  reductions (LALR may reduce before it notices an error); lexemes may only
  grow towards valid terminals, so there are no dead ends.
* EOS is allowed when the lexeme is empty or complete (it is emitted first) and
  the parser then accepts the end of input.
* Whitespace is bounded: an ``%ignore`` terminal matches at most
  ``max_ignored`` bytes, and two ignored lexemes never follow each other, so a
  generation cannot loop on whitespace forever.

Where lark's own lexer would split text differently from this longest match
(it takes the first terminal in its order that matches any prefix), the
grammar is refused at compile time with an example.

Grammars may also bring terminals as byte DFAs (``terminals=``, for
``%declare``'d names). Lark cannot lex those, so only the rules above apply.
A program that generates its grammar (json_schema.py) hands over rules and
DFAs directly (``grammar_from_rules``): lalr_tables.py then builds the parse
table as lark would, without reading grammar text.

The pieces: lexer.py holds the terminals' automaton, lalr.py drives the
parse table, grammar_index.py computes token masks over a vocabulary.
"""

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .constraint import Compiled
from .dfa import DFA, endless, from_regex, gc_paused, is_subset
from .errors import ConstrainedError
from .grammar_index import GrammarIndex
from .lalr import END, ParseTable, SuffixMemo
from .lalr_tables import derived, lalr_table
from .lexer import Lexer, bounded
from .matcher import TokenHistory
from .vocab import Vocabulary

MAX_IGNORED = 48  # bytes an %ignore'd lexeme (whitespace, a comment) may span
_CONTEXT_CACHE = 100_000  # parser stacks kept per grammar
_WALKS_KEPT = 20_000  # tokens read inside one lexeme kept per grammar (_Language.step)


def grammar(
    text_or_path, start: str = "start", max_ignored: int = MAX_IGNORED, terminals: dict | None = None,
    strict: bool = False, glued=(),
) -> "Grammar":
    """Output that lark parses with the grammar ``text_or_path`` (grammar text, or
    the path of a ``.lark`` file), from the rule ``start``.

    The grammar must be LALR(1) (lark's ``parser="lalr"``); shift/reduce conflicts
    are resolved as shifts, as lark does, or refused with ``strict=True``.
    ``%ignore``'d lexemes span at most ``max_ignored`` bytes, one between two
    terminals. ``terminals`` maps names the grammar ``%declare``s to byte DFAs
    (``constrained.dfa.DFA``) that define them; such a grammar is lexed by the
    rules above only (lark itself cannot lex it). After a terminal named in
    ``glued`` no ``%ignore``'d lexeme may come (the pieces of one JSON string).
    Each terminal's token table is built with the grammar's index for a
    vocabulary (a written grammar has few terminals, and most get used), so
    that the first masks of a generation do not wait for them."""
    text, import_paths, source = _read(text_or_path)
    _check_max_ignored(max_ignored)
    terminals = dict(terminals or {})
    for name, dfa in terminals.items():
        if not isinstance(dfa, DFA):
            raise ConstrainedError(f"terminal {name!r} must be given as a constrained.dfa.DFA, got {type(dfa).__name__}")
    lk = _lark(text, start, import_paths, strict)
    analysis = _Analysis(lk.terminals, set(lk.ignore_tokens), lk.rules, lk.parser.parser.parser.parse_table)
    unknown = sorted(set(terminals) - _declared(analysis))
    if unknown:
        raise ConstrainedError(f"terminals {unknown} are given as DFAs but the grammar does not %declare and use them")
    glued = frozenset(glued)
    if not glued <= set(terminals) | {t.name for t in lk.terminals}:
        raise ConstrainedError(f"glued terminals {sorted(glued - set(terminals))} are not terminals of the grammar")
    language = _compile(analysis, start, max_ignored, terminals, glued)
    return Grammar(lk, language, f"grammar from {source} (start={start!r})", lark_lexes=not (terminals or glued))


def grammar_from_rules(rules: dict, start: str, terminals: dict, ignored: dict, glued=(),
                       max_ignored: int = MAX_IGNORED, description: str = "rules", shadows=None) -> "Grammar":
    """A grammar built by a program rather than written: ``rules`` maps each rule
    name to its alternatives (tuples of rule names and names of ``terminals``,
    byte DFAs), ``ignored`` maps the %ignore'd terminals' names to theirs. Lark
    provides the rule objects, and lalr_tables.py builds the LALR(1) parse table
    as lark would (shift/reduce conflicts are refused): lark's own analysis,
    and reading grammar text, would cost more for a generated grammar.

    ``shadows`` maps a terminal to terminals that shadow it: wherever it is
    lexed they are too, and a lexeme that one of them matches is emitted as
    that one (they outrank every terminal), which the parser may then reject.
    So a terminal need not cut out the strings of others that must never pass
    as it: an object's undeclared keys are any string, shadowed by the names
    it declares (json_schema_rules). So that a lexeme can always finish, the
    shadows must be finitely many strings of the terminal they shadow, and
    each unfinished lexeme of that terminal must have infinitely many endings
    (one the shadows leave); these are checked."""
    from lark.grammar import NonTerminal, Rule, Terminal

    _check_max_ignored(max_ignored)
    symbol = {name: NonTerminal(name) for name in rules}
    symbol.update((name, Terminal(name)) for name in list(terminals) + list(ignored))
    unknown = sorted({s for alternatives in rules.values() for alternative in alternatives for s in alternative}
                     - symbol.keys())
    if unknown:
        raise ConstrainedError(f"rules use {unknown}, which are neither rules nor terminals")
    shadows = {name: frozenset(by) for name, by in (shadows or {}).items()}
    unknown = sorted(({*shadows} | {t for by in shadows.values() for t in by}) - terminals.keys())
    if unknown:
        raise ConstrainedError(f"shadows name {unknown}, which are not terminals")
    _check_shadows(shadows, terminals)
    with gc_paused():
        lark_rules = [Rule(symbol[name], [symbol[s] for s in alternative], order=k)
                      for name, alternatives in rules.items()
                      for k, alternative in enumerate(dict.fromkeys(alternatives))]
        table = lalr_table(lark_rules, start)
    analysis = _Analysis([], set(ignored), lark_rules, table)
    language = _compile(analysis, start, max_ignored, {**terminals, **ignored}, frozenset(glued), shadows)
    return Grammar(None, language, description, lark_lexes=False)


def _check_max_ignored(max_ignored) -> None:
    if not isinstance(max_ignored, int) or max_ignored < 1:
        raise ConstrainedError(f"max_ignored is a positive number of bytes, got {max_ignored!r}")


class _Analysis(NamedTuple):
    """What this module takes from lark: the terminals defined by a pattern
    (lark TerminalDefs), the names of the %ignore'd ones, the rules and the
    LALR(1) parse table."""

    terminals: list
    ignored: set
    rules: list
    table: object


def _declared(analysis: _Analysis) -> set:
    """Terminal names the grammar uses without a pattern (%declare)."""
    defined = {t.name for t in analysis.terminals}
    rules = {rule.origin.name for rule in analysis.rules}
    return {name for row in analysis.table.states.values() for name in row if name not in rules and name not in defined}


def _read(text_or_path):
    if isinstance(text_or_path, Path) or (
        isinstance(text_or_path, str) and "\n" not in text_or_path and text_or_path.endswith(".lark")
    ):
        path = Path(text_or_path)
        if not path.is_file():
            raise ConstrainedError(f"grammar file {str(path)!r} does not exist")
        return path.read_text(), [str(path.parent)], str(path)
    if not isinstance(text_or_path, str):
        raise ConstrainedError(f"a grammar is lark grammar text (str) or a path, got {type(text_or_path).__name__}")
    return text_or_path, [], "grammar text"


def _lark(text: str, start: str, import_paths, strict: bool = False):
    import lark

    # The parse table does not depend on lark's lexer; the basic one is the cheapest to build.
    # (lark's own strict mode also wants interegular for its lexer: conflicts are read from its log.)
    with _lark_errors(start), _shift_reduce_conflicts(refuse=strict):
        lk = lark.Lark(text, parser="lalr", lexer="basic", start=start, import_paths=import_paths)
    return lk


@contextmanager
def _lark_errors(start: str):
    """Lark's exceptions inside the block, as ConstrainedErrors a user can act on."""
    from lark.exceptions import GrammarError, LarkError

    if not isinstance(start, str):
        raise ConstrainedError(f"start is the name of a rule, got {start!r}")
    try:
        yield
    except GrammarError as e:
        message = str(e).strip()
        if "Reduce/Reduce collision" in message:
            raise ConstrainedError(
                f"the grammar is not LALR(1): a reduce/reduce conflict. {message}\n"
                "Both rules can end at the same place with the same next terminal: merge them or make them differ"
            ) from None
        if "Using an undefined rule" in message and start in message:
            raise ConstrainedError(f"invalid grammar: the start rule {start!r} is not defined (pass start=)") from None
        raise ConstrainedError(f"invalid grammar: {message}") from None
    except FileNotFoundError as e:
        raise ConstrainedError(
            f"invalid grammar: an %import names a grammar that does not exist ({e.filename}). "
            "lark's own terminals are imported as `%import common.NAME`; other grammars are looked up "
            "next to the grammar file"
        ) from None
    except LarkError as e:
        raise ConstrainedError(f"invalid grammar: {str(e).strip()}") from None
    except (ValueError, TypeError, KeyError, AttributeError, AssertionError) as e:  # lark's own checks on odd input
        raise ConstrainedError(f"invalid grammar: {type(e).__name__}: {e}") from None
    except RecursionError:
        raise ConstrainedError(
            "the grammar is too deeply nested for lark (Python's recursion limit): nest fewer groups in one "
            "another, or shorten its longest chains of rules"
        ) from None


def _check_shadows(shadows: dict, terminals: dict) -> None:
    """Refuse shadows that could leave a lexeme unable to finish (see
    grammar_from_rules). Each shadowed language and each shadow is checked
    once, however many terminals share them."""
    for name in {terminals[name].digest: name for name in shadows}.values():
        if not endless(terminals[name]):
            raise ConstrainedError(f"terminal {name} is shadowed, so every unfinished lexeme of it must have "
                                   "infinitely many endings; some have finitely many")
    pairs = {(terminals[name].digest, terminals[t].digest): (name, t) for name, by in shadows.items() for t in by}
    for name, t in pairs.values():
        if not terminals[t].finite:
            raise ConstrainedError(f"terminal {t} shadows {name}, so it must match finitely many strings; "
                                   "it matches infinitely many")
        if not is_subset(terminals[t], terminals[name]):
            raise ConstrainedError(f"terminal {t} shadows {name}, so each of its strings must be one of {name}'s; "
                                   "some are not")


@contextmanager
def _shift_reduce_conflicts(refuse: bool):
    """Lark resolves shift/reduce conflicts as shifts and only logs them: with
    ``refuse``, one logged inside the block is an error after it."""
    from lark import logger

    found: list = []

    class Collect(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if message.startswith("Shift/Reduce conflict for terminal"):
                found.append(message.split("terminal ", 1)[1].split(":")[0])
            elif found and message.startswith(" * "):
                found[-1] += f" between shifting it and reducing {message[3:]}"

    handlers, level = logger.handlers, logger.level
    logger.handlers = [Collect()]
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.handlers = handlers
        logger.setLevel(level)
    if refuse and found:
        raise ConstrainedError(f"the grammar is not LALR(1) (strict mode): a shift/reduce conflict for {found[0]}")


def _compile(analysis: _Analysis, start: str, max_ignored: int, terminals: dict, glued=frozenset(),
             shadows=None) -> "_Language":
    """The lexer and parse table of an analysed grammar (``shadows``: see grammar_from_rules)."""
    defs = {t.name: t for t in analysis.terminals}
    ignored_names = analysis.ignored
    rules = {rule.origin.name for rule in analysis.rules}
    table = analysis.table
    used = set(ignored_names)
    for row in table.states.values():
        used.update(name for name in row if name not in rules and name != "$END")
    shadows = {name: by for name, by in (shadows or {}).items() if name in used}
    used.update(*shadows.values())
    missing = sorted(used - defs.keys() - terminals.keys())
    if missing:
        raise ConstrainedError(
            f"terminals {missing} have no pattern (%declare'd for a postlexer such as an Indenter), "
            "which grammar() does not support: define them with a string or a regex, or pass their DFAs "
            "as terminals="
        )
    empty = sorted(name for name, dfa in terminals.items() if name in used and dfa.accepting[dfa.start])
    if empty:
        raise ConstrainedError(
            f"terminals {empty} match the empty string, and a lexeme is at least one byte: "
            "give them DFAs without the empty string and make them optional in the rules instead"
        )
    with gc_paused():  # a list per rule used, none of them garbage
        _check_productive(analysis.rules, start)

    def order(name):  # lark's lexer order: priority, longest possible match, pattern length, name
        if name in terminals:
            return (0, 0, 0, name)
        d = defs[name]
        return (-d.priority, -d.pattern.max_width, -len(d.pattern.value), name)

    names = sorted(used, key=order)
    if not names:
        raise ConstrainedError("invalid grammar: it uses no terminal, so the only text it allows is the empty one")
    shadowing = set().union(*shadows.values())
    priority = np.array([int(n in shadowing) if n in terminals else defs[n].priority for n in names])
    is_str = np.array([n not in terminals and type(defs[n].pattern).__name__ == "PatternStr" for n in names])
    ignored = np.array([n in ignored_names for n in names], dtype=bool)
    choice_order = np.array(sorted(range(len(names)), key=lambda k: (-priority[k], not is_str[k], k)), dtype=np.int64)
    dfas = []
    with gc_paused():
        for name in names:
            dfa = terminals[name] if name in terminals else _terminal_dfa(name, defs[name].pattern)
            dfas.append(bounded(dfa, max_ignored) if name in ignored_names else dfa)
    glued_ids = frozenset(k for k, name in enumerate(names) if name in glued)
    with gc_paused():  # objects by the hundred thousand, none of them garbage
        index = {name: k for k, name in enumerate(names)}
        parser = ParseTable(table, start, index)
        shadow_ids = {index[name]: frozenset(index[t] for t in by) for name, by in shadows.items()}
        acceptable = _acceptable(parser, frozenset(np.flatnonzero(ignored).tolist()), glued_ids, shadow_ids)
        lexer = Lexer(dfas, ignored, choice_order, set(acceptable.values()))
    language = _Language(names, lexer, parser, acceptable)
    if not terminals:  # with DFA terminals lark cannot lex the grammar, so there is nothing to agree with
        lexer.check_lark_agrees({terms: lexer.start(terms) for terms in set(acceptable.values())}, names, is_str,
                                priority)
    return language


def _acceptable(parser: ParseTable, ignored: frozenset, glued: frozenset, shadows: dict) -> dict:
    """Per parser state, the terminals lark's contextual lexer tries there: those
    with an action, and the ignored ones but right after a glued terminal (an LR
    state is entered by one symbol, so that is known per state); and those
    shadowing one of them (``shadows``, terminal ids)."""
    after_glued = {target for actions in parser.actions.values()
                   for term, (shift, target, _) in actions.items() if shift and term in glued}
    found = {}
    for state, terms in parser.acceptable.items():
        terms = terms if state in after_glued else terms | ignored
        found[state] = terms.union(*(shadows[t] for t in terms if t in shadows)) if shadows else terms
    return found


def _terminal_dfa(name: str, pattern) -> DFA:
    try:
        return from_regex(pattern.to_regexp())
    except ConstrainedError as e:
        hint = ""
        if name == "ESCAPED_STRING":
            hint = ("; lark's common.ESCAPED_STRING uses a lookbehind: define the string without it, "
                    'e.g. STRING: /"([^"\\\\]|\\\\.)*"/')
        raise ConstrainedError(f"terminal {name} ({pattern}) cannot be used: {e}{hint}") from None


def _check_productive(rules: list, start: str) -> None:
    """A grammar whose start rule derives no finite string (an empty language)
    is refused; the rules that derive some string come from lalr_tables.derived."""
    productive = {symbol.name for symbol in derived(rules, lambda rule: [s for s in rule.expansion if not s.is_term])}
    if start not in productive:
        raise ConstrainedError(
            f"the grammar's language is empty: rule {start!r} never derives a finite string "
            "(every alternative needs a rule that never finishes, e.g. only left-recursive ones)"
        )


class _Language:
    """Everything about a grammar that does not depend on a vocabulary: how the
    lexer and the parser meet. A matcher's state is (lexer state, parser stack);
    the lexer state lives in the context of the stack that was there when the
    lexeme began (the stack does not change inside a lexeme)."""

    def __init__(self, names, lexer: Lexer, parser: ParseTable, acceptable: dict):
        self.names = names
        self.lexer = lexer
        self.parser = parser
        self.acceptable = acceptable  # per parser state (see _acceptable)
        self._starts = {state: lexer.start(terms) for state, terms in acceptable.items()}
        self._by_action: dict = {}  # per parser state: see _terminals_by_action
        self._contexts = SuffixMemo(_CONTEXT_CACHE)
        self._last_context = (None, 0, None)  # (stack, depth read, its answer): the last stack asked for
        self._inside: dict = {}  # (lexer state, context key, bytes) -> _read_inside's answer

    def start(self) -> tuple:
        stack = self.parser.start_stack()
        return self._starts[stack[-1]][0], stack

    def context(self, stack: tuple):
        """The LexContext of a parser stack. Valid terminals are the acceptable
        ones the parser really shifts (LALR may reduce before it notices an
        error); ignored terminals are always valid."""
        parser = self.parser
        last = self._last_context
        if last[0] is stack:  # a step asks again for the stack it just asked for (half the calls)
            parser.read(stack, last[1])
            return last[2]
        sure, reduced, decided = self._by_action.get(stack[-1]) or self._terminals_by_action(stack[-1])
        found = (1, decided) if decided is not None else self._contexts.get(0, stack)
        if found is not None:
            parser.read(stack, found[0])
        else:
            with parser.reading(stack) as depth:
                valid = sure | {k for k in reduced if parser.feed(stack, k) is not None}
                found = depth(), self.lexer.context(self.acceptable[stack[-1]], valid)
                self._contexts.put(0, stack, *found)
        self._last_context = (stack, *found)
        return found[1]

    def _terminals_by_action(self, state: int) -> tuple:
        """(the terminals acceptable in parser state ``state`` that are always
        valid: ignored ones and shifts, which never fail; those the parser
        reduces before it shifts them, which the stack below decides; the
        context where there are none of those, which the state alone decides:
        three contexts asked for in four on MaskBench, that need no stack memo;
        None where some are reduced). Acceptable terminals without an action
        (shadows, see grammar_from_rules) are never valid."""
        ignored, actions = self.lexer.ignored, self.parser.actions[state]
        acceptable = self.acceptable[state]
        sure = frozenset(k for k in acceptable if ignored[k] or k in actions and actions[k][0])
        reduced = [k for k in acceptable if k in actions and k not in sure]
        entry = self._by_action[state] = (sure, reduced, None if reduced else self.lexer.context(acceptable, sure))
        return entry

    def after(self, stack: tuple, term: int):
        """(fresh lexer state, stack) once the lexeme is emitted as ``term`` (stack
        None where the parser rejects it)."""
        if self.lexer.ignored[term]:
            return self._starts[stack[-1]][1], stack
        stack = self.parser.feed(stack, term)
        return (self.lexer.n_states, None) if stack is None else (self._starts[stack[-1]][0], stack)

    def end_ok(self, stack: tuple) -> bool:
        """Whether the parser accepts the input ending here. (Asked apart from
        the context: $END's reductions read deep into the stack, and the masks
        and walks that need only the context are remembered under the states
        they read.)"""
        return self.parser.feed(stack, END) is not None

    def eos_ok(self, q: int, stack: tuple) -> bool:
        if q in self.lexer.starts:
            return self.end_ok(stack)
        term = int(self.context(stack).choice[q])
        if term < 0:
            return False
        return self.end_ok(self.after(stack, term)[1])

    def step(self, q: int, stack: tuple, data: bytes, emitted: list | None = None):
        """(lexer state, stack) after ``data``, or None where it is not allowed.
        A lexeme that no byte can extend is emitted at once: the state is then
        the next lexeme's start. ``emitted`` gets (terminal, offset in ``data``
        where its lexeme ends) for each lexeme emitted."""
        ctx = self.context(stack)
        key = (q, ctx.key, data)
        ending = self._inside.get(key)
        if ending is None:  # (most tokens stay inside the lexeme they begin in: read once per state and context)
            ending = self._read_inside(q, ctx, data)
            if len(self._inside) >= _WALKS_KEPT:
                self._inside.clear()
            self._inside[key] = ending
        if not ending:  # a lexeme ends inside ``data``: the parser decides what follows
            trans = self.lexer.trans
            for i, b in enumerate(data):
                nq = trans[q, b]
                if ctx.alive_lark[nq]:
                    q = nq
                    continue
                term = int(ctx.choice[q])
                if term < 0:
                    return None
                if emitted is not None:
                    emitted.append((term, i))
                q, stack = self.after(stack, term)
                ctx = self.context(stack)
                nq = trans[q, b]
                if not ctx.alive_lark[nq]:
                    return None
                q = nq
            ending = self._ending(int(q), ctx)
        q, term = ending
        if q < 0:
            return None
        if term >= 0:
            if emitted is not None:
                emitted.append((term, len(data)))
            return self.after(stack, term)
        return q, stack

    def _read_inside(self, q: int, ctx, data: bytes):
        """``_ending``'s answer after ``data`` read from lexer state q in context
        ``ctx``, or False where a lexeme ends inside ``data`` (the parser decides
        what follows, so ``step`` reads on with the stack)."""
        trans, alive = self.lexer.trans, ctx.alive_lark
        for b in data:
            q = trans[q, b]
            if not alive[q]:
                return False
        return self._ending(int(q), ctx)

    def _ending(self, q: int, ctx) -> tuple:
        """(q, or -1 where no valid terminal can complete there; the terminal to
        emit at once, as no byte leads on from q (after a comma, a closing
        quote), or -1). (From such a q, the next mask would be the start's mask
        again, computed and kept apart.)"""
        if not ctx.alive_valid[q]:
            return -1, -1
        term = int(ctx.choice[q])
        return q, term if term >= 0 and self.lexer.closed(q) else -1

    def forced(self, q: int, stack: tuple) -> bytes:
        ctx = self.context(stack)
        out = bytearray()
        while len(out) < 256:
            if ctx.choice[q] >= 0 or (q in self.lexer.starts and self.end_ok(stack)):
                break
            nxt = self.lexer.trans[q]
            live = np.flatnonzero(ctx.alive_valid[nxt])
            if len(live) != 1:
                break
            out.append(int(live[0]))
            q = int(nxt[live[0]])
        return bytes(out)

    def matches(self, data: bytes) -> bool:
        state = self.step(*self.start(), data)
        return state is not None and self.eos_ok(*state)


class Grammar(Compiled):
    """A compiled Lark grammar. ``matcher(tokenizer)`` follows one sequence;
    ``processor(tokenizer)`` is an mlx-lm logits processor for one generation."""

    def __init__(self, lk, language: _Language, description: str, lark_lexes: bool = True):
        super().__init__()
        self.lark = lk
        self.language = language
        self.description = description
        self._lark_lexes = lark_lexes
        self._lark_parser = None

    def __repr__(self) -> str:
        return (f"<Grammar {self.description}: {len(self.language.names)} terminals, "
                f"{self.language.lexer.n_states} lexer states>")

    def _new_index(self, vocab: Vocabulary) -> GrammarIndex:
        return GrammarIndex(self.language, vocab)

    def _new_matcher(self, index: GrammarIndex) -> "GrammarMatcher":
        return GrammarMatcher(index)

    def matches(self, text: str) -> bool:
        """Whether ``text`` is in the language: lark parses it (grammars whose
        terminals lark can lex), else this engine accepts its bytes."""
        if not self._lark_lexes:
            return self.language.matches(text.encode())
        import lark
        from lark.exceptions import LarkError

        if self._lark_parser is None:  # lark's own contextual lexer, as the reference
            options = self.lark.options
            self._lark_parser = lark.Lark(
                self.lark.source_grammar, parser="lalr", lexer="contextual", start=options.start,
                import_paths=options.import_paths,
            )
        try:
            self._lark_parser.parse(text)
            return True
        except LarkError:
            return False


class GrammarMatcher(TokenHistory):
    """One sequence's position in a grammar: a lexer state and a parser stack per
    token (with more parts in subclasses: json_unique.DistinctItemsMatcher)."""

    refused = "by the grammar"  # why a token is not allowed, for the error

    def __init__(self, index: GrammarIndex, start=None):
        super().__init__(index, index.language.start() if start is None else start)
        self.language = index.language

    def is_finished(self) -> bool:
        return self._states[-1] is None

    def is_accepting(self) -> bool:
        state = self._states[-1]
        return state is None or self.language.eos_ok(state[0], state[1])

    def mask(self) -> np.ndarray:
        state = self._states[-1]
        return self.index.finished_mask() if state is None else self.index.mask(state[0], state[1])

    def _step(self, state: tuple, token: int):
        """The state after ``token`` (not EOS), or None where it is not allowed."""
        return self.index.step(state[0], state[1], token)

    def advance(self, token: int) -> None:
        token = self.vocab.check_token(token)
        state = self._states[-1]
        if token in self.vocab.eos_ids:
            if state is not None and not self.language.eos_ok(state[0], state[1]):
                raise ConstrainedError(
                    f"EOS (token {token}) is not allowed after {self.text()!r}: the output is not complete"
                )
            nxt = None
        elif state is None:
            raise ConstrainedError(f"cannot advance by token {token} after EOS: the output is complete")
        else:
            nxt = self._step(state, token)
            if nxt is None:
                raise ConstrainedError(
                    f"token {token} ({self.vocab.tokens[token]!r}) is not allowed after {self.text()!r} {self.refused}"
                )
        self._states.append(nxt)
        self._tokens.append(token)

    def forced(self) -> bytes:
        state = self._states[-1]
        return b"" if state is None else self.language.forced(state[0], state[1])
