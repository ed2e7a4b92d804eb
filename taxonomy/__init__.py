"""rubric-taxonomy: induce a verifier-capability taxonomy from a rubric corpus and use it.

    import taxonomy

    run = taxonomy.fit("data/example/rubric.csv", provider="offline")   # or a polars frame, or a pipeline TOML
    run.taxonomy, run.tags, run.path, run.backend                     # the model, a polars frame, the run folder
    taxonomy.tag(new_criteria, run)      # tag other criteria against the frozen taxonomy
    taxonomy.audit(new_corpus, run)      # a new corpus's coverage against it
    taxonomy.lint_rubric("rubric.csv")   # defective criteria, one row per finding
    taxonomy.load("outputs/rubric/offline")
    taxonomy.read_corpus("pipelines/devai.toml")   # the criteria as a run reads them, a polars frame

The names are loaded on first use (PEP 562), so `import taxonomy` and the `taxonomy` command's startup stay cheap:
polars and scikit-learn are imported only when a function is called. Linting is `lint_rubric`, because
`taxonomy.lint` is the linter's package."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; type checkers read it the same way
if TYPE_CHECKING:  # for type checkers and editors; at run time the names come from __getattr__
    from taxonomy.api import Result, audit, breakdown, fit, lint_rubric, load, read_corpus, report, tag

__all__ = ["Result", "audit", "breakdown", "fit", "lint_rubric", "load", "read_corpus", "report", "tag"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from taxonomy import api  # lazy: see above; api.py loads polars, scikit-learn and the pipeline

        return getattr(api, name)
    raise AttributeError(f"module 'taxonomy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
