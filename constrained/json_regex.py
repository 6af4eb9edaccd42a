"""Strings of format "regex": regular expressions that both ECMA-262 (the
format's definition, no flags) and Python's re (what jsonschema's format
checker compiles them with) take.

Groups nest, so no automaton takes exactly these strings; a grammar does
(an automaton takes those without syntax but ``.``, ``^`` and ``$``:
``plain``). Its pieces are terminals over the string's JSON text
(``piece``), glued so that no whitespace comes between them, and
json_schema_rules' ``_Builder.regex_rest`` nests them:

    body        := alternative | body BAR alternative
    alternative := (nothing) | TERMS | grouped | grouped TERMS
    grouped     := alternative group
    group       := GROUP body CLOSE_GROUP | GROUP body CLOSE_GROUP QUANTIFIER
                 | LOOKAHEAD body CLOSE_GROUP

TERMS is a run of terms outside groups (a regular language, one lexeme):
assertions, and atoms each maybe quantified. A token of regex text then
crosses a lexeme boundary only at a group or a bar, where one lexeme per
atom made the first mask inside a regex take tens of milliseconds.

The pieces take a subset of what both engines allow, so that each string is a
valid pattern for both:

- an atom: a character that is not syntax (``^$\\.*+?()[]{}|``); ``.``; an
  escape of ASCII punctuation (not ``_``, which ECMA-262 reads as a name's
  character), a class escape (``\\d \\D \\w \\W \\s \\S``), a control
  escape (``\\n \\r \\t \\f \\v``), ``\\xHH`` or ``\\uHHHH``; or a character
  class: ``[``, maybe ``^``, then characters other than ``\\ ] [ - ^``, ranges
  of printable ASCII in order (``a-z``, not ``z-a``), escapes as above and
  ``\\b`` (backspace), a ``-`` only first or last, at least one of these,
  then ``]``; no two of ``& ~ |`` in a row in it (Python warns that it may
  read ``&&`` as a set operation one day).
- QUANTIFIER (also after an atom): ``*``, ``+``, ``?``, ``{n}``, ``{n,}`` or
  ``{n,m}`` with n <= m < 100, each maybe lazy (a following ``?``). One per
  atom or group: ``a**`` is an error in both.
- an assertion: ``^``, ``$``, ``\\b``, ``\\B``; and LOOKAHEAD: ``(?=``, ``(?!``.
  Neither is quantified (only Annex B lets a lookahead be).
- GROUP: ``(``, ``(?:``.

Left out, though valid in one engine or both: backreferences and ``\\0``,
named groups (``(?<n>`` in ECMA-262, ``(?P<n>`` in Python), lookbehinds
(Python wants them of fixed width), ``\\c``, inline flags, a ``]`` or ``}``
outside a class and a ``{`` that starts no quantifier (ECMA-262's Annex B
reads them as characters), ranges with escapes or non-ASCII ends.
"""

from functools import lru_cache

from . import json_strings
from .dfa import DFA

_HEX = "[0-9a-fA-F]"
_CODES = rf"x{_HEX}{{2}}|u{_HEX}{{4}}"
_SYNTAX = r"\^$\\.*+?()\[\]{}|"
_PUNCTUATION = r"\x20-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7e"  # ASCII that is no letter, digit or "_"
_ESCAPE = rf"\\(?:[dDwWsSnrtfv{_PUNCTUATION}]|{_CODES})"
_RANGE_ENDS = [c for c in map(chr, range(0x20, 0x7F)) if c not in "\\][-^"]


def _escaped(c: str) -> str:
    return "\\" + c if not c.isalnum() else c


def _ranges() -> str:
    """Ranges of printable ASCII whose ends are in order."""
    return "|".join(f"{_escaped(lo)}-[{''.join(_escaped(hi) for hi in _RANGE_ENDS if hi >= lo)}]"
                    for lo in _RANGE_ENDS)


def _at_least(n: int) -> str:
    """The numbers n..99, without leading zeros."""
    tens, units = divmod(n, 10)
    if not tens:
        return f"[{units}-9]|[1-9][0-9]"
    return f"{tens}[{units}-9]" + (f"|[{tens + 1}-9][0-9]" if tens < 9 else "")


_NUMBER = "0|[1-9][0-9]?"
_COUNTS = "|".join(f"{n},(?:{_at_least(n)})" for n in range(100))
_CLASS_ITEM = rf"[^\\\]\[\-^&~|]|{_ranges()}|\\(?:[dDwWsSnrtfvb{_PUNCTUATION}]|{_CODES})"
# Items with "&", "~" or "|" between them, never two of those in a row ("&&" may read as a set operation).
_CLASS_ITEMS = rf"(?:[&~|]?(?:{_CLASS_ITEM}))+[&~|]?|[&~|]"

_ATOM = rf"[^{_SYNTAX}]|\.|{_ESCAPE}|\[\^?(?:-|-?(?:{_CLASS_ITEMS})-?)\]"
_QUANTIFIER = rf"(?:[*+?]|\{{(?:{_NUMBER})(?:,)?\}}|\{{(?:{_COUNTS})\}})\??"
_ASSERTION = r"[\^$]|\\[bB]"

PIECES = {
    "terms": rf"(?:{_ASSERTION}|(?:{_ATOM})(?:{_QUANTIFIER})?)+",
    "quantifier": _QUANTIFIER,
    "group": r"\((?:\?:)?",
    "lookahead": r"\(\?[=!]",
    "close_group": r"\)",
    "bar": r"\|",
}


@lru_cache(maxsize=None)
def piece(name: str) -> DFA:
    """The JSON text (as json.dumps spells it) of the piece ``name`` (PIECES)."""
    return json_strings.content(PIECES[name])


@lru_cache(maxsize=None)
def plain() -> DFA:
    """The JSON texts of the regular expressions made of characters that are
    not syntax, ``.``, ``^`` and ``$`` only (one lexeme of TERMS, or none): a
    regular part of the format's strings. Where every string that the other
    keywords beside the format allow is one of these (a pattern of digits and
    colons), the format adds nothing, and those keywords make a DFA."""
    return json_strings.matching(rf"(?:[^{_SYNTAX}]|[.^$])*")
