"""JSON Schema-constrained generation with a real model (SmolLM2-135M-Instruct):
for 20 schemas of the kinds users send (tool-call arguments, records with
formats and bounds, nested and recursive objects, unions, nullable fields),
greedy and sampled, the model ends its output with EOS before max_tokens,
every token it took was allowed where it came, and jsonschema's Draft 2020-12
validator, checking formats, accepts the output.

The model runs on the CPU at a few tokens a second (prompt tokens barely
faster), so the prompts share a prefix (instructions and one example exchange)
whose KV cache is computed once, and free-text strings have a maxLength, as
they would in a real schema, so that a rambling model is made to stop."""

import json

import mlx.core as mx
import pytest
from jsonschema import Draft202012Validator
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache
from mlx_lm.sample_utils import make_sampler

import constrained

from conftest import chat, generated_text

SYSTEM = "Answer with one line of JSON only."
EXAMPLE = ("Book a table for 4 at Chez Marie at 19:30.", '{"restaurant": "Chez Marie", "party_size": 4, "time": "19:30"}')


def string(max_length=40, **more):
    return {"type": "string", "maxLength": max_length, **more}


def closed(properties, required=None):
    """An object with exactly ``properties``, all required unless said otherwise."""
    return {"type": "object", "properties": properties, "required": list(properties) if required is None else required,
            "additionalProperties": False}


# No maxLength: json_schema refuses an email format with a maxLength above about 30 as too complex.
EMAIL = {"type": "string", "format": "email"}

# name -> (schema, the request, max_tokens).
CASES = {
    "get_weather": (
        closed({"location": string(description="City and country"),
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}),
        "What is the weather in Paris, France, in celsius?", 30),
    "web_search": (
        closed({"query": string(), "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
                "safe_search": {"type": "boolean"}}, required=["query"]),
        "Search the web for the five best pizza places in Naples.", 40),
    "send_email": (
        closed({"to": EMAIL, "cc": {"type": "array", "items": EMAIL, "maxItems": 3}, "subject": string(),
                "body": string(60)}, required=["to", "subject", "body"]),
        "Email alice@example.com that the meeting moved to 3 pm.", 80),
    "calendar_event": (
        closed({"title": string(), "start": {"type": "string", "format": "date-time"},
                "end": {"type": "string", "format": "date-time"},
                "attendees": {"type": "array", "items": EMAIL, "maxItems": 3}}, required=["title", "start", "end"]),
        "Schedule a project review on 2024-06-12 from 10:00 to 11:00 UTC with bob@example.com.", 130),
    "product": (
        closed({"name": string(30), "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
                "category": {"enum": ["electronics", "books", "clothing", "home", "toys"]},
                "tags": {"type": "array", "items": {"enum": ["new", "sale", "popular", "eco", "limited"]},
                         "maxItems": 3, "uniqueItems": True},
                "in_stock": {"type": "boolean"}}),
        "Describe a wireless mouse sold for 24.99 dollars.", 90),
    "person": (
        closed({"name": string(), "email": EMAIL, "age": {"type": "integer", "minimum": 0, "maximum": 130},
                "address": closed({"street": string(), "city": string(30),
                                   "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                                   "country": {"enum": ["US", "CA", "MX"]}})},
               required=["name", "address"]),
        "John Smith, 42, john@example.com, lives at 12 Oak Street, Springfield, 62704, US.", 100),
    "directory_tree": (
        {"$ref": "#/$defs/entry", "$defs": {"entry": closed({
            "name": string(30), "kind": {"enum": ["file", "directory"]},
            "children": {"type": "array", "items": {"$ref": "#/$defs/entry"}, "maxItems": 3}},
            required=["name", "kind"])}},
        "A file tree: the directory src holds the files main.py and utils.py.", 60),
    "comment_thread": (
        {"$defs": {"comment": closed({
            "author": string(20), "text": string(40),
            "replies": {"type": "array", "items": {"$ref": "#/$defs/comment"}, "maxItems": 2}},
            required=["author", "text"])},
         "$ref": "#/$defs/comment"},
        "Ann wrote 'Great post!' and Bob replied 'Thanks Ann'.", 120),
    "payment_anyof": (
        {"anyOf": [
            closed({"method": {"const": "card"}, "number": {"type": "string", "pattern": "^[0-9]{16}$"},
                    "expiry": {"type": "string", "pattern": "^(0[1-9]|1[0-2])/[0-9]{2}$"}}),
            closed({"method": {"const": "paypal"}, "email": EMAIL}),
            closed({"method": {"const": "bank_transfer"},
                    "iban": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$"}})]},
        "Pay with my PayPal account jane@example.com.", 40),
    "shape_oneof": (
        {"oneOf": [
            closed({"kind": {"const": "circle"}, "radius": {"type": "number", "exclusiveMinimum": 0}}),
            closed({"kind": {"const": "rectangle"}, "width": {"type": "number", "exclusiveMinimum": 0},
                    "height": {"type": "number", "exclusiveMinimum": 0}})]},
        "A rectangle 3 wide and 4 high.", 40),
    "nullable_profile": (
        closed({"username": {"type": "string", "pattern": "^[a-z0-9_]{3,16}$"},
                "display_name": {"type": ["string", "null"], "maxLength": 40},
                "age": {"type": ["integer", "null"], "minimum": 13, "maximum": 120},
                "phone": {"type": ["string", "null"], "pattern": "^\\+[0-9]{7,15}$"}}),
        "Profile of jdoe_88, aged 29, phone +15551234567, display_name null.", 70),
    "review": (
        closed({"rating": {"type": "integer", "minimum": 1, "maximum": 5}, "would_recommend": {"type": "boolean"},
                "pros": {"type": "array", "items": string(30), "maxItems": 2},
                "summary": string(60)}),
        "Review the headphones (rating, would_recommend, pros, summary): great sound, weak battery, 4 stars.", 80),
    "blog_tags": (  # greedy, the model writes "History of Paris" twice unless the matcher keeps the items distinct
        closed({"title": string(60), "tags": {"type": "array", "items": {"type": "string", "minLength": 1},
                                              "minItems": 3, "maxItems": 4, "uniqueItems": True}}),
        "Give a blog post about the history of Paris a title and tags.", 80),
    "book": (
        closed({"title": string(60), "author": string(), "year": {"type": "integer", "minimum": 1450, "maximum": 2025},
                "isbn": {"type": "string", "pattern": "^97[89][0-9]{10}$"},
                "genres": {"type": "array", "items": {"enum": ["fiction", "science", "history", "fantasy"]},
                           "minItems": 1, "maxItems": 2}}, required=["title", "author", "year"]),
        "The Hobbit by J. R. R. Tolkien, 1937, a fantasy novel.", 70),
    "order": (
        closed({"order_id": {"type": "string", "format": "uuid"},
                "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": closed({
                    "product": string(30), "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
                    "unit_price": {"type": "number", "minimum": 0, "multipleOf": 0.01}})},
                "currency": {"enum": ["USD", "EUR", "GBP"]}}),
        "Order 2 notebooks at 3.50 each, currency USD.", 130),
    "sentiment": (
        closed({"sentiment": {"enum": ["positive", "negative", "neutral"]},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
        "The sentiment of 'I love this phone, best purchase ever.' and your confidence.", 30),
    "entities": (
        closed({"entities": {"type": "array", "maxItems": 4, "items": closed({
            "text": string(30), "type": {"enum": ["PERSON", "ORGANIZATION", "LOCATION", "DATE"]}})}}),
        "The named entities in 'Tim Cook visited Berlin.'", 60),
    "server_config": (
        closed({"hostname": {"type": "string", "format": "hostname"},
                "ip": {"type": "string", "format": "ipv4"},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "tls": {"type": "boolean"}, "timeout_seconds": {"type": "number", "minimum": 0, "maximum": 300}}),
        "Server config: hostname api.example.com, ip 10.0.0.5, port 443, tls on, timeout_seconds 30.", 70),
    "flight_search": (
        closed({"origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "departure_date": {"type": "string", "format": "date"},
                "return_date": {"type": ["string", "null"], "format": "date"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
                "cabin": {"enum": ["economy", "premium_economy", "business", "first"]}},
               required=["origin", "destination", "departure_date", "passengers"]),
        "One-way flight from JFK to LHR on 2024-09-01 for 2 people in economy.", 80),
    "todo_list": (
        {"type": "array", "maxItems": 4, "items": closed({
            "task": string(50), "done": {"type": "boolean"}, "priority": {"enum": ["low", "medium", "high"]},
            "due": {"type": ["string", "null"], "format": "date"}}, required=["task", "done", "priority"])},
        "My todo list: buy milk (high priority), call mom (done), fix the bike by 2024-05-01.", 100),
    "tool_call": (
        {"oneOf": [
            closed({"name": {"const": "get_stock_price"},
                    "arguments": closed({"ticker": {"type": "string", "pattern": "^[A-Z]{1,5}$"}})}),
            closed({"name": {"const": "convert_currency"},
                    "arguments": closed({"amount": {"type": "number", "exclusiveMinimum": 0},
                                         "from": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                         "to": {"type": "string", "pattern": "^[A-Z]{3}$"}})})]},
        "Call convert_currency to convert 100 EUR to USD.", 50),
}
SAMPLED = {"product", "todo_list"}  # at temperature 1 with a fixed seed; the others greedy


@pytest.fixture(scope="module")
def primed(smollm2):
    return prime(*smollm2)


def prime(model, tokenizer):
    """(model, tokenizer, the KV cache after the prompt prefix all cases share, that prefix's tokens)."""
    prefix = shared_prefix(tokenizer)
    cache = make_prompt_cache(model)
    model(mx.array([prefix]), cache=cache)
    mx.eval([c.state for c in cache])
    return model, tokenizer, cache, prefix


def shared_prefix(tokenizer) -> list[int]:
    """The tokens every case's prompt starts with: the chat up to the last question."""
    one, other = (tokenizer.encode(chat(tokenizer, q, SYSTEM, [EXAMPLE])) for q in ("A", "B"))
    common = next(i for i, (a, b) in enumerate(zip(one, other)) if a != b)
    return one[:common]


@pytest.mark.parametrize("name", CASES)
def test_output_is_valid_and_complete(primed, name):
    schema, question, max_tokens = CASES[name]
    text = generate(primed, constrained.json_schema(schema), question, max_tokens, sampled=name in SAMPLED)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    instance = json.loads(text)
    assert validator.is_valid(instance), (text, [e.message for e in validator.iter_errors(instance)])


def test_caps_bound_free_text(primed):
    """A schema with no maxLength or maxItems: the caps cut what the model writes
    (uncapped, it answers {"title": "The City of Light: Paris", "tags": ["History", "Paris"]})."""
    schema = {"type": "object", "properties": {"title": {"type": "string"},
                                               "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["title", "tags"], "additionalProperties": False}
    constraint = constrained.json_schema(schema, max_string_length=12, max_items=1)
    text = generate(primed, constraint, "Give a blog post about the history of Paris a title and tags.", 60)
    instance = json.loads(text)
    assert Draft202012Validator(schema).is_valid(instance), text
    assert len(instance["title"]) <= 12 and len(instance["tags"]) <= 1, text
    assert all(len(tag) <= 12 for tag in instance["tags"]), text


def generate(primed, constraint, question: str, max_tokens: int, sampled: bool = False) -> str:
    """The text the model writes under ``constraint`` for ``question``, checked by generated_text."""
    model, tokenizer, cache, prefix = primed
    prompt = tokenizer.encode(chat(tokenizer, question, SYSTEM, [EXAMPLE]))
    assert prompt[:len(prefix)] == prefix
    mx.random.seed(0)
    sampler = make_sampler(temp=1.0 if sampled else 0.0, top_p=0.9)
    try:
        responses = list(constrained.stream_generate(model, tokenizer, prompt[len(prefix):], constraint,
                                                     prompt_cache=cache, max_tokens=max_tokens, sampler=sampler))
    finally:
        trim_prompt_cache(cache, cache[0].offset - len(prefix))
    return generated_text(constraint, tokenizer, responses, max_tokens)
