"""The command line (python -m constrained) on the real model: a JSON Schema
with caps, a shipped grammar, and the errors for bad input."""

import json

import pytest
from jsonschema import Draft202012Validator
from lark import Lark

from constrained.__main__ import main
from conftest import GRAMMARS

PERSON = {"type": "object", "properties": {"name": {"type": "string"},
                                           "languages": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "languages"], "additionalProperties": False}


def test_schema_with_caps(tmp_path, capsys):
    path = tmp_path / "person.json"
    path.write_text(json.dumps(PERSON))
    code = main(["--schema", str(path), "--max-string-length", "12", "--max-items", "2", "--max-tokens", "60",
                 "--prompt", "Name a programmer and the languages she used, as JSON."])
    out = capsys.readouterr().out
    instance = json.loads(out)
    assert code == 0 and Draft202012Validator(PERSON).is_valid(instance), out
    assert len(instance["name"]) <= 12 and len(instance["languages"]) <= 2, out
    assert all(len(language) <= 12 for language in instance["languages"]), out


def test_grammar_file(capsys):
    path = GRAMMARS / "arithmetic.lark"
    code = main(["--grammar", str(path), "--max-tokens", "30", "--prompt", "Write an arithmetic expression that equals 10."])
    out = capsys.readouterr().out
    assert code == 0, out
    Lark(path.read_text(), parser="lalr").parse(out.rstrip("\n"))


def test_bad_input(capsys):
    assert main(["--regex", "(", "--prompt", "x"]) == 2
    assert "error: invalid regular expression" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--regex", "a", "--max-items", "3", "--prompt", "x"])
    assert exit_.value.code == 2
    assert "--max-string-length and --max-items go with --schema or --json" in capsys.readouterr().err
