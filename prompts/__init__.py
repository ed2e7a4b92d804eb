"""The Jinja2 templates of every LLM call. A package only so that a wheel carries them: pyproject.toml
ships this folder as `taxonomy_prompts`, and taxonomy/prompts.py finds it by that name."""
