"""The grouping of compile errors by what failed (benchmarks/compile_errors.py:
bench_maskbench.py's table of compile errors by keyword)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from compile_errors import error_keyword  # noqa: E402


@pytest.mark.parametrize("message, keyword", [
    ("unsupported keyword 'uniqueItems' at /properties/a: it is only enforced for items that take at most 8 scalar "
     "values (enum, const, boolean) (lenient=True skips it)", "uniqueItems"),
    ("unsupported keyword 'maxLength/format' at /properties/email: a string with minLength 0, maxLength 1024, "
     "pattern None and format 'email' is too complex", "maxLength"),
    ('Unimplemented keys: ["not"]', "not"),
    ("oneOf constraints are not supported. Enable 'coerce_one_of' option to approximate oneOf with anyOf", "oneOf"),
    ("Unknown format: source-category", "format"),
])
def test_a_compile_error_is_filed_under_the_keyword_it_is_about(message, keyword):
    assert error_keyword(message) == keyword


@pytest.mark.parametrize("head, rest", [
    ("no JSON value satisfies the schema", ": its constraints contradict each other (for example a required property "
     "whose schema nothing satisfies, minimum above maximum, or disjoint allOf branches)"),
    ("the schema is too complex to compile", ": its grammar needs over 60000 rules (many combined object schemas, or "
     "large counts such as maxItems)"),
    ("the scalar values allowed at", " /not (its type, string, number, enum and combinator keywords together) are too "
     "complex to compile"),
])
def test_keywords_named_as_examples_or_causes_do_not_file_an_error(head, rest):
    """A keyword after the head of the message (an example, a cause) is not
    what failed: such errors are filed under their own text, numbers and
    pointers blanked, so that alike ones group together."""
    found = error_keyword(head + rest)
    assert found == error_keyword(head + rest.replace("60000", "70000").replace("/not", "/a/not"))
    assert found.startswith(head)
