"""Grammar-constrained generation with a real model (SmolLM2-135M-Instruct):
under the shipped JSON, SQL, arithmetic and Python-call grammars, greedy and
sampled, the model ends its output with EOS well before max_tokens, every token
it took was allowed where it came, and lark parses the text."""

import mlx.core as mx
import pytest
from mlx_lm.sample_utils import make_sampler

import constrained

from conftest import chat, compiled, generated_text

# grammar -> (system message, an example exchange, the question, max_tokens).
# A model this small follows the answer format it is shown.
CASES = {
    "json": (
        "Answer with a JSON object only.",
        ("The novel Dune: its title, author and year.", '{"title": "Dune", "author": "Frank Herbert", "year": 1965}'),
        "The novel 1984: its title, author and year.",
        40,
    ),
    "sql": (
        "Answer with one SQL query only.",
        ("The titles of the books published after 2000, from the table books.", "SELECT title FROM books WHERE year > 2000"),
        "The names of the users who live in Paris, from the table users.",
        40,
    ),
    "arithmetic": (
        "Answer with an arithmetic expression only.",
        ("The cost of 4 pens at 1.5 dollars each.", "4 * 1.5"),
        "The cost of 3 apples at 0.5 dollars each and 2 pears at 0.75 dollars each.",
        30,
    ),
    "python_call": (
        "You call tools by answering with a Python call only. Tools: get_weather(city, unit), search(query, limit).",
        ("What is the weather in London, in fahrenheit?", 'get_weather(city="London", unit="fahrenheit")'),
        "What is the weather in Paris, in celsius?",
        40,
    ),
}


@pytest.mark.parametrize("temp", [0.0, 1.0])
@pytest.mark.parametrize("name", list(CASES))
def test_generation_is_complete_and_parses(smollm2, name, temp):
    model, tokenizer = smollm2
    system, example, question, max_tokens = CASES[name]
    g = compiled(name)
    mx.random.seed(0)
    responses = list(
        constrained.stream_generate(
            model, tokenizer, chat(tokenizer, question, system, [example]), g,
            max_tokens=max_tokens, sampler=make_sampler(temp=temp, top_p=0.9),
        )
    )
    text = generated_text(g, tokenizer, responses, max_tokens)
    assert g.matches(text), text
