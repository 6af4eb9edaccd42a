"""ECMA-262 regular expressions (JSON Schema's ``pattern`` dialect) translated
to Python regular expressions over code points, for ``dfa.from_regex``.

The translation spells every character class out as code point ranges, so the
Python pattern means exactly what the ECMA-262 one means whatever flags Python
would apply: ``.`` is any character but \\n \\r \\u2028 \\u2029; ``\\d`` ``\\w``
are ASCII; ``\\s`` is ECMA's white space and line terminators (Unicode spaces
and \\ufeff included); ``[^]`` is any character, ``[]`` none; ``\\uXXXX``
(surrogate pairs joined), ``\\u{...}``, ``\\xHH``, ``\\cX`` escapes, and a
backslash before any other character but a letter or digit (``\\_`` is
``_``, as in Annex B); ``\\p{..}`` and
``\\P{..}`` with a Unicode general category (by this Python's Unicode
database; scripts and other properties are refused). JSON Schema
patterns are unanchored: a pattern matches a string if it matches anywhere in
it: the translation is padded with "any characters" on both sides, and the
anchors ``^`` and ``$`` read marks at the ends of the string (see
search_pattern). Lookaheads right after a leading ``^`` (``^(?!_)[a-z_]+$``) are
taken apart (leading_lookaheads), their automata intersected or subtracted by
the caller, and so are negative ones before each character of a whole
anchored string (``^((?!--).)*$``, tempered_token); a positive lookahead
that ends a pattern reads as a group (search_pattern). Constructs an
automaton cannot enforce (other lookarounds, backreferences, word
boundaries) are refused with an error naming them, never approximated.
"""

import unicodedata
from functools import lru_cache

from .dfa import MAX_CODE_POINT, complement_ranges as complement, normalize_ranges as normalize
from .errors import ConstrainedError

ANY = r"[\x00-\U0010ffff]"

_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
]  # fmt: skip
_LINE_TERMINATORS = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}


def char_class(ranges) -> str:
    """Python syntax for one character of ``ranges`` (code point ranges)."""
    ranges = normalize(ranges)
    if not ranges:
        return r"[^\x00-\U0010ffff]"
    items = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
    return f"[{items}]"


@lru_cache(maxsize=64)
def _category(name: str) -> tuple[tuple[int, int], ...]:
    """The code points of a Unicode general category (one or two letters), by
    this Python's Unicode database."""
    ranges: list[tuple[int, int]] = []
    for c in range(MAX_CODE_POINT + 1):
        if unicodedata.category(chr(c)).startswith(name):
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1] = (ranges[-1][0], c)
            else:
                ranges.append((c, c))
    return tuple(ranges)


_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Number": "N",
    "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
    "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C",
    "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
    "Unassigned": "Cn",
}  # fmt: skip


# ^ and $ become these code points, spelled as bytes no UTF-8 or JSON text has
# (see ANCHOR_BYTES): the search pattern reads the string between the two.
# Lone surrogates are never characters of a string, so they are free to mean this.
START, END = 0xD800, 0xD801
ANCHOR_BYTES = {START: 0xFE, END: 0xFF}


MAX_ANCHORS = 8  # the most ^ (or $) that a match may need to pass, for search_pattern


def search_pattern(pattern: str) -> tuple[str, int, int]:
    """(a Python pattern, n, m) such that the strings s in which the ECMA-262
    ``pattern`` matches somewhere are exactly those for which n START marks,
    s, then m END marks fully match it. An anchor is then a character that
    only the ends have: ``^`` reads a START mark, which is only there before
    the first character, and a match that passes ``^`` several times (``^^a``,
    ``(^|b)+``) reads several; marks it does not read, the "any characters"
    around it do. n and m are the most anchors some match needs (a repeat
    passes an anchor in at most one iteration that reads characters, and
    iterations that read none are needed only up to the least count). A
    positive lookahead that ends the pattern (``[^/]+(?=\\.json)``) reads as a
    group: a match followed by one of the lookahead is a match of both."""
    if not isinstance(pattern, str):
        raise ConstrainedError(f"a pattern is a string, got {type(pattern).__name__}")
    translator = _Translator(pattern)
    body, starts, ends = translator.disjunction()
    if translator.pos < len(pattern):
        raise translator.error("has an unmatched ')'")
    if max(starts, ends) > MAX_ANCHORS:
        raise translator.error(
            f"may need to pass '^' or '$' more than {MAX_ANCHORS} times on one path (as in '(^^){{9}}'), "
            "which is not supported"
        )
    start, end = char_class([(START, START)]), char_class([(END, END)])
    return f"{start}*{ANY}*(?:{body}){ANY}*{end}*", starts, ends


def leading_lookaheads(pattern: str) -> tuple[str, list[tuple[bool, str]]]:
    """(the pattern without the lookaheads that open it, [(whether positive,
    the pattern "^" + lookahead body)]) for a pattern that starts with ``^``
    then lookaheads, with no ``|`` outside parentheses: it matches a string
    where the rest matches from the start and each ``^`` + body does (positive)
    or does not (negative), as they are all read at the string's start. Other
    patterns come back whole, with no lookaheads."""
    if not isinstance(pattern, str) or not pattern.startswith(("^(?=", "^(?!")):
        return pattern, []
    translator = _Translator(pattern)
    translator.pos = 1
    looks = [(positive, "^" + body) for positive, body in translator.lookaheads("=!")]
    rest = "^" + pattern[translator.pos :]
    whole = _Translator(rest)
    try:
        whole.alternative()
    except ConstrainedError:  # the caller reads the rest again, and reports this
        return rest, looks
    if whole.pos < len(rest):  # an alternative the lookaheads do not open (or an unmatched ")"): refused whole
        return pattern, []
    return rest, looks


def tempered_token(pattern: str) -> tuple[str, list[str]] | None:
    """For a pattern that is one repeated group of negative lookaheads and a
    single character, ``^((?!R)(?!S).)*$`` (the "tempered token": no R or S
    anywhere; ``+`` for at least one character): (the pattern without the
    lookaheads, ``^(?:.)*$``; their bodies, R and S). It matches a string
    of those characters where no body matches from any character's position,
    all of them being read by the group. Else None."""
    if not isinstance(pattern, str) or not pattern.startswith("^(") or pattern[-3:] not in (")*$", ")+$"):
        return None
    translator = _Translator(pattern)
    translator.pos = 4 if pattern.startswith("^(?:") else 2
    try:  # (where this fails, the caller reads the pattern again, and reports it)
        bodies = [body for _, body in translator.lookaheads("!")]
        begin = translator.pos
        if not bodies or translator.peek() in "()|^$":
            return None
        translator.atom()
    except ConstrainedError:
        return None
    if translator.pos != len(pattern) - 3:
        return None
    return f"^(?:{pattern[begin:translator.pos]}){pattern[-2:]}", bodies


class _Translator:
    """A recursive-descent reader of ECMA-262 pattern syntax (with Annex B's
    literal ``{``, ``}`` and ``]``) that writes the Python equivalent. The
    builders return the Python text with the most ``^`` and the most ``$`` that
    any path through it passes."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.pos = 0
        self.depth = 0  # groups open

    def error(self, what: str) -> ConstrainedError:
        return ConstrainedError(f"pattern {self.pattern!r} {what} (at offset {self.pos})")

    def refuse(self, construct: str) -> ConstrainedError:
        return self.error(f"uses {construct}, which an automaton cannot enforce exactly")

    def peek(self, n: int = 1) -> str:
        return self.pattern[self.pos : self.pos + n]

    def take(self) -> str:
        if self.pos >= len(self.pattern):
            raise self.error("ends unexpectedly")
        c = self.pattern[self.pos]
        self.pos += 1
        return c

    def disjunction(self) -> tuple[str, int, int]:
        alternatives = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            alternatives.append(self.alternative())
        text = "|".join(a[0] for a in alternatives)
        return text, max(a[1] for a in alternatives), max(a[2] for a in alternatives)

    def alternative(self) -> tuple[str, int, int]:
        """The terms up to ``|``, ``)`` or the end."""
        out, starts, ends = [], 0, 0
        while self.pos < len(self.pattern) and self.peek() not in "|)":
            if self.peek() in "^$":
                anchor = self.take()
                out.append(char_class([(START, START) if anchor == "^" else (END, END)]))
                starts, ends = starts + (anchor == "^"), ends + (anchor == "$")
                continue
            text, atom_starts, atom_ends = self.atom()
            quantifier, low, most = self.quantifier()
            times = low + 1 if most is None else min(most, low + 1)  # see search_pattern
            out.append(text + quantifier)
            starts, ends = starts + atom_starts * times, ends + atom_ends * times
        return "".join(out), starts, ends

    def quantifier(self) -> tuple[str, int, int | None]:
        """The quantifier at the position (or ""), its least and its most repeats (None: unbounded)."""
        c = self.peek()
        if c in ("*", "+", "?"):
            self.pos += 1
            q, low, most = c, int(c == "+"), (1 if c == "?" else None)
        elif c == "{" and (bounds := self.braces()) is not None:
            low, most = bounds
            q = f"{{{low}}}" if low == most else f"{{{low},{'' if most is None else most}}}"
        else:
            return "", 1, 1
        if self.peek() == "?":  # lazy: the same language
            self.pos += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self.braces(look=True) is not None):
            raise self.error("has a quantifier with nothing to repeat")
        return q, low, most

    def braces(self, look: bool = False) -> tuple[int, int | None] | None:
        """A ``{n}``, ``{n,}`` or ``{n,m}`` quantifier at the position, or None
        (then ``{`` is a literal character, as in Annex B)."""
        end = self.pattern.find("}", self.pos)
        if end < 0:
            return None
        inside = self.pattern[self.pos + 1 : end]
        low, comma, high = inside.partition(",")
        if not low.isdigit() or not low.isascii() or (high and not (high.isdigit() and high.isascii())):
            return None
        if not look:
            self.pos = end + 1
        bounds = (int(low), None if comma and not high else int(high) if high else int(low))
        if bounds[1] is not None and bounds[1] < bounds[0]:
            raise self.error(f"has a quantifier {{{inside}}} whose bounds are out of order")
        return bounds

    def atom(self) -> tuple[str, int, int]:
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self.braces(look=True) is not None):
            raise self.error("has a quantifier with nothing to repeat")
        c = self.take()
        if c == "(":
            return self.group()
        if c == ".":
            ranges = complement(_LINE_TERMINATORS)
        elif c == "[":
            ranges = self.class_body()
        elif c == "\\":
            ranges = self.escape()
        else:
            ranges = [(ord(c), ord(c))]
        # Lone surrogates are never characters of a string (and START and END are among them).
        return char_class(complement(complement(ranges) + [(0xD800, 0xDFFF)])), 0, 0

    def group(self) -> tuple[str, int, int]:
        if self.peek() == "?":
            self.pos += 1
            kind = self.peek(2)
            if kind[:1] == ":":
                self.pos += 1
            elif kind[:1] in "=!":
                at = self.pos
                if kind[:1] == "=" and self.depth == 0:
                    # A positive lookahead that ends the pattern reads as a group (see search_pattern), where no
                    # "^" is inside: that may hold at an empty string's end, but not after a "$" before it.
                    self.pos += 1
                    inner, starts, ends = self.group_body()
                    if self.pos == len(self.pattern) and not starts:
                        return f"(?:{inner})", starts, ends
                    self.pos = at
                raise self.error("uses a lookahead that an automaton cannot enforce exactly: only lookaheads "
                                 "that open the pattern (right after '^', with no '|' outside parentheses), a "
                                 "positive one that ends it, and negative ones before each character of a whole "
                                 "anchored string ('^((?!--).)*$') are")
            elif kind in ("<=", "<!"):
                raise self.refuse("a lookbehind")
            elif kind[:1] == "<":
                end = self.pattern.find(">", self.pos)
                if end < 0:
                    raise self.error("has an unterminated group name")
                self.pos = end + 1
            else:
                raise self.error("has an invalid group '(?'")
        inner, starts, ends = self.group_body()
        return f"(?:{inner})", starts, ends

    def group_body(self) -> tuple[str, int, int]:
        """The disjunction up to a group's ``)``, which is read too."""
        self.depth += 1
        found = self.disjunction()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("has an unterminated group")
        self.pos += 1
        return found

    def lookaheads(self, kinds: str) -> list[tuple[bool, str]]:
        """The lookaheads of ``kinds`` ("=", "!") one after the other from the
        position, read: [(whether positive, its body)]."""
        found = []
        while self.peek(3) in tuple("(?" + kind for kind in kinds):
            positive = self.peek(3) == "(?="
            self.pos += 3
            begin = self.pos
            self.group_body()
            found.append((positive, self.pattern[begin : self.pos - 1]))
        return found

    def escape(self) -> list[tuple[int, int]]:
        c = self.peek()
        if c in ("b", "B"):
            raise self.refuse("a word boundary (\\b, \\B)")
        if c.isdigit() and c != "0":
            raise self.refuse("a backreference")
        if c == "k" and self.peek(2) == "k<":
            raise self.refuse("a backreference")
        return self.class_escape(in_class=False)

    def class_escape(self, in_class: bool) -> list[tuple[int, int]]:
        """The code points of the escape after a backslash."""
        c = self.take()
        sets = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
        if c.lower() in sets:
            ranges = sets[c.lower()]
            return complement(ranges) if c.isupper() else list(ranges)
        if c in _CONTROL_ESCAPES:
            return [(_CONTROL_ESCAPES[c],) * 2]
        if c == "b" and in_class:
            return [(0x08, 0x08)]
        if c == "0" and not self.peek().isdigit():
            return [(0, 0)]
        if c == "c":
            letter = self.take()
            if not ("a" <= letter.lower() <= "z"):
                raise self.error("has an invalid control escape \\c")
            return [(ord(letter) % 32,) * 2]
        if c == "x":
            return [(self.hex_digits(2),) * 2]
        if c == "u":
            return [(self.unicode_escape(),) * 2]
        if c in ("p", "P"):
            ranges = self.property()
            return complement(ranges) if c == "P" else ranges
        if not c.isalnum():  # an identity escape (Annex B; a letter's or a digit's may mean more elsewhere: \a, \1)
            return [(ord(c), ord(c))]
        raise self.error(f"has an invalid escape \\{c}")

    def hex_digits(self, n: int) -> int:
        digits = self.peek(n)
        if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise self.error(f"has an invalid escape: expected {n} hexadecimal digits")
        self.pos += n
        return int(digits, 16)

    def unicode_escape(self) -> int:
        if self.peek() == "{":
            end = self.pattern.find("}", self.pos)
            digits = self.pattern[self.pos + 1 : end] if end > 0 else ""
            if not digits or any(d not in "0123456789abcdefABCDEF" for d in digits) or int(digits, 16) > MAX_CODE_POINT:
                raise self.error("has an invalid escape \\u{...}")
            self.pos = end + 1
            return int(digits, 16)
        code = self.hex_digits(4)
        if 0xD800 <= code <= 0xDBFF and self.peek(2) == "\\u":
            save = self.pos
            self.pos += 2
            try:
                low = self.hex_digits(4)
            except ConstrainedError:
                low = -1
            if 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            self.pos = save
        return code

    def property(self) -> list[tuple[int, int]]:
        if self.take() != "{":
            raise self.error("has an invalid property escape: expected \\p{...}")
        end = self.pattern.find("}", self.pos)
        if end < 0:
            raise self.error("has an unterminated property escape \\p{...}")
        name = self.pattern[self.pos : end]
        self.pos = end + 1
        key, _, value = name.rpartition("=")
        if key not in ("", "General_Category", "gc"):
            raise self.error(f"uses the property escape \\p{{{name}}}: only general categories are supported")
        category = _CATEGORY_NAMES.get(value, value)
        if category == "LC":
            return normalize(_category("Lu") + _category("Ll") + _category("Lt"))
        if category not in set(_CATEGORY_NAMES.values()):
            raise self.error(f"uses an unknown general category \\p{{{name}}}")
        return list(_category(category))

    def class_body(self) -> list[tuple[int, int]]:
        """A character class after its ``[``, through its ``]``."""
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            first = self.class_atom()
            if self.peek() == "-" and self.peek(2)[1:] not in ("]", ""):
                self.pos += 1
                last = self.class_atom()
                if not (_single(first) and _single(last)):
                    ranges += first + [(0x2D, 0x2D)] + last  # Annex B: a class escape is no range end
                elif last[0][0] < first[0][0]:
                    raise self.error("has a character class range out of order")
                else:
                    ranges.append((first[0][0], last[0][0]))
            else:
                ranges += first
        self.pos += 1
        return complement(ranges) if negate else normalize(ranges)

    def class_atom(self) -> list[tuple[int, int]]:
        c = self.take()
        if c == "\\":
            return self.class_escape(in_class=True)
        return [(ord(c), ord(c))]


def _single(ranges) -> bool:
    return len(ranges) == 1 and ranges[0][0] == ranges[0][1]
