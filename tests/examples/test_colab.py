"""examples/colab/: the Colab notebooks, executed top to bottom with their smoke parameters on the CPU, their outputs
stripped in the repository, and their install cell's JAX (the pins it keeps Colab's CUDA JAX within, and that those
pins resolve with rlfit's CUDA extras for a JAX such as Colab preinstalls).

A notebook runs in a Jupyter kernel of this Python (the project's venv) with Google Drive absent, as a user's plain
Jupyter runs it: its first code cell (tagged `parameters`) is followed by an injected cell that sets SMOKE = True,
as papermill injects parameters. The rlfit commands it runs inherit the test session's compile cache.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "examples" / "colab"
COLAB_LIKE_JAX = ("0.9.2", "0.10.2")
"""JAX versions a Colab runtime could preinstall within rlfit's pins (the oldest and the newest they admit), each with
jaxlib and jax-cuda12-plugin of the same version (Colab's GPU runtimes ship CUDA 12's). The last upgrade Colab
announced (googlecolab/colabtools#5164) was to 0.5.2, below the pins: pip must then replace it, plugin included,
which the install cell lets it do (without a constraint) and `test_each_cuda_extra_resolves_with_the_core` in
tests/test_plain_install.py checks resolves to one jax, jaxlib and plugin."""


def cells(name: str) -> list:
    nbformat = pytest.importorskip("nbformat", reason="needs the dev extra: pip install -e '.[dev]'")
    return nbformat.read(NOTEBOOKS / name, as_version=4).cells


def code_of(name: str) -> str:
    return "\n".join(cell.source for cell in cells(name) if cell.cell_type == "code")


@pytest.mark.parametrize("name", ["g1.ipynb", "study.ipynb"])
def test_notebooks_are_stored_without_outputs(name):
    raw = json.loads((NOTEBOOKS / name).read_text())
    for cell in raw["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, cell["source"][:3]
    assert "widgets" not in raw["metadata"]


@pytest.mark.parametrize("name", ["g1.ipynb", "study.ipynb"])
def test_the_first_code_cell_holds_the_parameters(name):
    first = next(cell for cell in cells(name) if cell.cell_type == "code")
    assert first.metadata.get("tags") == ["parameters"], first.metadata
    assert re.search(r"^SMOKE = False\b", first.source, re.M), first.source


@pytest.mark.parametrize("name", ["g1.ipynb", "study.ipynb"])
def test_the_install_cell_keeps_jax_within_the_pins_of_pyproject(name):
    core = re.search(r'^  "jax(>=[^"]+)",$', (REPO_ROOT / "pyproject.toml").read_text(), re.M)  # (tomllib: 3.11+)
    assert core, "pyproject.toml has no core jax requirement"
    pins = re.search(r'^JAX_PINS = "([^"]+)"', code_of(name), re.M)
    assert pins, "the install cell has no JAX_PINS"
    assert pins.group(1) == core.group(1), (pins.group(1), core.group(1))


def uv_compile(extra: str, constraints: list[str], out: Path) -> dict[str, str]:
    uv = Path(sys.executable).with_name("uv")
    (out / "colab.txt").write_text("\n".join(constraints) + "\n")
    resolved = subprocess.run([str(uv), "pip", "compile", str(REPO_ROOT / "pyproject.toml"), "--extra", extra,
                               "--constraint", str(out / "colab.txt"), "--python-version", "3.12",
                               "--python-platform", "x86_64-manylinux_2_28", "--quiet", "-o", str(out / "lock.txt")],
                              capture_output=True, text=True, timeout=600)
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    return dict(line.split("==") for line in (out / "lock.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))


@pytest.mark.slow
@pytest.mark.parametrize("jax", COLAB_LIKE_JAX)
@pytest.mark.parametrize("extra", ["cuda12", "cuda"])
def test_the_cuda_extras_resolve_with_a_colab_like_jax(extra, jax, tmp_path):
    """rlfit[cuda12] and rlfit[cuda] with jax, jaxlib and jax-cuda12-plugin held at a version Colab could ship
    (Python 3.12, as Colab's): uv resolves them without changing those three (resolved from the index's metadata,
    no CUDA wheel downloaded)."""
    pins = uv_compile(extra, [f"jax=={jax}", f"jaxlib=={jax}", f"jax-cuda12-plugin=={jax}"], tmp_path)
    plugin = "jax-cuda13-plugin" if extra == "cuda" else "jax-cuda12-plugin"
    assert pins["jax"] == pins["jaxlib"] == pins[plugin] == jax, pins


def run_notebook(name: str, workdir: Path, monkeypatch, *after: str):
    """Executes `name` in a kernel of this Python, in `workdir`, with SMOKE = True injected after its parameters cell;
    then runs each source of `after` as one more cell in the same kernel. Returns (notebook, outputs of `after`)."""
    nbformat = pytest.importorskip("nbformat", reason="needs the dev extra: pip install -e '.[dev]'")
    nbclient = pytest.importorskip("nbclient", reason="needs the dev extra: pip install -e '.[dev]'")
    pytest.importorskip("ipykernel", reason="needs the dev extra: pip install -e '.[dev]'")
    # a kernel of this interpreter, whatever kernels the machine has registered under the name python3
    spec = workdir / "jupyter" / "kernels" / "rlfit-venv"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "rlfit venv", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(workdir / "jupyter"))
    monkeypatch.delenv("RLFIT_MENAGERIE_PATH", raising=False)  # robot files absent: the smoke run's stand-in
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    first = next(index for index, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", []))
    injected = nbformat.v4.new_code_cell("SMOKE = True  # injected by tests/examples/test_colab.py")
    injected.metadata["tags"] = ["injected-parameters"]
    notebook.cells.insert(first + 1, injected)
    client = nbclient.NotebookClient(notebook, kernel_name="rlfit-venv", timeout=600,
                                     resources={"metadata": {"path": str(workdir)}})
    extra = []
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        for source in after:
            cell = nbformat.v4.new_code_cell(source)
            notebook.cells.append(cell)
            client.execute_cell(cell, len(notebook.cells) - 1)
            extra.append(cell.outputs)
    return notebook, extra


def text_of(outputs) -> str:
    return "".join(output.get("text", "") + "".join(str(v) for v in output.get("data", {}).values())
                   for output in outputs)


def mime_types(notebook) -> set[str]:
    return {mime for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
            for mime in output.get("data", {})}


@pytest.mark.slow
def test_the_g1_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    decide = ("print(json.dumps([install_arguments('git+https://x/rlfit', jax, plugins, gpu) for jax, plugins, gpu in ["
              "('0.10.2', {'jax-cuda12-plugin': '0.10.2'}, True), ('0.5.2', {'jax-cuda12-plugin': '0.5.2'}, True),"
              "('0.10.2', {'jax-cuda13-plugin': '0.10.2'}, True), ('0.10.2', {}, False)]]))")
    notebook, (again, decided) = run_notebook("g1.ipynb", tmp_path, monkeypatch, "TIMESTEPS = 128\ntrain_or_resume()",
                                              decide)
    output = "\n".join(text_of(cell.outputs) for cell in notebook.cells if cell.cell_type == "code")
    assert "no GPU" in output and "training CartpoleBalance instead of G1JoystickFlatTerrain" in output
    assert re.search(r"^\s*\d+\s.*<- chosen", output, re.M), "no plan table"
    run_dir = tmp_path / "rlfit-runs" / "g1"
    assert sorted((run_dir / "checkpoints").iterdir()), "no checkpoint"
    assert (run_dir / "play.mp4").stat().st_size > 0 and "text/html" in mime_types(notebook)  # the inline video
    assert (run_dir / "policy.onnx").stat().st_size > 0
    # the transfer check of the exported file: its report, shown in the notebook; episodes cut by --max-steps are not
    # compared with MJX's whole-episode evaluation, and the report says why
    report = json.loads((run_dir / "transfer_check.json").read_text())
    assert set(report["conditions"]) == {"native_nominal"}  # CartpoleBalance has no randomizer
    assert report["mjx_left_out"]
    assert len(report["episodes"]) == 2 and "# Transfer check: CartpoleBalance" in output
    assert (tmp_path / "rlfit-runs" / "g1.zip").stat().st_size > 0
    # the training cell run again continues the run (to the new total: a second iteration of 64 env steps)
    assert "resuming" in text_of(again), text_of(again)
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 128
    # the install cell's choice for a Colab GPU runtime: the CUDA extra of its plugin, its JAX kept where the pins allow
    keep, replace, cuda13, cpu = json.loads(text_of(decided))
    assert keep == ["rlfit[video,export,cuda12] @ git+https://x/rlfit",
                    ["jax==0.10.2", "jaxlib==0.10.2", "jax-cuda12-plugin==0.10.2"]]
    assert replace == ["rlfit[video,export,cuda12] @ git+https://x/rlfit", []]
    assert cuda13 == ["rlfit[video,export,cuda] @ git+https://x/rlfit",
                      ["jax==0.10.2", "jaxlib==0.10.2", "jax-cuda13-plugin==0.10.2"]]
    assert cpu == ["rlfit[video,export] @ git+https://x/rlfit", []]


@pytest.mark.slow
def test_the_study_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    notebook, (again,) = run_notebook("study.ipynb", tmp_path, monkeypatch, "run_stage('full')")
    experiments = tmp_path / "rlfit-experiments"
    stages = {path.name.split("-20")[0]: path for path in experiments.iterdir() if path.is_dir()}
    assert set(stages) == {"cartpole_lr-gpu-test", "cartpole_lr-mini", "cartpole_lr-full"}, stages
    full = stages["cartpole_lr-full"]
    assert (full / "report" / "report.md").is_file() and (full / "cartpole_lr.zip").stat().st_size > 0
    assert "image/png" in mime_types(notebook) and "text/markdown" in mime_types(notebook)  # figures, report inline
    # the stage's cell run again resumes the experiment, and retrains nothing
    assert f"resuming {full}" in text_of(again) and "4/4 done, 0 left" in text_of(again), text_of(again)
