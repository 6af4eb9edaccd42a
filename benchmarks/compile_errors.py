"""What a compile error is about, to group the errors of a benchmark's
engines in its results (bench_maskbench.py): kept apart from the runners so
that the tests can check it without the benchmarks' dependencies."""

import re

# Keywords of draft 2020-12 and the older spellings, to name what a compile error is about.
KEYWORDS = set("""
$ref $defs $anchor $dynamicRef $dynamicAnchor $id $schema $vocabulary $recursiveRef $recursiveAnchor definitions
type enum const properties required additionalProperties patternProperties propertyNames minProperties
maxProperties dependentRequired dependentSchemas dependencies unevaluatedProperties items prefixItems
additionalItems unevaluatedItems minItems maxItems contains minContains maxContains uniqueItems minLength
maxLength pattern format minimum maximum exclusiveMinimum exclusiveMaximum multipleOf anyOf oneOf allOf not
if then else contentEncoding contentMediaType contentSchema
""".split())
ENGLISH = {"not", "if", "then", "else", "type", "items", "required", "properties", "contains"}  # named only in quotes

POINTER = r"(?<![\w/])#?/\S*"  # a JSON pointer or URI fragment in a message


def error_keyword(message: str) -> str:
    """What a compile error is about: the first JSON Schema keyword it quotes,
    else the first it names in its head (before the first colon or
    parenthesis: what failed, not the examples or causes after it) outside
    JSON pointers, else its text with quoted parts, pointers and numbers
    blanked out."""
    quoted = re.findall(r"""["'`](\$?\w+)["'`]""", message)
    head = re.sub(POINTER, " ", message).split(":")[0].split("(")[0]
    named = [w for w in re.findall(r"\$?\w+", head) if w not in ENGLISH]
    for word in quoted + named:
        if word in KEYWORDS:
            return word
    return re.sub(rf"""(["'`]).*?\1|{POINTER}|\d+""", "…", message)[:80]
