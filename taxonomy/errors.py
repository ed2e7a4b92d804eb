"""Errors caused by the user's input or setup. The CLI prints them as one line and exits 2."""
from __future__ import annotations

from taxonomy.config import ConfigError
from taxonomy.corpus import CorpusError
from taxonomy.llm.base import PermanentError
from taxonomy.llm.providers import ProviderError
from taxonomy.run import RunError
from taxonomy.taxonomy_io import TaxonomyError

USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, CorpusError, PermanentError, ProviderError, RunError, TaxonomyError)
try:
    from taxonomy.analysis.verdicts import VerdictError

    USER_ERRORS += (VerdictError,)
except ImportError:  # pragma: no cover - analysis is optional while it is being built
    pass
