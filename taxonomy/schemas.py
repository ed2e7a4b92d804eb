"""Pydantic models of every LLM answer and every JSON artifact.

LLM answers are always a top-level object: Gemini takes an array schema, but
OpenAI-compatible json_schema modes want an object, and one shape serves both.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ---- Stage 1: discovery -------------------------------------------------------------
class DiscoveryItem(Model):
    criterion_idx: int
    capabilities: list[str]
    rationale: str


class DiscoveryAnswer(Model):
    items: list[DiscoveryItem]


# ---- Stage 2b: one micro-cluster named ----------------------------------------------
class CapabilityCard(Model):
    name: str
    description: str
    diagnostic_signal: str
    example_pattern: str
    non_examples: list[str]


class MicroCapability(CapabilityCard):
    cluster_id: int
    n_criteria: int = 0  # criteria whose labels mostly fall in it (their dominant cluster)
    share: float = 0.0
    # Criteria carrying any of its labels: a cluster no criterion is dominated by still has criteria to show.
    n_labelled: int = 0
    member_labels: list[str] = []


# ---- Stage 2c: the merge ------------------------------------------------------------
class DesignPrinciples(Model):
    """The paper's Section 4 per capability (P1, reactive verification, applies to all).

    None means unknown: the offline backend decides neither without a domain-free signal."""

    needs_native_inspection: bool | None = Field(
        None,
        description=(
            "P2: the check depends on artifact properties that do not survive flattening to text or rendering "
            "(formula structure, layout metadata, cross-file references, environment state)"
        ),
    )
    needs_native_inspection_reason: str = ""
    needs_domain_conventions: bool | None = Field(
        None, description="P3: the check depends on conventions absent from the criterion text"
    )
    needs_domain_conventions_reason: str = ""


class MergedCapability(CapabilityCard, DesignPrinciples):
    member_input_names: list[str]


class DecidedCard(DesignPrinciples):
    """A capability's card as the merge's calls answer it: both principles decided, each with its reason."""

    name: str
    description: str
    diagnostic_signal: str
    example_pattern: str
    needs_native_inspection: bool
    needs_native_inspection_reason: str
    needs_domain_conventions: bool
    needs_domain_conventions_reason: str


class MembershipCapability(DecidedCard):
    """The merge call's answer per capability: its card, members and design principles. Its
    boundaries come later (BoundaryAnswer), once every capability's siblings are known."""

    member_input_names: list[str]


class MembershipAnswer(Model):
    capabilities: list[MembershipCapability]


class Regrouped(DesignPrinciples):
    """A capability in the answer to a membership re-ask: its name and members. A capability kept from
    the previous answer keeps its card there; a new one brings its own card."""

    name: str
    member_input_names: list[str]
    description: str = ""
    diagnostic_signal: str = ""
    example_pattern: str = ""


class RegroupAnswer(Model):
    capabilities: list[Regrouped]


class CardFix(DecidedCard):
    """A capability's card rewritten in the merge's focused follow-up; membership is not touched."""

    capability_idx: int


class CardFixAnswer(Model):
    capabilities: list[CardFix]


class CapabilityBoundaries(Model):
    name: str
    non_examples: list[str]


class BoundaryAnswer(Model):
    """Non-examples per capability, each against one of the siblings the program listed for it."""

    capabilities: list[CapabilityBoundaries]


# ---- Stage 3: closed-vocabulary tagging ---------------------------------------------
class TagItem(Model):
    criterion_idx: int
    capabilities: list[str]


class TagAnswer(Model):
    items: list[TagItem]


# ---- Artifacts ----------------------------------------------------------------------
STATED = "What it checks, as stated by a person"  # marks a `checks` sentence wherever it is shown


class TaxonomyCapability(CapabilityCard, DesignPrinciples):
    members: list[str] = Field(description="names of the member micro-capabilities")
    share: float = Field(0.0, description="share of criteria whose dominant micro-cluster maps here")
    # The Stage 1 labels of its micro-clusters: a frozen taxonomy tags a new corpus by them offline.
    labels: list[str] = []
    # A human-readable title in the corpus's own words (its most telling phrases); the name stays the id.
    title: str = ""
    # What it checks, in one sentence a person wrote (`taxonomy edit describe`): the offline backend reads no
    # meaning, so its texts can only quote and count the criteria; a person who has read them can say it.
    checks: str = ""
    # The offline backend's scoring model: the capability's distinctive phrases with their weights,
    # and the offset that kept its share within bounds; Stage 3 tags any corpus with them.
    key_phrases: list[str] = []
    phrase_weights: list[float] = []
    score_offset: float = 0.0
    # Mean Jaccard of its criteria with their best match across resamples (stages/stability.py); None: not
    # computed. Derived from the run, so it is left out of the content hash.
    stability: float | None = None

    def described(self) -> str:
        """The description as exports and prompts carry it: a person's statement of what it checks first, marked as
        theirs."""
        return f"{STATED}: {self.checks} {self.description}" if self.checks else self.description

    def as_stated(self) -> "TaxonomyCapability":
        """This capability as a prompt shows it, its description `described()` (unchanged where no person stated
        what it checks, so the prompt, and any stored answer to it, stays the same)."""
        return self.model_copy(update={"description": self.described()}) if self.checks else self


# A capability whose members keep this Jaccard across resamples is called stable; below DISSOLVED, dissolved
# (Hennig's reading of clusterwise bootstrap stability, R fpc::clusterboot).
STABLE = 0.75
DISSOLVED = 0.5


class StabilityRun(Model):
    """How the capabilities' stability figures were computed, and for which membership: a figure whose
    `membership` is not the taxonomy's own (an edit merged or split capabilities since) is never shown."""

    resamples: int
    seed: int
    fraction: float
    criteria_per_resample: int
    max_criteria: int = 0
    membership: str  # Taxonomy.membership_hash() when computed
    tags: str = ""  # the name-free partition of the criteria by primary tag it followed (stages/stability.py)


class Taxonomy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = 1
    corpus: str = ""
    n_criteria: int = 0
    capabilities: list[TaxonomyCapability]
    repairs: list[str] = []
    # Hard merge constraints still broken after repair; non-empty only in a taxonomy kept with
    # --accept-violations (or a rejected one, written as taxonomy.rejected.json).
    violations: list[str] = []
    # "offline" when the names and texts were drawn from the corpus by the offline backend, not written by a model.
    written_by: str = ""
    # The offline backend's: the languages whose function words name nothing (English always, others as detected).
    function_words_of: list[str] = []
    stability: StabilityRun | None = None
    content_hash: str = ""

    def compute_hash(self) -> str:
        # Undecided design-principle fields are left out, so a taxonomy written before they existed keeps its hash.
        unset = {name: field.default for name, field in DesignPrinciples.model_fields.items()}
        unset |= {
            name: TaxonomyCapability.model_fields[name].default
            for name in ("title", "checks", "key_phrases", "phrase_weights", "score_offset")
        }
        body = [
            {k: v for k, v in c.model_dump(exclude={"stability"}).items() if not (k in unset and v == unset[k])}
            for c in self.capabilities
        ]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]

    def names(self) -> list[str]:
        return [c.name for c in self.capabilities]

    def membership_hash(self) -> str:
        """Which micro-clusters each capability holds, names aside: a rename or a description keeps it."""
        groups = sorted(sorted(c.members) for c in self.capabilities)
        return hashlib.sha256(json.dumps(groups).encode()).hexdigest()[:16]

    def stability_figures(self) -> dict[str, float | None] | None:
        """Per capability name, its stability figure (None: none of the criteria holds it as primary), when the
        figures were computed for this membership; else None."""
        if self.stability is None or self.stability.membership != self.membership_hash():
            return None
        return {c.name: c.stability for c in self.capabilities}
