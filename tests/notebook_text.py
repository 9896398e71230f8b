"""What an executed notebook shows, as text: shared by the tests that read pages."""


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
