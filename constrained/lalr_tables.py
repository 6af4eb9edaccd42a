"""LALR(1) parse tables for generated grammars, built the way lark builds them.

Lark's own analysis works on Python objects (rule pointers, item sets, symbols
hashed by name); on a schema's grammar of thousands of rules that took most of a
second. This is the same construction on integers: LR(0) item sets, then
DeRemer and Pennello's lookaheads (reads, includes, lookback, with lark's reading
of includes: every item of the nonterminal in the state, from its dot). The
result is a table in lark's format (``IntParseTable``: states of
{symbol name: (Shift, state) or (Reduce, rule)}, start and end states), equal to
lark's up to the numbering of the states; a test compares the two. (``derived``
finds the rules that derive the empty string here, and for grammar.py those
that derive some string.)
"""

from types import SimpleNamespace

from .errors import ConstrainedError


class Conflict(ConstrainedError):
    """The rules are not LALR(1): a shift/reduce or reduce/reduce conflict."""


def lalr_table(rules: list, start: str):
    """The LALR(1) table of lark ``rules`` (lark Rule objects) for ``start``. A
    shift/reduce or reduce/reduce conflict is refused (``Conflict``)."""
    g = _Coded(rules, start)
    closures, moves = _item_sets(g)
    return _table(g, moves, _lookaheads(g, closures, moves))


class _Coded:
    """The rules on integers: rule names are 0 .. n_names - 1 (the root rule's
    name last), terminals come after them; item ``first[r] + d`` is rule r with
    its dot before symbol d."""

    def __init__(self, rules: list, start: str):
        from lark.grammar import NonTerminal, Rule

        self.rules = rules + [Rule(NonTerminal("$root_" + start), [NonTerminal(start)])]
        self.names = list(dict.fromkeys(rule.origin.name for rule in self.rules))
        code = {name: k for k, name in enumerate(self.names)}
        if start not in code:
            raise ConstrainedError(f"the start rule {start!r} has no alternatives")
        self.n_names = len(self.names)
        for rule in rules:
            for symbol in rule.expansion:
                if symbol.name not in code:
                    if not symbol.is_term:
                        raise ConstrainedError(f"rule {symbol.name!r} is used but has no alternatives")
                    code[symbol.name] = len(self.names)
                    self.names.append(symbol.name)
        self.end = len(self.names)
        self.names.append("$END")
        self.start, self.root = code[start], len(rules)
        self.origin = [code[rule.origin.name] for rule in self.rules]
        self.body = [[code[s.name] for s in rule.expansion] for rule in self.rules]
        self.by_origin = [[] for _ in range(self.n_names)]
        for r, name in enumerate(self.origin):
            self.by_origin[name].append(r)
        self.nullable = [False] * self.n_names
        without_terminals = [rule for rule in rules if not any(s.is_term for s in rule.expansion)]
        for symbol in derived(without_terminals, lambda rule: rule.expansion):
            self.nullable[code[symbol.name]] = True
        self.first, self.rule_of, self.after = [], [], []  # after: the symbol after the dot, -1 at the end
        for r, symbols in enumerate(self.body):
            self.first.append(len(self.rule_of))
            self.rule_of.extend([r] * (len(symbols) + 1))
            self.after.extend(symbols + [-1])
        self.rest_nullable = [False] * len(self.rule_of)  # the symbols after the one after the dot derive ""
        for r, symbols in enumerate(self.body):
            ok = True
            for i in range(len(symbols) - 1, -1, -1):
                self.rest_nullable[self.first[r] + i] = ok
                ok = ok and symbols[i] < self.n_names and self.nullable[symbols[i]]
        self._expansions: dict = {}

    def expand(self, name: int) -> frozenset:
        """The items at the start of the rules of ``name`` and, through their
        first symbols, of the rules those lead to."""
        found = self._expansions.get(name)
        if found is None:
            seen, todo, items = {name}, [name], []
            for n in todo:
                for r in self.by_origin[n]:
                    items.append(self.first[r])
                    s = self.body[r][0] if self.body[r] else -1
                    if 0 <= s < self.n_names and s not in seen:
                        seen.add(s)
                        todo.append(s)
            found = self._expansions[name] = frozenset(items)
        return found


def _item_sets(g: _Coded) -> tuple:
    """The LR(0) item sets, breadth first from the root rule's: (per state its
    items, per state {symbol: next state}). State 0 is the start."""
    kernels = {frozenset([g.first[g.root]]): 0}
    closures = [g.expand(g.origin[g.root])]
    moves: list = []
    for closure in closures:  # grows while it is read
        by_symbol: dict = {}
        for item in closure:
            s = g.after[item]
            if s >= 0:
                by_symbol.setdefault(s, []).append(item + 1)
        row = {}
        for s, advanced in by_symbol.items():
            kernel = frozenset(advanced)
            target = kernels.get(kernel)
            if target is None:
                target = kernels[kernel] = len(closures)
                items = set(kernel)
                for item in kernel:
                    if 0 <= g.after[item] < g.n_names:
                        items |= g.expand(g.after[item])
                closures.append(frozenset(items))
            row[s] = target
        moves.append(row)
    return closures, moves


def _lookaheads(g: _Coded, closures: list, moves: list) -> list:
    """Per state, {rule: the terminals (bits t - n_names) on which it is reduced}:
    DeRemer and Pennello's, over the transitions on rule names."""
    transitions = [(p, s) for p, row in enumerate(moves) for s in row if s < g.n_names]
    index = {x: k for k, x in enumerate(transitions)}
    directly = [0] * len(transitions)
    reads = [[] for _ in transitions]
    for k, (p, s) in enumerate(transitions):
        target = moves[p][s]
        for t in moves[target]:
            if t >= g.n_names:
                directly[k] |= 1 << (t - g.n_names)
            elif g.nullable[t]:
                reads[k].append(index[(target, t)])
    directly[index[(0, g.start)]] |= 1 << (g.end - g.n_names)
    includes = [[] for _ in transitions]
    lookback = [[] for _ in transitions]
    for p, row in enumerate(moves):
        items_of: dict = {}  # the state's items, by the rule name they expand
        for item in closures[p]:
            items_of.setdefault(g.origin[g.rule_of[item]], []).append(item)
        for name in row:
            if name >= g.n_names:
                continue
            k = index[(p, name)]
            for item in items_of.get(name, ()):  # lark's reading: every item of the name, from its dot
                r = g.rule_of[item]
                state = p
                for i in range(item - g.first[r], len(g.body[r])):
                    s = g.body[r][i]
                    behind = index.get((state, s)) if s < g.n_names else None
                    state = moves[state][s]
                    if behind is not None and g.rest_nullable[g.first[r] + i]:
                        includes[behind].append(k)
                if item == g.first[r]:
                    lookback[k].append((state, r))
    follow = _digraph(includes, _digraph(reads, directly))
    lookaheads = [{} for _ in moves]
    for k, found in enumerate(lookback):
        for state, r in found:
            lookaheads[state][r] = lookaheads[state].get(r, 0) | follow[k]
    return lookaheads


def _table(g: _Coded, moves: list, lookaheads: list):
    """The table in lark's IntParseTable format; conflicts are refused."""
    from lark.parsers.lalr_analysis import Reduce, Shift

    table = {}
    for p, row in enumerate(moves):
        actions = {g.names[s]: (Shift, target) for s, target in row.items()}
        reducing: dict = {}
        for r, bits in lookaheads[p].items():
            while bits:
                low = bits & -bits
                bits ^= low
                t = low.bit_length() - 1 + g.n_names
                if t in reducing:
                    raise Conflict(f"invalid grammar: Reduce/Reduce collision in {g.names[t]} between "
                                           f"{g.rules[reducing[t]]} and {g.rules[r]}")
                if t in row:
                    raise Conflict(f"the grammar is not LALR(1) (strict mode): a shift/reduce conflict for "
                                           f"{g.names[t]} between shifting it and reducing {g.rules[r]}")
                reducing[t] = r
        for t, r in reducing.items():
            actions[g.names[t]] = (Reduce, g.rules[r])
        table[p] = actions
    start = g.names[g.start]
    return SimpleNamespace(states=table, start_states={start: 0}, end_states={start: moves[0][g.start]})


def derived(rules: list, needs) -> set:
    """The least set of rule symbols that holds the origin of every rule whose
    ``needs(rule)`` it holds (all of them: a rule that needs none at once).
    Each rule counts down its needs, once per use, as they are found: time
    linear in their total length. Needs the expansion, of the rules without a
    terminal: the symbols that derive the empty string; needs the rule symbols
    of the expansion: those that derive some string (grammar._check_productive)."""
    waiting, users, found = [], {}, []
    for k, rule in enumerate(rules):
        symbols = needs(rule)
        waiting.append(len(symbols))
        for symbol in symbols:
            users.setdefault(symbol, []).append(k)
        if not symbols:
            found.append(rule.origin)
    done: set = set()
    while found:
        symbol = found.pop()
        if symbol in done:
            continue
        done.add(symbol)
        for k in users.get(symbol, ()):
            waiting[k] -= 1
            if waiting[k] == 0:
                found.append(rules[k].origin)
    return done


def _digraph(relation: list, base: list) -> list:
    """DeRemer and Pennello's digraph: per node x, base[x] or-ed with the results
    of the nodes ``relation[x]`` lists (a strongly connected set of nodes shares
    one result), depth first without recursion."""
    n = len(base)
    done = n + 1  # the depth of a node whose set of strongly connected nodes is finished
    result = list(base)
    depth = [0] * n
    stack: list = []
    for x in range(n):
        if depth[x]:
            continue
        stack.append(x)
        depth[x] = len(stack)
        work = [(x, 0, len(stack))]
        while work:
            v, i, entered = work[-1]
            if i < len(relation[v]):
                work[-1] = (v, i + 1, entered)
                w = relation[v][i]
                if not depth[w]:
                    stack.append(w)
                    depth[w] = len(stack)
                    work.append((w, 0, len(stack)))
                else:
                    depth[v] = min(depth[v], depth[w])
                    result[v] |= result[w]
                continue
            work.pop()
            if depth[v] == entered:
                while True:
                    top = stack.pop()
                    depth[top] = done
                    result[top] = result[v]
                    if top == v:
                        break
            if work:
                u = work[-1][0]
                depth[u] = min(depth[u], depth[v])
                result[u] |= result[v]
    return result
