"""Moved to taxonomy.text (the one tokenizer); kept as an import path for the offline modules."""
from taxonomy.text import corpus_languages, function_words, language_name

__all__ = ["corpus_languages", "function_words", "language_name"]
