"""Stage 2c's merge rules, shared by both backends: the LLM path checks the model's merge, re-asks with the
violations and, as a last resort, repairs its best answer with `solve_merge`; the offline path repairs its
Ward start with `solve_merge` too. `edit.py` splits and names with the same solver.

    measures.py   members, shares and centroids of a proposal; `capability_similarity`; the artifact form
    check.py      `check_merge` (every broken rule as a fix), `card_problems`, `hard_violations`, `share_violations`
    solver.py     `solve_merge`, the deterministic repair (`Solver`), `unique_valid_name`, `boundary_sentence`
    siblings.py   each capability's nearest siblings and the check of its non-examples (Stage 2b and 3 use it too)

The merge step itself (prompts, re-asks) is `stages/merge.py`.
"""
