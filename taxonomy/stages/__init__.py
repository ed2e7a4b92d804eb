"""Pure steps over artifacts: each reads the run directory's files and writes its own."""
