"""notebooks/walkthrough.ipynb runs top to bottom in a fresh kernel of this interpreter, offline, into a temp run
dir."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK = NOTEBOOKS / "walkthrough.ipynb"
PROBE = "import sys; print('KERNEL-PREFIX=' + sys.prefix)"


def _is_this_python(argv0: str) -> bool:
    """jupyter_client launches a spec whose argv[0] is python / python3 / python3.X with sys.executable."""
    bare = {"python", f"python{sys.version_info[0]}", "python%d.%d" % sys.version_info[:2]}
    return argv0 in bare or Path(argv0).resolve() == Path(sys.executable).resolve()


@pytest.fixture
def python3_kernel(tmp_path_factory, monkeypatch):
    """Make the "python3" kernel this interpreter (the venv's). Nothing is installed when it already is; when a
    python3 spec of another Python shadows it (e.g. in ~/.local/share/jupyter), a private spec written to a temp dir
    is put first on JUPYTER_PATH for this test only. The venv itself is never modified."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
        if spec.argv and _is_this_python(spec.argv[0]):
            return
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import write_kernel_spec

    data = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(data / "kernels" / "python3")  # argv[0] = sys.executable
    monkeypatch.setenv("JUPYTER_PATH", str(data))


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return "\n".join(str(data.get(kind, "")) for kind in ("text/markdown", "text/plain", "text/html"))


def test_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the walkthrough has no code cells"
    assert all(not c.outputs and c.execution_count is None for c in code), "clear the outputs before committing"
    assert nb.metadata["kernelspec"]["name"] == "python3"
    # the library API, not the shell
    assert not any(c.source.lstrip().startswith("!") or "subprocess" in c.source for c in code)


def test_walkthrough_executes(tmp_path, monkeypatch, python3_kernel):
    run_dir = tmp_path / "walkthrough"
    monkeypatch.setenv("TAXONOMY_WALKTHROUGH_DIR", str(run_dir))
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):  # offline, whatever the environment holds
        monkeypatch.delenv(key, raising=False)

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    errors = [c.source for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    probe = "".join(_text(o) for o in nb.cells[-1].outputs)
    assert f"KERNEL-PREFIX={sys.prefix}" in probe, f"the kernel is not this interpreter: {probe!r}"

    breakdown = "".join(_text(o) for c in nb.cells if "breakdown" in c.metadata.get("tags", []) for o in c.outputs)
    assert "agent_as_a_judge" in breakdown
    assert "FN minus FP" in breakdown and "per agent system" in breakdown

    assert (run_dir / "report.html").is_file() and (run_dir / "report.html").stat().st_size > 10_000
    assert (run_dir / "breakdown" / "breakdown.md").is_file()
    assert "agent_as_a_judge" in (run_dir / "report.html").read_text(encoding="utf-8")  # re-rendered with the breakdown
    assert json.loads((run_dir / "manifest.json").read_text())["backend"] == "offline"
    setup = "".join(_text(o) for c in nb.cells if c.get("id") == "setup" for o in c.outputs)
    assert str(run_dir) in setup, "the first code cell did not take the run directory from TAXONOMY_WALKTHROUGH_DIR"
