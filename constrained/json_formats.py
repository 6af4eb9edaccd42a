"""JSON Schema ``format`` values as regular expressions over code points
(Python syntax), exact to their RFCs where the language is regular and small,
otherwise a documented subset: never a string the format rejects.

Where the format's own definition and jsonschema's FormatChecker differ, the
regex stays inside both, except for leap seconds (below):

- date, time, date-time (RFC 3339): month lengths and leap years exact; year
  0000 is left out (Python's calendar, which the checker uses, has no year 0);
  "T" and "Z" in either case. A leap second (second 60) is accepted only as
  23:59:60 in UTC (Z, +00:00 or -00:00): exact leap seconds at other offsets
  would cost thousands of states. The checker refuses every leap second, the
  RFC and the JSON Schema Test Suite accept them.
- duration: RFC 3339 appendix A's ABNF, as JSON Schema specifies.
- email: RFC 5321's Mailbox: a dot-string or quoted-string local part, then a
  domain of letter-digit-hyphen labels or an IPv4 / "IPv6:" address literal
  (no general address literals). No length limits, but under a maxLength
  above 128, RFC 5321's size limits (4.5.3.1: a local part of at most 64
  octets, a domain of at most 255, shortened to fit the maxLength), and no
  "@" in a quoted local part (``sizes``). The checker only looks for an "@".
- idn-email (RFC 6531): an email whose local part may also hold non-ASCII
  characters; domains of U-labels are left out (IDNA2008's rules). Counted
  exactly up to a maxLength of 100, RFC 5321's size limits past that.
- hostname (RFC 1123): labels of letters, digits and inner hyphens, at most 63
  characters each, none with "--" as its third and fourth characters (RFC 5891
  reserves those; Punycode A-labels, "xn--...", are not checked, so refused). The 253-character total cannot be counted cheaply alongside
  the label lengths, so at most 4 labels are accepted, the fourth at most 61
  characters long: never more than 253 in all. No trailing dot.
- ipv4: dotted quad, 0-255, no leading zeros. ipv6: every RFC 4291 text form
  (RFC 3986's IPv6address), with an embedded IPv4 address; no zone index.
- uuid: 8-4-4-4-12 hex digits, either case (RFC 4122).
- uri, uri-reference, iri, iri-reference: RFC 3986 / RFC 3987 ABNF, but IRIs
  only with characters of the Basic Multilingual Plane (the checker's grammar
  has no others) and without IP literals (its grammar reads IPv6 in part).
- json-pointer (RFC 6901); relative-json-pointer: a non-negative integer then
  "#" or a JSON pointer; the checker refuses a 0 followed by a digit anywhere
  in the integer (its bug: "10" passes, "100" fails), so such integers are
  left out; the draft's +/- index adjustment is not accepted.
- uri-template (RFC 6570, level 4 syntax), inside what the checker's library
  reads: no reserved operators (= , ! @ |), no %-escape at either end of a
  variable name, prefixes of at most 3 digits.

The checkers also allow more than the formats in places, which matters where a
value must fail a format (UNDECIDED below): those matching "^...$" (time,
date-time, hostname, uri) take a final newline; hostnames are read with
Unicode case and digits, uuids by int(x, 16) once braces, "urn:" and hyphens
are stripped, durations as ISO 8601 (fractions, signs, weeks with days), and
in IPv6 literals of URIs octets with leading zeros.
"""

from .ecma_regex import char_class
from .errors import ConstrainedError

_DIGIT = r"[0-9]"
_HEX = r"[0-9A-Fa-f]"

# RFC 3339
_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"  # 31 days
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"  # 30 days
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"  # the 29th: leap years only, below
)
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_HOUR_MINUTE = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_FRACTION = r"(?:\.[0-9]+)?"
_OFFSET = rf"(?:[Zz]|[+-]{_HOUR_MINUTE})"
_UTC = r"(?:[Zz]|[+-]00:00)"
TIME = rf"(?:{_HOUR_MINUTE}:[0-5][0-9]{_FRACTION}{_OFFSET}|23:59:60{_FRACTION}{_UTC})"
DATE_TIME = rf"{DATE}[Tt]{TIME}"

# RFC 3339 appendix A
_N = r"[0-9]+"
_DURATION_TIME = rf"T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)"
DURATION = rf"P(?:(?:{_N}D|{_N}M(?:{_N}D)?|{_N}Y(?:{_N}M(?:{_N}D)?)?)(?:{_DURATION_TIME})?|{_DURATION_TIME}|{_N}W)"

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = rf"{_HEX}{{1,4}}"
_LS32 = rf"(?:{_H16}:{_H16}|{IPV4})"


def _ipv6() -> str:
    """RFC 3986's IPv6address, form by form: eight groups (the last two may be
    an IPv4 address), or "::" standing for at least one group of zeros."""
    def groups(k: int) -> str:  # k groups, each followed by ":"
        return f"(?:{_H16}:){{{k}}}" if k else ""

    def head(k: int) -> str:  # up to k + 1 groups before "::"
        return f"(?:(?:{_H16}:){{0,{k}}}{_H16})?"

    forms = [f"{groups(6)}{_LS32}", f"::{groups(5)}{_LS32}"]
    forms += [f"{head(before)}::{groups(4 - before)}{_LS32}" for before in range(5)]
    forms += [f"{head(5)}::{_H16}", f"{head(6)}::"]
    return "(?:" + "|".join(forms) + ")"


IPV6 = _ipv6()

# No "--" as a label's third and fourth characters: RFC 5891 reserves those labels (A-labels,
# "xn--...", are Punycode, whose validity an automaton cannot check), so none is accepted.
_X, _H = "[A-Za-z0-9]", "[A-Za-z0-9-]"
_LABEL = rf"{_X}(?:{_X}|{_H}{_X}|{_H}{_H}{_X}|{_H}(?:{_X}{_H}|-{_X}){_H}{{0,58}}{_X})?"
_LAST_LABEL = rf"{_X}(?:{_X}|{_H}{_X}|{_H}{_H}{_X}|{_H}(?:{_X}{_H}|-{_X}){_H}{{0,56}}{_X})?"
HOSTNAME = rf"{_LABEL}(?:\.{_LABEL}(?:\.{_LABEL}(?:\.{_LAST_LABEL})?)?)?"

def _email(non_ascii: str) -> str:
    """RFC 5321's Mailbox, with the characters ``non_ascii`` (a class's inside)
    added to its atext and qtextSMTP, as RFC 6531 adds UTF8-non-ascii."""
    atext = rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~\-{non_ascii}]"
    dot_string = rf"{atext}+(?:\.{atext}+)*"
    quoted_string = rf'"(?:[\x20\x21\x23-\x5b\x5d-\x7e{non_ascii}]|\\[\x20-\x7e])*"'
    sub_domain = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    return rf"(?:{dot_string}|{quoted_string})@(?:{sub_domain}(?:\.{sub_domain})*|\[(?:{IPV4}|IPv6:{IPV6})\])"


_NON_ASCII = r"\x80-\U0010ffff"  # (a class's inside) RFC 6531's UTF8-non-ascii
EMAIL = _email("")
# RFC 6531: its U-label domains are left out (IDNA2008's rules: contextual code points, bidi).
IDN_EMAIL = _email(_NON_ASCII)

UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

# RFC 3986 (URI) and RFC 3987 (IRI: more unreserved characters, and private
# use in queries), the IRI characters within the Basic Multilingual Plane.
_UCSCHAR = [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)]
_IPRIVATE = [(0xE000, 0xF8FF)]


def _uri(iri: bool) -> tuple[str, str]:
    """(absolute, reference) regexes of RFC 3986, or of RFC 3987 with ``iri``."""
    unreserved = r"A-Za-z0-9\-._~"
    sub_delims = r"!$&'()*+,;="
    extra = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _UCSCHAR) if iri else ""
    pct = rf"%{_HEX}{{2}}"

    def chars(more: str) -> str:
        return rf"(?:[{unreserved}{extra}{sub_delims}{more}]|{pct})"

    pchar = chars(":@")
    query_extra = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _IPRIVATE) if iri else ""
    query = rf"(?:[{unreserved}{extra}{query_extra}{sub_delims}:@/?]|{pct})*"
    fragment = rf"(?:[{unreserved}{extra}{sub_delims}:@/?]|{pct})*"
    ip_future = rf"v{_HEX}+\.[{unreserved}{sub_delims}:]+"
    literal = "" if iri else rf"\[(?:{IPV6}|{ip_future})\]|"  # the checker's IRI grammar reads IPv6 in part
    host = rf"(?:{literal}{chars('')}*)"
    authority = rf"(?:{chars(':')}*@)?{host}(?::[0-9]*)?"
    segment = f"{pchar}*"
    path_abempty = f"(?:/{segment})*"
    path_absolute = f"/(?:{pchar}+{path_abempty})?"
    path_rootless = f"{pchar}+{path_abempty}"
    path_noscheme = f"{chars('@')}+{path_abempty}"
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    scheme = r"[A-Za-z][A-Za-z0-9+\-.]*"
    absolute = rf"{scheme}:(?://{authority}{path_abempty}|{path_absolute}|{path_rootless}|){tail}"
    relative = rf"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme}|){tail}"
    return absolute, f"(?:{absolute}|{relative})"


URI, URI_REFERENCE = _uri(iri=False)
IRI, IRI_REFERENCE = _uri(iri=True)

JSON_POINTER = r"(?:/(?:[^/~]|~[01])*)*"
RELATIVE_JSON_POINTER = rf"(?:0|[1-9][1-9]*0?)(?:#|{JSON_POINTER})"

# RFC 6570
_VARSPEC = rf"[A-Za-z0-9_](?:\.?(?:%{_HEX}{{2}}\.?)*[A-Za-z0-9_])*(?::[1-9][0-9]{{0,2}}|\*)?"
_LITERAL = char_class(
    [(0x21, 0x21), (0x23, 0x24), (0x26, 0x26), (0x28, 0x3B), (0x3D, 0x3D), (0x3F, 0x5B), (0x5D, 0x5D),
     (0x5F, 0x5F), (0x61, 0x7A), (0x7E, 0x7E), *_UCSCHAR, *_IPRIVATE, (0x10000, 0x1FFFD), (0x20000, 0x2FFFD),
     (0x30000, 0x3FFFD), (0x40000, 0x4FFFD), (0x50000, 0x5FFFD), (0x60000, 0x6FFFD), (0x70000, 0x7FFFD),
     (0x80000, 0x8FFFD), (0x90000, 0x9FFFD), (0xA0000, 0xAFFFD), (0xB0000, 0xBFFFD), (0xC0000, 0xCFFFD),
     (0xD0000, 0xDFFFD), (0xE1000, 0xEFFFD), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]
)  # fmt: skip
URI_TEMPLATE = rf"(?:{_LITERAL}|%{_HEX}{{2}}|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"

FORMATS = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "duration": DURATION,
    "email": EMAIL,
    "idn-email": IDN_EMAIL,
    "hostname": HOSTNAME,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "iri": IRI,
    "iri-reference": IRI_REFERENCE,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
    "uri-template": URI_TEMPLATE,
}
# Where a regex above is a subset of what its format (or the checker) allows: a regex over
# every string on which it may be wrong. A value that must fail the format (not, oneOf, ...)
# is never one of these (json_schema_rules._universe), so that its verdict is exact.
_LAST_NEWLINE = r"(?s:.*\n)"  # checkers that match "^...$" also take a string with a final newline
_HAS_BRACKET = r"(?s:.*\[.*)"  # IP literals in URIs (see the module's docstring)
UNDECIDED = {
    "date": r"0000-.*",  # year 0000
    "time": rf"[0-9]{{2}}:[0-9]{{2}}:60.*|{_LAST_NEWLINE}",  # leap seconds
    "date-time": rf"0000-.*|.*[Tt][0-9]{{2}}:[0-9]{{2}}:60.*|{_LAST_NEWLINE}",
    # 4 labels or more, A-labels, a trailing dot; the checker reads Unicode case and digits
    "hostname": rf"(?:[^.]*\.){{3}}.*|(?:.*\.)?[^.]{{2}}--.*|.*\.|{_LAST_NEWLINE}|(?s:.*[^\x00-\x7f].*)",
    "email": r"(?s:.*@.*)",  # the checker asks for an "@" only
    "idn-email": r"(?s:.*@.*)",  # so does this one; and U-label domains are left out
    "duration": r"(?s:.*[Pp].*)",  # the checker reads ISO 8601 durations: fractions, signs, weeks with days...
    "uuid": r"(?s:.{8}-.{4}-.{4}-.{4}-.*)",  # the checker strips braces, "urn:", hyphens, and reads int(x, 16)
    "relative-json-pointer": r"(?s:[0-9+\-\x80-\U0010ffff].*)",  # the checker's digits are str.isdigit()
    "uri-template": r"(?s:.*(?:[{%}]|[^" + _LITERAL[1:] + ").*)",  # the checker reads literals unchecked
    "uri": rf"{_HAS_BRACKET}|{_LAST_NEWLINE}",
    "uri-reference": rf"{_HAS_BRACKET}|{_LAST_NEWLINE}",
    "iri": rf"(?s:.*[\U00010000-\U0010FFFF].*)|{_HAS_BRACKET}",  # outside the Basic Multilingual Plane
    "iri-reference": rf"(?s:.*[\U00010000-\U0010FFFF].*)|{_HAS_BRACKET}",
}
_NOT_REGULAR = {
    "regex": ("the language of ECMA-262 regular expressions is not regular (nested parentheses): grammar rules "
              "take it, on its own only (no minLength, maxLength, pattern, enum or const beside it, unless they "
              "only allow regular expressions without syntax but '.', '^' and '$')"),
    "idn-hostname": "IDNA2008's rules (contextual code points, bidi) are not supported",
}


_COUNTED = {"email": 128, "idn-email": 100}  # the longest maxLength counted exactly (see sizes)


def sizes(name: str, max_length: int) -> str | None:
    """A regex that the strings of format ``name`` must match too so that none
    is longer than ``max_length`` code points, where counting them would cost
    too many states; else None. An email's count takes some 4,000 states at
    maxLength 128 and more than the 20,000 allowed from 140 on (an
    idn-email's, whose local part may hold any character, from 105 on), so
    past _COUNTED its local part and domain meet RFC 5321's size limits
    instead, in code points, the domain's shortened to fit. ("@" is left out
    of quoted local parts: with one, where the domain starts would stay open
    to the end of the local part, and the sizes would cost states per pair
    of lengths.)"""
    if name not in _COUNTED or max_length <= _COUNTED[name]:
        return None
    domain = min(255, max_length - 65)
    local = r"\x20-\x3f\x41-\x7e" + (_NON_ASCII if name == "idn-email" else "")
    return rf"[{local}]{{1,64}}@[\x20-\x3f\x41-\x7e]{{1,{domain}}}"


def regex(name: str) -> str:
    """The regex (Python syntax, code points) of the strings of format ``name``."""
    if name in FORMATS:
        return FORMATS[name]
    if name in _NOT_REGULAR:
        raise ConstrainedError(f"format {name!r} cannot be enforced: {_NOT_REGULAR[name]}")
    raise ConstrainedError(f"unknown format {name!r}; the supported formats are: {', '.join(sorted(FORMATS))}")
