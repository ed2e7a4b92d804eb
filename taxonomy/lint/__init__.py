"""`taxonomy lint`: find defective criteria in a rubric corpus (to be built: issue 37)."""
