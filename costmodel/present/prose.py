"""Markdown cells with computed values: Jinja2 templates filled in the kernel.

A Markdown cell of a notebook may hold placeholders, `{{ acc.mfu|pct }}`, and conditional
wording, `{% if sc.recompute == "none" %}…{% else %}…{% endif %}`. When the execution reaches
the cell (costmodel/publish/prose.py: the suite's build, the handouts, the tests' kernel), the
template is rendered here, in the kernel, with the notebook's namespace as it stands at that
point: every name the code cells above it defined.

- Numbers are written through costmodel/formats.py, as filters: `|pct`, `|pct(1)`, `|num`,
  `|num(2)`, `|sci`, `|count`, `|tflops`, `|gb`, `|times`, `|seconds`, `|sig`, `|sig4`,
  `|ratio`, `|short`, `|decimals(3)`, `|tex_num`, `|tex_sci` (the last two inside `$…$`). A
  float without a filter is an error (an unformatted 0.058512… never reaches a page); an integer
  is written as Python writes it (`|num` separates thousands).
- Any other value (a scenario's name, a policy, a course claim) is text: escaped by default
  (`costmodel.formats.markdown_text`), so that no scenario string adds markup, a link or math.
  `|code` writes it as a code span; `|safe` takes it as Markdown written by the library.
- A name the template uses that the namespace lacks is an error (StrictUndefined), as is a
  syntax error: `ProseError`, with the template's line.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jinja2
from markupsafe import Markup

from costmodel import formats

#: What makes a Markdown cell a template.
MARKERS = ("{{", "{%", "{#")

#: The filters: costmodel.formats' functions, their text taken as written (not escaped).
FORMATS = (
    "pct",
    "num",
    "sci",
    "sci4",
    "sig",
    "sig4",
    "ratio",
    "short",
    "decimals",
    "count",
    "tflops",
    "gb",
    "times",
    "seconds",
    "tex_num",
    "tex_sci",
    "input_value",
)


#: A line that holds one block tag (`{% if … %}`, `{% else %}`, `{% endif %}`) or one comment and
#: nothing else: its newline goes too (into a comment, so that an error's line number stays the
#: template's), and a condition written on lines of its own adds no empty line. A tag inside a
#: sentence keeps the text around it as it is.
_TAG_LINE = re.compile(
    r"^[ \t]*(\{%(?:[^%\n]|%(?!\}))*%\}|\{#(?:[^#\n]|#(?!\}))*#\})[ \t]*\n", re.M
)


class ProseError(Exception):
    """A template that cannot be rendered: the message names the template's line."""


def is_template(text: str) -> bool:
    return any(marker in text for marker in MARKERS)


def _formatter(function):
    def apply(value, *args, **kwargs):
        return Markup(function(value, *args, **kwargs))

    apply.__name__ = function.__name__
    return apply


def _finalize(value: Any) -> Any:
    """How a value is written: formatted text as it is, a float refused (it needs a format),
    anything else escaped as scenario text."""
    if isinstance(value, Markup):
        return value
    if value is None or isinstance(value, bool):
        raise ProseError(f"{value!r} in the text: write the wording with {{% if %}} instead")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise ProseError(f"the float {value!r} needs a format filter (|pct, |num, |sci, |count, …)")
    return formats.markdown_text(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters.update({name: _formatter(getattr(formats, name)) for name in FORMATS})
    env.filters["text"] = lambda value: Markup(formats.markdown_text(value))
    env.filters["code"] = lambda value: Markup(formats.markdown_text(value, code=True))
    return env


ENVIRONMENT = _environment()


def _line(error: BaseException) -> int | None:
    """The template's line an error was raised at (Jinja2 puts the template's frames in the
    traceback under the name <template>)."""
    if isinstance(error, jinja2.TemplateSyntaxError):
        return error.lineno
    tb, line = error.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


@functools.lru_cache(maxsize=1024)
def _compiled(template: str) -> jinja2.Template:
    """A template compiled once per process: a kernel fills the same cells for every scenario it
    runs, and compiling one (Jinja2 writes and compiles Python) costs more than filling it."""
    return ENVIRONMENT.from_string(_TAG_LINE.sub("\\1{#\n#}", template))


def render(template: str, namespace: dict[str, Any]) -> str:
    """`template` filled with the values of `namespace` (no empty line at either end); ProseError
    if it cannot be."""
    try:
        return _compiled(template).render(namespace).strip("\n")
    except Exception as error:  # every failure of a template, as one error naming its line
        line = _line(error)
        where = f"line {line}: " if line else ""
        message = (
            str(error) if isinstance(error, ProseError) else f"{type(error).__name__}: {error}"
        )
        raise ProseError(where + message) from None


class Filled(str):
    """Rendered Markdown as the kernel hands it back (its text/markdown form)."""

    def _repr_markdown_(self) -> str:
        return str(self)


def cell(template: str, namespace: dict[str, Any]) -> Filled:
    """What the kernel evaluates for a template cell (costmodel/publish/prose.py)."""
    return Filled(render(template, namespace))


def show(template: str) -> None:
    """Display `template` filled with the kernel's namespace: a template cell as `make lab`'s
    copy runs it (a collapsed code cell, so that a reader's own numbers reach the prose)."""
    from IPython import get_ipython
    from IPython.display import display

    text = render(template, get_ipython().user_ns)
    display({"text/markdown": text, "text/plain": text}, raw=True)
