"""Grammar-constrained decoding for MLX: the output provably follows a regular
expression, a Lark grammar or a JSON Schema."""

from . import models
from .constraint import Constraint, choice, regex
from .errors import ConstrainedError
from .generate import generate, stream_generate
from .grammar import Grammar, grammar
from .json_schema import json, json_schema
from .matcher import Matcher
from .processor import LogitsProcessor
from .vocab import Vocabulary, vocabulary

__all__ = [
    "Constraint",
    "ConstrainedError",
    "Grammar",
    "LogitsProcessor",
    "Matcher",
    "Vocabulary",
    "choice",
    "generate",
    "grammar",
    "json",
    "json_schema",
    "models",
    "regex",
    "stream_generate",
    "vocabulary",
]
