"""PipelineConfig: one TOML per corpus in pipelines/. Every knob has a default.

The numbers the paper fixes (80 micro-clusters, 8-10 capabilities, 40% / 2% shares,
1-3 labels, 4-8 words) live here as defaults, never as literals in the stages.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from taxonomy.corpus import CorpusConfig
from taxonomy.corpus.config import corpus_stem
from taxonomy.corpus.jsonio import decode


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ordered(Section):
    """A section whose ORDERED pairs of keys must read low <= high: settings that contradict each other are
    refused, naming both keys."""

    ORDERED: ClassVar[tuple[tuple[str, str], ...]] = ()

    @model_validator(mode="after")
    def _ordered(self):
        for low, high in self.ORDERED:
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"{low} = {getattr(self, low)} is above {high} = {getattr(self, high)}; make {low} <= {high}"
                )
        return self


class Prices(Section):
    """USD per million tokens; used only for the cost summary."""

    input: float = 0.50
    output: float = 3.00
    embedding: float = 0.15
    # The Batch API's price; unset means half the online price, as Gemini charges.
    batch_input: float | None = None
    batch_output: float | None = None
    # Prompt tokens served from a context cache (Gemini's implicit caching, or an explicit cache);
    # unset means a tenth of the input price, as Gemini charges.
    cached_input: float | None = None
    # An explicit cache's storage, USD per million tokens per hour it is kept.
    cache_storage: float = 1.00

    def batch(self) -> tuple[float, float]:
        return (
            self.input / 2 if self.batch_input is None else self.batch_input,
            self.output / 2 if self.batch_output is None else self.batch_output,
        )

    def cached(self) -> float:
        return self.input / 10 if self.cached_input is None else self.cached_input

    def cost(self, usage) -> float:
        """USD for a usage mapping (the runner's Usage fields, or the run ledger's totals): prompt tokens
        include the cached ones, which are charged at the cached price (half of it in batch mode)."""
        g = lambda key: float(usage.get(key, 0) or 0)  # noqa: E731
        batch_in, batch_out = self.batch()
        cached_batch = g("batch_cached_prompt_tokens")
        cached_online = g("cached_prompt_tokens") - cached_batch
        online_in = g("prompt_tokens") - g("batch_prompt_tokens") - cached_online
        online_out = g("output_tokens") - g("batch_output_tokens")
        return (
            online_in * self.input
            + online_out * self.output
            + cached_online * self.cached()
            + (g("batch_prompt_tokens") - cached_batch) * batch_in
            + g("batch_output_tokens") * batch_out
            + cached_batch * self.cached() / 2
            + g("embed_tokens") * self.embedding
            + g("cache_tokens") * self.input
            + g("cache_token_seconds") / 3600 * self.cache_storage
        ) / 1e6


class BatchConfig(Section):
    """llm.mode = "batch": the Gemini Batch API (half price, no per-minute limits, hours of latency)."""

    # Jobs whose requests fit in this many MB go inline; larger ones are uploaded as a JSONL file.
    inline_max_mb: float = Field(20.0, gt=0)
    # Re-asks and retries of fewer items than this go online instead of waiting on another job.
    online_below: int = Field(50, ge=0)
    poll_s: float = Field(30.0, gt=0)


class ContextCacheConfig(Section):
    """Explicit context caches (Gemini's `client.caches`) for a stage's shared prompt prefix. One is made
    only when the prefix is long enough for the API to accept it and the stage sends it often enough
    that the cached price saves more than creating and storing the cache costs."""

    enabled: bool = True
    # Gemini refuses smaller caches (1,024 tokens on Flash models, 4,096 on some Pro models).
    min_tokens: int = Field(1024, ge=1)
    # A cache outlives a crashed run by at most this long; a finished stage deletes its cache at once.
    ttl_s: int = Field(3600, ge=60)


class LLMConfig(Section):
    provider: Literal["auto", "gemini", "vertex", "openai", "offline"] = "auto"
    model: str = "gemini-3-flash-preview"
    # "batch": the Gemini Batch API (`--batch`), see BatchConfig.
    mode: Literal["online", "batch"] = "online"
    batch: BatchConfig = BatchConfig()
    context_cache: ContextCacheConfig = ContextCacheConfig()
    temperature: float = 0.0
    concurrency: int = Field(32, ge=1)
    requests_per_minute: int = Field(1000, ge=1)
    tokens_per_minute: int = Field(4_000_000, ge=1)
    max_retries: int = Field(6, ge=0)
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    timeout_s: float = Field(120.0, gt=0)
    # Retries of a call that got no answer within timeout_s: a silent server is rarely saved by waiting longer.
    timeout_retries: int = Field(1, ge=0)
    reask_attempts: int = Field(2, ge=0)
    # Vertex: fall back to GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION when empty.
    project: str = ""
    location: str = ""
    # OpenAI-compatible servers (vLLM, Ollama, llama.cpp server).
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    prices: Prices = Prices()


class EmbeddingConfig(Section):
    provider: Literal["auto", "gemini", "local", "openai"] = "auto"
    # Gemini API default; on Vertex the paper's text-embedding-005 is used unless set.
    model: str = "gemini-embedding-001"
    vertex_model: str = "text-embedding-005"
    # provider = "openai": a /v1/embeddings server (vLLM, Ollama, llama.cpp); base_url defaults to llm.base_url.
    openai_model: str = ""
    base_url: str = ""
    batch_size: int = Field(100, ge=1)
    # Local embedder: TF-IDF over words and character n-grams, reduced by SVD.
    local_dim: int = Field(256, ge=8)


class LabelRules(Ordered):
    """Stage 1 / Stage 2 label form, shared by every validator and prompt."""

    ORDERED = (("min_labels", "max_labels"), ("min_words", "max_words"))

    min_labels: int = Field(1, ge=1)
    max_labels: int = Field(3, ge=1)
    min_words: int = Field(4, ge=1)
    max_words: int = Field(8, ge=1)
    suffix: str = "_capability"
    rationale_prefix: str = "the verifier needs to"
    agent_verbs: list[str] = [
        "build",
        "construct",
        "produce",
        "create",
        "design",
        "develop",
        "write",
        "draft",
        "generate",
        "populate",
        "deliver",
        "prepare",
        "assemble",
        "compile",
        "render",
        "output",
        "implement",
        "make",
    ]
    forbidden_tokens: list[str] = [
        "excel",
        "xlsx",
        "pptx",
        "pdf",
        "openpyxl",
        "pandas",
        "python",
        "jinja",
        "json",
        "csv",
        "mcp",
        "sec",
        "edgar",
        "sql",
        "api",
        "pytorch",
        "torch",
        "numpy",
        "docx",
        "html",
    ]
    # Forbidden tokens match anywhere inside a word of the name (`pdfs`, `sqlite`), except inside
    # these ordinary English stems that happen to contain one (`section` holds `sec`, `capital` `api`).
    token_safe_stems: list[str] = [
        "section",
        "second",
        "sector",
        "secur",
        "secret",
        "secant",
        "consecut",
        "insect",
        "bisect",
        "persecut",
        "prosecut",
        "capital",
        "capillar",
        "rapid",
        "therapist",
        "apiece",
        "apical",
        "papill",
        "excellen",
        "torchlight",
    ]
    # Generic virtues and vague modifiers: they never make a name specific. A name needs at least
    # `min_specific_words` words outside this list and outside stop words (before the suffix).
    generic_words: list[str] = [
        "quality",
        "good",
        "overall",
        "general",
        "generic",
        "accuracy",
        "accurate",
        "correctness",
        "correct",
        "proper",
        "properly",
        "appropriate",
        "adequate",
        "adequacy",
        "sufficient",
        "basic",
        "various",
        "misc",
        "miscellaneous",
        "holistic",
        "nice",
        "great",
        "excellent",
        "better",
        "best",
        "thorough",
        "careful",
        "everything",
        "anything",
        "stuff",
        "thing",
        "things",
        "broad",
    ]
    min_specific_words: int = 2


class DiscoverConfig(Section):
    batch_size: int = Field(20, ge=1)
    brief_max_chars: int = Field(4000, ge=0)


PAPER_K = 80  # the paper's micro-clusters, for 3,204 criteria
MIN_AUTO_K = 20
LABELS_PER_CLUSTER = 5


class ClusterConfig(Section):
    # What Stage 2a clusters. "criteria": each criterion by its own text, moved by its Stage 1 labels (cut from the
    # text's Ward tree, then each criterion to the nearest cluster by text and labels), so micro-clusters do not
    # follow how one sample of the model worded its labels. "labels": the paper's design, the unique label strings.
    unit: Literal["criteria", "labels"] = "criteria"
    # unit = "criteria": how far a criterion's labels pull it, against its text's weight of 1.
    label_weight: float = Field(0.3, ge=0)
    # "auto": scaled with the unique labels (k_for); a number is the user's own k, used as given.
    k: int | Literal["auto"] = "auto"
    linkage: Literal["ward", "average", "complete", "single"] = "ward"
    metric: Literal["euclidean", "cosine"] = "euclidean"
    # Above this many unique labels, cluster mini-batch k-means centroids instead.
    exact_max: int = Field(12_000, ge=10)
    centroids: int = Field(3_000, ge=10)
    seed: int = 0

    @field_validator("k")
    @classmethod
    def _two_or_more(cls, k):
        if isinstance(k, int) and k < 2:
            raise ValueError(f'k = {k} is below 2; use a number of micro-clusters of at least 2, or "auto"')
        return k

    def k_for(self, unique_labels: int, scaled: bool = True) -> tuple[int, str]:
        """The k a run uses and why, in words for the cluster stage's line and the estimate.

        The paper's 80 micro-clusters are for thousands of unique labels (3,204 criteria). A small corpus
        clustered into 80 gets clusters of one or two labels: the naming model has no shared check to see
        in them, and naming becomes most of the run's calls. So "auto" aims at LABELS_PER_CLUSTER labels a
        cluster, never fewer than twice the paper's 10 capabilities (the merge needs more than it forms)
        and never more than the paper's 80. `scaled=False` (labels that are already kinds of check, as the
        offline backend's are) keeps the paper's 80."""
        if self.k != "auto":
            if self.k > unique_labels:
                return unique_labels, (
                    f"k = {unique_labels}, not the pipeline config's cluster.k = {self.k}: "
                    f"Stage 1 gave only {unique_labels} unique labels, and a cluster holds one at least"
                )
            return self.k, f"k = {self.k}: cluster.k = {self.k} in the pipeline config"
        if not scaled:
            k = min(PAPER_K, unique_labels)
            why = (
                f"the paper's {PAPER_K}"
                if k == PAPER_K
                else f"one per label: {unique_labels} labels, under the paper's {PAPER_K}"
            )
            return k, f'k = {k}: {why} (cluster.k = "auto")'
        k = min(PAPER_K, max(MIN_AUTO_K, round(unique_labels / LABELS_PER_CLUSTER)), unique_labels)
        return k, (
            f"k = {k}: scaled with {unique_labels} unique labels, about {LABELS_PER_CLUSTER} a cluster, "
            f'between {MIN_AUTO_K} and the paper\'s {PAPER_K} (cluster.k = "auto"; set cluster.k to choose)'
        )


class CanonicalizeConfig(Section):
    max_members: int = Field(40, ge=1)
    examples: int = Field(5, ge=0)


class MergeConfig(Ordered):
    ORDERED = (("min_caps", "max_caps"), ("min_share", "max_share"))
    min_caps: int = Field(8, ge=1)
    max_caps: int = Field(10, ge=1)
    max_share: float = Field(0.40, gt=0, le=1)
    min_share: float = Field(0.02, ge=0, lt=1)
    # Not read: boundaries go to each capability's nearest siblings by rank (merge/siblings.py), not to pairs
    # above a cosine cut-off. Kept so configs and run manifests that set it still load, and recorded runs keep
    # their merge fingerprint (it hashes the whole section).
    confusable_similarity: float = Field(0.80, ge=-1, le=1)
    # A taxonomy that still breaks a hard constraint after repair fails the run unless this is
    # true (`--accept-violations`); then it is kept with its violations listed.
    accept_violations: bool = False


class TagConfig(Ordered):
    ORDERED = (("min_tags", "max_tags"),)
    batch_size: int = Field(20, ge=1)
    min_tags: int = Field(1, ge=1)
    max_tags: int = Field(3, ge=1)
    # After Stage 3, a capability pair co-tagged on at least this share of the tagged criteria with
    # no boundary between them is reported (each capability's most co-tagged sibling only).
    cotag_min_share: float = Field(0.01, ge=0, le=1)


class AuditConfig(Section):
    # Criteria whose best capability fits below this score are listed as "none of the above".
    none_threshold: float = Field(0.15, ge=0, le=1)
    # A criterion fits no capability when its wording is rarer in the run's corpus than in all but this share of
    # the run's own criteria held out from the fit (offline/novelty.py): about this share of a corpus's own
    # new criteria are flagged, most of a foreign corpus's.
    none_alpha: float = Field(0.1, gt=0, lt=1)
    # A capability present in at least this share of tasks is expected in every task.
    missing_share: float = Field(0.5, gt=0, le=1)
    duplicate_similarity: float = Field(0.9, gt=0, le=1)


class ExportConfig(Section):
    """`taxonomy export`: what the exported graders are set to."""

    # vally prompt graders: pass threshold of the binary score (normalised to 0-1).
    threshold: float = Field(0.5, ge=0, le=1)
    # The judge: vally's grader `model` when set (else vally's own default); OpenJudge's model (else llm.model).
    judge_model: str = ""
    # A vally grader prompt longer than this is split into several graders of the same capability.
    max_prompt_chars: int = Field(12_000, ge=500)


class OfflineConfig(Section):
    """The key-less backend (taxonomy/offline/): no model reads the criteria; these shape how it groups them."""

    # SVD dimensions of the criterion vectors: room for 80 fine kinds, small enough for 100,000 criteria.
    dims: int = Field(96, ge=2)
    # Leading words counted again as the predicate: a criterion's first words say what it asserts.
    predicate_words: int = Field(4, ge=0)
    # Share of each task's mean vector removed: what all of a task's criteria share is its topic, not a check.
    task_mean_share: float = Field(0.5, ge=0, le=1)
    # The Ward tree cut this low gives the Stage 1 labels (Stage 2's micro-clusters).
    fine_kinds: int = Field(80, ge=2)
    # The same tree cut this high gives the broad kinds the label embedding carries, so the merge recovers them.
    broad_kinds: int = Field(9, ge=1)
    # Exact Ward's time and memory grow with n squared (5 s at 9,000 criteria): above this many criteria the tree
    # is built over k-means centroids, which group as well (PaperBench: task_category NMI 0.278 vs 0.250)...
    ward_exact_max: int = Field(6_000, ge=100)
    # ...this many of them (about a dozen per fine kind; k-means time grows with it).
    ward_centroids: int = Field(1_000, ge=10)
    # Stage 3 ranks capabilities by the cosine to their centroids plus this much for the one holding the
    # criterion's label.
    label_weight: float = Field(0.2, ge=0)
    # Phrases in a capability's title, and criteria quoted to show it.
    title_phrases: int = Field(3, ge=1)
    shown_criteria: int = Field(3, ge=1)


class StabilityConfig(Section):
    """How sure the run is: resamples of the criteria re-clustered by Stage 2a with the run's cached embeddings
    (no model call, no embedding), each capability's members followed through them (stages/stability.py)."""

    # 0 turns it off; each resample costs one Stage 2a clustering of at most `max_criteria` criteria' labels.
    resamples: int = Field(20, ge=0)
    seed: int = 0
    # The share of the criteria each resample draws (without replacement, as clusterboot's subsetting)...
    fraction: float = Field(0.8, gt=0, lt=1)
    # ...and at most this many, so a large corpus costs what a small one does.
    max_criteria: int = Field(1_000, ge=10)


class OutputConfig(Section):
    # Relative to the TOML's folder when set; empty: ./outputs of the folder the command runs in,
    # made absolute when the config loads, so the run's manifest records where it went.
    dir: str = ""


class PipelineConfig(Section):
    name: str

    @model_validator(mode="before")
    @classmethod
    def _name_from_corpus(cls, raw):
        # Only [corpus] is needed: the pipeline is named after its corpus file ("support.csv" -> "support").
        if (
            isinstance(raw, dict)
            and "name" not in raw
            and isinstance(raw.get("corpus"), dict)
            and raw["corpus"].get("path")
        ):
            raw = {**raw, "name": corpus_stem(raw["corpus"]["path"])}
        return raw

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        # The name becomes a folder under output.dir: it must not climb out of it or be empty.
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name or "") or ".." in name:
            raise ValueError(
                f"{name!r} is not a plain folder name; use letters, digits, '.', '_' or '-' (e.g. \"paperbench\")"
            )
        return name

    corpus: CorpusConfig
    llm: LLMConfig = LLMConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    labels: LabelRules = LabelRules()
    discover: DiscoverConfig = DiscoverConfig()
    cluster: ClusterConfig = ClusterConfig()
    canonicalize: CanonicalizeConfig = CanonicalizeConfig()
    merge: MergeConfig = MergeConfig()
    tag: TagConfig = TagConfig()
    audit: AuditConfig = AuditConfig()
    export: ExportConfig = ExportConfig()
    offline: OfflineConfig = OfflineConfig()
    stability: StabilityConfig = StabilityConfig()
    output: OutputConfig = OutputConfig()
    # Folder of the TOML file; relative paths inside the config resolve against it.
    base_dir: Path = Path(".")

    @model_validator(mode="after")
    def _outputs_here(self) -> "PipelineConfig":
        if not self.output.dir:
            self.output.dir = str(Path.cwd().resolve() / "outputs")
        return self

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()


class ConfigError(ValueError):
    """A bad pipeline config, reported on one line naming the file, the key and the fix."""


def load_config(path: str | Path) -> PipelineConfig:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such pipeline config; fix: pass a TOML file such as pipelines/paperbench.toml")
    data = path.read_bytes()
    try:
        raw = tomllib.loads(decode(data))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc}); fix: correct the syntax at that line") from None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8; fix: save the pipeline config as UTF-8") from None
    raw["base_dir"] = path.parent.resolve()
    try:
        return PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_error(path, exc)) from None


# Where a user sees each section written out: the TOML `taxonomy init` writes shows every key.
EXAMPLE = "the TOML `taxonomy init CORPUS` writes, which lists every key with its default"


def describe_error(path: str | Path, exc: ValidationError) -> str:
    """One validation error on one line; an unknown key gets the closest valid one.

    An unknown key is reported before anything else: a misspelt required key (`pth` for `path`) also
    makes the right one missing, and only the misspelling says what to fix."""
    # A missing name comes last: it is taken from corpus.path, so a missing path is the one to fix.
    errors = sorted(exc.errors(), key=lambda e: (e["type"] != "extra_forbidden", tuple(e["loc"]) == ("name",)))
    err = errors[0]
    loc = [str(p) for p in err["loc"]]
    key = ".".join(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        valid = _valid_keys(loc[:-1])
        close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.6)
        section = ".".join(loc[:-1])
        where = f"[{section}]" if section else "the top level"
        if close:
            right = ".".join([*loc[:-1], close[0]])
            return (
                f"{path}: key {key}: not a setting; did you mean {right}? "
                f"fix: rename {loc[-1]} to {close[0]} (an example: {EXAMPLE})"
            )
        return (
            f"{path}: key {key}: not a setting in {where} (its keys: {', '.join(valid)}); "
            f"fix: remove it or use one of those (an example: {EXAMPLE})"
        )
    if err["type"] == "missing":
        return (
            f"{path}: key {key}: required and missing; fix: add {loc[-1]} "
            f"= ... under {_section(loc)} (an example: {EXAMPLE})"
        )
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{path}: key {key}: {msg}; fix: correct or remove {key} (an example: {EXAMPLE})"


def _section(loc: list[str]) -> str:
    return f"[{'.'.join(loc[:-1])}]" if loc[:-1] else "the top level"


def _valid_keys(loc: list[str]) -> list[str]:
    """The keys a TOML table at `loc` may hold."""
    model: type[BaseModel] = PipelineConfig
    for part in loc:
        field = model.model_fields.get(part)
        inner = getattr(field, "annotation", None) if field else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return []
        model = inner
    return [k for k in model.model_fields if k != "base_dir"]
