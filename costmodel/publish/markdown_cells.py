"""Markdown cells filled at execution: the client side of costmodel/present/prose.py.

Every execution of a notebook (`suite.execute`: `make notebooks`; `runner.Kernel.execute`: the
handouts and the tests' shared kernel) runs it with `Client`, an nbclient `NotebookClient` that
also stops at each Markdown cell holding a template (`{{ … }}`, `{% … %}`): it has the kernel
render the template with the namespace the code cells above have built (a silent request: no
execution count, nothing stored in the history), and then

- the cell's source is the filled text (what JupyterLab, nbconvert and the handouts show);
- the template is kept in the cell's metadata under `TEMPLATE`, so that a stored notebook runs
  again for another scenario (the handouts, the tests) and `restore` gives back the source
  (the jupytext `.py`, which keeps the template).

A template that cannot be filled (a missing name, a syntax error, a float with no format) stops
the run with nbclient's CellExecutionError, its message naming the Markdown cell.
"""

from __future__ import annotations

from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbclient.util import ensure_async

from costmodel.present.prose import is_template

#: The cell metadata key that keeps a filled cell's template.
TEMPLATE = "template"
#: What the kernel evaluates, a user expression (`{template!r}` is the template as a literal).
EXPRESSION = (
    "__import__('costmodel.present.prose', fromlist=['cell'])"
    ".cell({template!r}, get_ipython().user_ns)"
)


def template_of(cell) -> str | None:
    """The template of a Markdown cell (kept in its metadata once filled), or None."""
    if cell.get("cell_type") != "markdown":
        return None
    kept = cell.get("metadata", {}).get(TEMPLATE)
    if isinstance(kept, str):
        return kept
    return cell.source if is_template(cell.source) else None


def restore(nb):
    """`nb` with each filled Markdown cell's template back as its source (in place)."""
    for cell in nb.cells:
        template = template_of(cell)
        if template is not None:
            cell.source = template
            cell.metadata.pop(TEMPLATE, None)
    return nb


def live(cell):
    """A filled Markdown cell as a code cell that fills it again when run (`make lab`'s copy: a
    reader who changes the parameters and runs all sees prose with their numbers), showing the
    filled text until then; tagged `remove-input` like the other cells that only render."""
    import nbformat

    template = template_of(cell)
    literal = (
        f'r"""{template}"""'
        if '"""' not in template and not template.endswith(("\\", '"'))
        else repr(template)
    )
    code = nbformat.v4.new_code_cell(
        "# this page's Markdown, filled with this run's numbers (costmodel/present/prose.py)\n"
        f"from costmodel.present.prose import show\n\nshow({literal})"
    )
    code.id = cell.get("id", code.id)
    code.metadata = {k: v for k, v in cell.get("metadata", {}).items() if k != TEMPLATE}
    code.metadata["tags"] = [*code.metadata.get("tags", []), "remove-input"]
    code.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/markdown": cell.source, "text/plain": cell.source}
        )
    ]
    return code


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= 40 else line[:40] + "…"


class Client(NotebookClient):
    """nbclient's client, filling template Markdown cells as the execution reaches them."""

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        template = template_of(cell)
        if template is None:
            return await super().async_execute_cell(
                cell, cell_index, execution_count=execution_count, store_history=store_history
            )
        cell.source = await self._fill(template, cell_index)
        cell.metadata[TEMPLATE] = template
        return cell

    async def _fill(self, template: str, cell_index: int) -> str:
        assert self.kc is not None
        msg_id = await ensure_async(
            self.kc.execute(
                "",
                silent=True,
                store_history=False,
                user_expressions={"text": EXPRESSION.format(template=template)},
                allow_stdin=False,
            )
        )
        reply = await self.async_wait_for_reply(msg_id)
        content = (reply or {}).get("content", {})
        result = content.get("user_expressions", {}).get("text", {})
        if content.get("status") == "ok" and result.get("status") == "ok":
            return result["data"]["text/markdown"]
        ename = result.get("ename") or content.get("ename") or "TemplateError"
        evalue = result.get("evalue") or content.get("evalue") or "no reply from the kernel"
        where = f"Markdown cell {cell_index + 1} ({_first_line(template)!r})"
        raise CellExecutionError(
            "\n".join(result.get("traceback", [])), ename, f"{where}: {evalue}"
        )
