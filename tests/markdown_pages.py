"""Markdown rendered as the handouts render a notebook's Markdown output (shared by the tests)."""


def handout_html(markdown: str, anchor_links: bool = False) -> str:
    """`markdown` as HTML, through nbconvert's own mistune renderer (its url autolink, table and
    math plugins; raw HTML passed through, each tag parsed on its own, as with embed_images)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(
        escape=False,
        attachments={},
        embed_images=True,
        path="",
        anchor_link_text="¶",
        exclude_anchor_links=not anchor_links,
    )
    return MarkdownWithMath(renderer=renderer).render(markdown)
