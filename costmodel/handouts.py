"""Handouts: the notebook suite re-executed for a scenario and exported to offline HTML.

    scenario (validated first) -> papermill runs every notebook in parallel (its parameters
    cell gets the scenario) -> nbconvert exports each to one self-contained HTML page (images
    embedded, MathJax 3 inlined, no remote resource) -> index.html with the scenario's inputs,
    its headline numbers and a link to each section.

The stored notebooks in notebooks/ are only read. The output folder is written atomically:
pages are built in a hidden sibling folder that replaces DIR only when the build ends.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from costmodel import report, scenario, suite
from costmodel.errors import CostModelError

TEMPLATE_DIR = Path(__file__).parent / "templates"
MATHJAX = ("static", "mathjax", "es5", "tex-svg-full.js")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FONT_STACK = ('"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", '
              '"Microsoft YaHei", "WenQuanYi Micro Hei", system-ui, sans-serif')


@dataclass
class Section:
    stem: str
    title: str = ""
    summary: str = ""
    error: str | None = None  # one line: notebook, cell, error and the failing line

    @property
    def page(self) -> str:
        return f"{self.stem}.html"


# ------------------------------------------------------------------ one notebook

def _failing_line(traceback: list[str]) -> str:
    lines = [ANSI.sub("", line) for chunk in traceback for line in chunk.splitlines()]
    marked = [line for line in lines if line.lstrip().startswith("---->")]
    if marked:
        return re.sub(r"^\s*---->\s*\d*\s*", "", marked[-1]).strip()
    return ""


def run_notebook(stem: str, inputs: dict[str, Any], work: str) -> tuple[str, str | None]:
    """Execute notebooks/<stem>.ipynb into work/<stem>.ipynb (in a worker process), with the
    team's inputs as the `overrides` parameter: the page then shows what it was run with."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    suite.inline_figures()
    source = suite.NOTEBOOKS / f"{stem}.ipynb"
    try:
        papermill.execute_notebook(str(source), str(Path(work) / f"{stem}.ipynb"),
                                   parameters={"scenario_file": None, "overrides": inputs},
                                   cwd=str(suite.NOTEBOOKS), kernel_name="python3",
                                   progress_bar=False, log_output=False,
                                   extra_arguments=suite.KERNEL_ARGS)
    except PapermillExecutionError as error:
        line = _failing_line(error.traceback)
        where = f" at `{line}`" if line else ""
        return stem, (f"{stem}: cell {error.exec_count} raised {error.ename}: "
                      f"{ANSI.sub('', str(error.evalue)).splitlines()[0] if error.evalue else ''}"
                      f"{where}")
    except Exception as error:  # kernel died, timeout
        return stem, f"{stem}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return stem, None


def _describe(nb) -> tuple[str, str]:
    """Title (first heading) and one-line summary (first sentence after it) of a notebook."""
    title, summary = "", ""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for block in re.split(r"\n\s*\n", cell.source):
            block = block.strip()
            if not title and block.startswith("#"):
                title = block.lstrip("#").strip().splitlines()[0]
            elif title and block and not block.startswith(("#", "|", "-", "*", "$", ">")):
                text = re.sub(r"[*`_]|\$[^$]*\$", "", " ".join(block.split()))
                summary = re.split(r"(?<=[。！？.!?])", text, maxsplit=1)[0]
                return title, summary
    return title, summary


def export_html(nb, target: Path, no_input: bool, banner: str) -> None:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="handout", extra_template_basedirs=[str(TEMPLATE_DIR)],
                            exclude_input=no_input, exclude_input_prompt=no_input,
                            exclude_output_prompt=no_input, embed_images=True)
    exporter.log.setLevel("ERROR")  # not one "alternative text is missing" line per plot
    mathjax = resources.files("mathjax").joinpath(*MATHJAX).read_text(encoding="utf-8")
    body, _ = exporter.from_notebook_node(
        nb, resources={"mathjax_inline": mathjax.replace("</script", "<\\/script"),
                       "handout_banner": banner, "metadata": {"name": nb.metadata.get("title", "")}})
    target.write_text(body, encoding="utf-8")


# ------------------------------------------------------------------ the index

def _fmt_value(value: Any) -> str:
    if isinstance(value, float) and (abs(value) >= 1e6 or value != int(value)):
        return f"{value:.4g}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,}"
    return "—" if value is None else str(value)


def index_html(sc: scenario.Scenario, account: dict[str, Any], sections: list[Section]) -> str:
    changed = set(sc.changed)
    rows = "".join(
        f"<tr class=\"{'changed' if key in changed else ''}\"><td><code>{key}</code></td>"
        f"<td>{html.escape(_fmt_value(sc[key]))}</td><td>{'changed' if key in changed else ''}"
        f"</td></tr>" for key in scenario.FIELDS if key != "name")
    att = account["attention"]
    headline = [
        ("MFU", f"{100 * account['mfu']:.2f}%"),
        ("HFU", f"{100 * account['hfu']:.2f}%"),
        ("Attention share (padded length)", f"{100 * att['padded']['share']:.1f}%"),
        ("Attention share (mean length)", f"{100 * att['actual']['share']:.1f}%"),
        ("Padding waste", f"{100 * account['padding']['waste_fraction']:.1f}%"),
    ]
    cards = "".join(f"<div class=\"card\"><div class=\"v\">{v}</div><div>{html.escape(k)}</div>"
                    f"</div>" for k, v in headline)
    items = []
    for s in sections:
        if s.error:
            items.append(f"<li class=\"failed\"><strong>{html.escape(s.stem)}</strong> — FAILED: "
                         f"{html.escape(s.error)}</li>")
        else:
            items.append(f"<li><a href=\"{s.page}\">{html.escape(s.title or s.stem)}</a>"
                         f"<div class=\"summary\">{html.escape(s.summary)}</div></li>")
    title = html.escape(sc["name"])
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<style>
body {{ font-family: {FONT_STACK}; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
  color: #1f2328; line-height: 1.5; }}
table {{ border-collapse: collapse; }} td, th {{ border-bottom: 1px solid #d0d7de;
  padding: 2px 10px; text-align: left; }}
tr.changed td {{ background: #fff8c5; font-weight: 600; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 12px; margin: 1rem 0; }}
.card {{ border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 9rem; }}
.card .v {{ font-size: 1.6rem; font-weight: 700; }}
li {{ margin: 0.5rem 0; }} .summary {{ color: #57606a; }} .failed {{ color: #cf222e; }}
@page {{ size: A4; margin: 15mm; }}
</style></head>
<body>
<h1>{title}</h1>
<p>Course section 06, re-executed for this scenario. Numbers computed by costmodel.</p>
<h2>Headline numbers</h2>
<div class="cards">{cards}</div>
<h2>Sections</h2>
<ol>{''.join(items)}</ol>
<h2>Scenario inputs</h2>
<p>Highlighted rows differ from the course's scenario.</p>
<table><thead><tr><th>key</th><th>value</th><th></th></tr></thead><tbody>{rows}</tbody></table>
</body></html>
"""


# ------------------------------------------------------------------ the build

def _replace_dir(built: Path, out: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    built.chmod(0o777 & ~umask)  # mkdtemp made it private; a handout folder is for sharing
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
    built.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build(scenario_file: str | None = None, overrides: dict[str, Any] | None = None,
          out: str | Path = "handouts/course", no_input: bool = False,
          jobs: int | None = None, progress: bool = True) -> tuple[list[Section], Path]:
    """Build the handouts. Bad scenarios raise CostModelError before any notebook runs."""
    import nbformat

    sc = scenario.resolve(scenario_file, overrides)
    account = report.account(sc)
    stems = [p.stem for p in suite.sources()]
    if not stems:
        raise CostModelError(f"notebooks: none found in {suite.NOTEBOOKS}")
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    built = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    work = Path(tempfile.mkdtemp(prefix="costmodel-handouts-"))
    try:
        inputs = user_layer(scenario_file, overrides)
        sections = {stem: Section(stem) for stem in stems}
        jobs = max(1, min(jobs or os.cpu_count() or 1, len(stems)))
        from tqdm import tqdm

        with ProcessPoolExecutor(max_workers=jobs) as pool, tqdm(
                total=len(stems), desc="notebooks", unit="nb",
                disable=None if progress else True) as bar:
            futures = [pool.submit(run_notebook, stem, inputs, str(work))
                       for stem in stems]
            for future in as_completed(futures):
                stem, error = future.result()
                sections[stem].error = error
                bar.update(1)
        banner = f"{sc['name']} · MFU {100 * account['mfu']:.2f}% · costmodel handout"
        for stem, section in sections.items():
            if section.error:
                continue
            nb = nbformat.read(work / f"{stem}.ipynb", as_version=4)
            section.title, section.summary = _describe(nb)
            nb.metadata["title"] = section.title or stem
            export_html(nb, built / section.page, no_input, banner)
        ordered = [sections[stem] for stem in stems]
        (built / "index.html").write_text(index_html(sc, account, ordered), encoding="utf-8")
        _replace_dir(built, out)
    except BaseException:
        shutil.rmtree(built, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ordered, out


def user_layer(scenario_file: str | None, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The team's own keys (file, then --set), for the notebooks' parameters cell."""
    data = scenario.load_yaml(scenario_file) if scenario_file else {}
    data.update(overrides or {})
    if data.get("model") and scenario_file:
        data["model"] = scenario.model_reference(data["model"], Path(scenario_file).parent)
    return data
