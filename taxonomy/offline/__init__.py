"""The key-less backend: every model step of the pipeline done with corpus statistics, behind the same
interface as the LLM backend (backend.py: OfflineBackend). No model reads the criteria and none is
pretended: it groups them, titles each group by its characteristic phrases, and quotes them.

    features.py   criterion vectors (tokens spread over tasks, predicate words, stems, task means removed)
    discover.py   Stage 1: one Ward tree cut into fine kinds (the labels) and broad kinds
    cluster.py    Stage 2a: a label embedded as its criteria
    ../naming.py  Stage 2b: a micro-cluster named from its labels' words (the LLM path's fallback too)
    merge.py      Stage 2c, after the merge: titles, names, representative criteria, boundaries (represent.py)
    tag.py        Stage 3: label membership, or card similarity for a corpus the taxonomy never saw
"""
