"""`make lab`: read the notebooks in JupyterLab without touching their sources.

The notebooks are copied into a scratch folder (build/lab/ in a checkout, or the folder given)
and Lab opens there, 01 first:

- only the executed .ipynb are copied, without jupytext's pairing metadata: saving, or Lab's
  autosave, writes the copy and never the paired .py or the stored .ipynb (which the tests
  compare);
- the rendering-only code cells (tagged `remove-input`) are collapsed
  (`jupyter.source_hidden`): the page opens as prose, equations, tables and plots, with the code
  one click away on the cell's left bar; every other cell stays as it is;
- run as root (a container), Lab needs --allow-root: it is added.

A reader tries their own numbers in the parameters cell (the Markdown cell above it says which
keys), then restarts the kernel and runs all.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from costmodel.present import suite

HIDDEN_INPUT = "remove-input"


def scratch_copy(target: Path) -> list[Path]:
    """Copy the executed notebooks into `target` (replacing earlier copies), unpaired, with the
    rendering-only cells collapsed. Returns the copies, in order."""
    import nbformat

    target.mkdir(parents=True, exist_ok=True)
    copies = []
    for source in suite.sources():
        nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        nb.metadata.pop("jupytext", None)  # no pairing: Lab saves the .ipynb alone
        for cell in nb.cells:
            if cell.cell_type == "code" and HIDDEN_INPUT in cell.metadata.get("tags", []):
                cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
        copy = target / source.with_suffix(".ipynb").name
        tmp = copy.with_suffix(".ipynb.tmp")
        nbformat.write(nb, tmp)
        tmp.replace(copy)
        copies.append(copy)
    return copies


#: Lab settings for the scratch copy: no prompt about fetching Jupyter news over the network;
#: every cell of a notebook in the page (windowing off: the notebooks are a few dozen cells, and
#: the browser's find then searches the whole notebook, not only the cells in view).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": '{"fetchNews": "false"}',
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
}


def lab_command(folder: Path, first: Path, extra: list[str]) -> list[str]:
    """The `jupyter lab` command line for the scratch folder, opening `first` (its settings in
    the scratch folder's .settings/, unless `extra` names a settings folder)."""
    settings = folder / ".settings"
    for name, text in SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(text + "\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={folder}",
        f"--LabApp.user_settings_dir={settings}",
        *extra,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    command.append(str(first))  # the server resolves it from its working directory
    return command


def default_folder() -> Path:
    root = suite.ROOT
    if (root / "pyproject.toml").is_file():
        return root / "build" / "lab"
    return Path.cwd() / "costmodel-lab"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m costmodel.present.lab",
        description="open a scratch copy of the notebooks in JupyterLab, 01 first",
    )
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (build/lab)")
    parser.add_argument(
        "--print-command", action="store_true", help="copy, print the command, do not start Lab"
    )
    args, extra = parser.parse_known_args(argv)
    folder = (args.dir or default_folder()).resolve()
    notebooks = suite.NOTEBOOKS.resolve()
    if folder in (notebooks, *notebooks.parents) or notebooks in folder.parents:
        print(f"costmodel: error: --dir: '{folder}' holds the notebooks' sources", file=sys.stderr)
        return 2
    copies = scratch_copy(folder)
    command = lab_command(folder, copies[0], extra)
    print(f"notebooks copied to {folder} (the sources are not touched)")
    if args.print_command:
        print(" ".join(command))
        return 0
    if shutil.which("jupyter") is None and not (Path(sys.executable).parent / "jupyter").exists():
        print("costmodel: error: jupyterlab is not installed (make venv)", file=sys.stderr)
        return 2
    os.execv(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
