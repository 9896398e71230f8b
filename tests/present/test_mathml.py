"""costmodel.present.mathml: formulas typeset as MathML at build time, and the page around
them left intact."""

from html.parser import HTMLParser

import nbformat

from costmodel.present import mathml


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _page(markdown: str) -> str:
    """A heading exported as nbconvert exports it: the heading's text in its id and anchor."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    formulas = mathml.typeset(nb)
    text = nb.cells[0].source.removeprefix("## ")
    slug = text.replace(" ", "-")
    exported = (
        f'<h2 id="{slug}">{text}<a class="anchor-link" href="#{slug}">¶</a></h2><p>{text}</p>'
    )
    return formulas.restore(exported)


def test_a_heading_with_math_keeps_its_id_and_anchor():
    page = _page("## 3. 注意力项：均值低估了 $\\sum s_i^2$")
    parser = _Tags()
    parser.feed(page)
    heading = [attrs for tag, attrs in parser.tags if tag == "h2"][0]
    anchor = [attrs for tag, attrs in parser.tags if tag == "a"][0]
    assert heading["id"] == "3.-注意力项：均值低估了-\\sum-s_i^2"
    assert anchor["href"] == "#" + heading["id"]
    assert "<math" not in heading["id"]
    # the formula itself is MathML in the heading's text and the paragraph, not in an attribute
    assert page.count("<math") == 2
    assert 'Σsi2">' not in "".join(parser.text) and '">' not in "".join(parser.text)


def test_attribute_text_is_escaped():
    page = _page('## a $x<"y"$ b')
    parser = _Tags()
    parser.feed(page)
    heading = [attrs for tag, attrs in parser.tags if tag == "h2"][0]
    assert heading["id"] == 'a-x<"y"-b'  # the parser unescapes it: it was escaped on the page
    assert '"y"' not in page.split(">", 1)[0].replace("&quot;y&quot;", "")
