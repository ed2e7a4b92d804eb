"""Errors caused by the user's input or setup. The CLI prints them as one line and exits 2."""

from __future__ import annotations

from taxonomy.analysis.verdicts import VerdictError
from taxonomy.config import ConfigError
from taxonomy.corpus import CorpusError
from taxonomy.llm.base import PermanentError, TransientError
from taxonomy.llm.providers import ProviderError
from taxonomy.run import RunError
from taxonomy.taxonomy_io import TaxonomyError

# GuidanceError and DistillError subclass RunError. A TransientError here means the retries ran out.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    CorpusError,
    PermanentError,
    ProviderError,
    RunError,
    TaxonomyError,
    TransientError,
    VerdictError,
)
