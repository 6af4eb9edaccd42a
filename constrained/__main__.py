"""Constrained generation from the command line:

    python -m constrained --regex "[0-9]{4}-[0-9]{2}-[0-9]{2}" --prompt "When did Apollo 11 land?"

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
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument("--model", default="smollm2", help="'smollm2' or a path / name for mlx_lm.load")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temp", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    args = parser.parse_args(argv)

    try:
        constraint = constrained.regex(args.regex) if args.regex else constrained.choice(args.choice)
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


if __name__ == "__main__":
    sys.exit(main())
