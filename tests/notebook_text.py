"""What an executed notebook shows, as text: shared by the tests that read pages; and a new
notebook for the tests that execute one."""

import html
import re


def python_notebook(cells=()):
    """A new notebook for the python3 kernel (the kernelspec nbclient starts) holding `cells`."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = list(cells)
    return nb


def shown(nb) -> str:
    """Everything a notebook shows: its Markdown cells (filled, costmodel/present/prose.py) and
    its outputs (Markdown, HTML and plain); nothing for one that failed (a run that failed is
    passed as its error line, a str: the test of errors names it)."""
    if isinstance(nb, str):
        return ""
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            parts += [data.get(k, "") for k in ("text/markdown", "text/html", "text/plain")]
            parts.append(output.get("text", ""))
    return "\n".join(parts)


_CELL_BREAK = re.compile(r"(?<!\\)\|")


def claim_rows(nb) -> list[tuple[str, str, str]]:
    """The rows of a notebook's claims tables ("课程怎么说 / 本页算出 / 出入"), as text:
    (claim, computed, verdict). A table is a code cell's output (`d.claims`, HTML with that
    caption) or a Markdown table in a Markdown cell (filled), after a bold line with that caption."""
    rows = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.splitlines()
            for i, line in enumerate(lines):
                if not line.startswith("**课程怎么说"):
                    continue
                table = [t for t in lines[i + 1 :] if t.strip()]
                for row in table[2:]:  # after the header and its separator
                    if not row.startswith("|"):
                        break
                    cells = [c.strip() for c in _CELL_BREAK.split(row.strip())[1:-1]]
                    rows.append(tuple(html.unescape(c.replace("\\|", "|")) for c in cells))
        for output in cell.get("outputs", []):
            markup = output.get("data", {}).get("text/html", "")
            if "<caption>课程怎么说" in markup:
                for row in re.findall(
                    r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", markup
                ):
                    rows.append(tuple(html.unescape(re.sub(r"<[^>]+>", "", c)) for c in row))
    return rows


def tables(nb) -> list[tuple[str, list[list[str]]]]:
    """Every table a notebook shows, as (caption, rows of cell texts, the header left out): the
    HTML tables of code cells' outputs (`d.table`, caption in <caption>) and the Markdown tables
    of (filled) Markdown cells (caption: the bold line just above, if any)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.splitlines()
            i = 0
            while i < len(lines):
                if not lines[i].startswith("|"):
                    i += 1
                    continue
                start = i
                while i < len(lines) and lines[i].startswith("|"):
                    i += 1
                above = [x for x in lines[:start] if x.strip()]
                caption = above[-1].strip("* ") if above and above[-1].startswith("**") else ""
                rows = [
                    [c.strip() for c in _CELL_BREAK.split(row.strip())[1:-1]]
                    for row in lines[start + 2 : i]  # after the header and its separator
                ]
                found.append((caption, rows))
        for output in cell.get("outputs", []):
            markup = output.get("data", {}).get("text/html", "")
            for caption, body in re.findall(
                r"<table>(?:<caption>(.*?)</caption>)?<thead>.*?</thead><tbody>(.*?)</tbody>",
                markup,
                re.S,
            ):
                rows = [
                    re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", body)
                ]
                found.append((caption, rows))
    return found
