"""Constrained generation from the command line:

    python -m constrained --regex "[0-9]{4}-[0-9]{2}-[0-9]{2}" --prompt "When did Apollo 11 land?"
    python -m constrained --schema person.json --max-string-length 40 --prompt "Describe Ada Lovelace."

The model is SmolLM2-135M-Instruct (fetched on first use) unless --model names an
mlx-lm model path.
"""

import argparse
import sys
import time

from mlx_lm.sample_utils import make_sampler

import constrained


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m constrained", description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--regex", help="the output must fully match this regular expression")
    what.add_argument("--choice", nargs="+", help="the output must be one of these strings")
    what.add_argument("--schema", help="the output must be JSON valid under this JSON Schema (JSON text or a file)")
    what.add_argument("--json", action="store_true", help="the output must be a JSON value")
    what.add_argument("--grammar", help="the output must be a sentence of this Lark grammar (text or a .lark file)")
    parser.add_argument("--max-string-length", type=int, help="with --schema or --json: the longest string value")
    parser.add_argument("--max-items", type=int, help="with --schema or --json: the longest array")
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument("--model", default="smollm2", help="'smollm2' or a path / name for mlx_lm.load")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temp", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    args = parser.parse_args(argv)
    if (args.max_string_length is not None or args.max_items is not None) and args.schema is None and not args.json:
        parser.error("--max-string-length and --max-items go with --schema or --json")

    try:
        constraint = _constraint(args)
    except constrained.ConstrainedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.model == "smollm2":
        model, tokenizer = constrained.models.smollm2()
    else:
        import mlx_lm

        model, tokenizer = mlx_lm.load(args.model)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": args.prompt}], add_generation_prompt=True, tokenize=False
    )
    start = time.perf_counter()
    text = constrained.generate(
        model, tokenizer, prompt, constraint,
        max_tokens=args.max_tokens, sampler=make_sampler(temp=args.temp, top_p=args.top_p),
    )
    elapsed = time.perf_counter() - start
    print(text)
    print(f"[{constraint.description}; matches: {constraint.matches(text)}; {elapsed:.1f} s]", file=sys.stderr)
    return 0 if constraint.matches(text) else 1


def _constraint(args):
    caps = {"max_string_length": args.max_string_length, "max_items": args.max_items}
    if args.regex is not None:
        return constrained.regex(args.regex)
    if args.choice:
        return constrained.choice(args.choice)
    if args.schema is not None:
        return constrained.json_schema(args.schema, **caps)
    if args.json:
        return constrained.json(**caps)
    return constrained.grammar(args.grammar)


if __name__ == "__main__":
    sys.exit(main())
