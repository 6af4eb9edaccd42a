class ConstrainedError(ValueError):
    """Every error this package raises on bad input: a pattern, grammar, schema,
    tokenizer or token it cannot use. The message says what to change."""
