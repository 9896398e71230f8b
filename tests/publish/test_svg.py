"""A plot's SVG as a page embeds it (costmodel.publish.svg, issue 36, 8): the same drawing in
fewer bytes, in a data: URI that needs no HTML escaping."""

import re
from urllib.parse import unquote

from costmodel.publish.svg import compact_svg, svg_data_uri

#: An SVG as matplotlib writes it: metadata, a glyph's comment and outline at a small scale, a
#: styled group of points, indentation, six decimals.
PLOT = """<?xml version="1.0" encoding="utf-8" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"
  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="472.988281pt" viewBox="0 0 472.988281 302.571281" xmlns="http://www.w3.org/2000/svg">
 <metadata>
  <rdf:RDF><cc:Work><dc:title>Matplotlib v3.11.2, https://matplotlib.org/</dc:title></cc:Work></rdf:RDF>
 </metadata>
 <g id="text_1">
  <!-- tokens -->
  <g transform="translate(75.612344 268.243125) scale(0.08 -0.08)">
   <defs>
    <path id="DejaVuSans-74" d="M 1172 4494 \nL 1172 3500 \nz\n" transform="scale(0.015625)"/>
   </defs>
   <use xlink:href="#DejaVuSans-74" transform="translate(63.623047 0)"/>
  </g>
 </g>
 <g clip-path="url(#p0a4d1ba343)">
  <use xlink:href="#m698f809126" x="350.912345" y="212.834567" style="fill: #a0aec0; fill-opacity: 0.25"/>
  <use xlink:href="#m698f809126" x="151.960001" y="-0.012" style="fill: #a0aec0; fill-opacity: 0.25"/>
 </g>
</svg>
"""


def test_compact_svg_keeps_the_drawing_and_drops_what_no_reader_sees():
    svg = compact_svg(PLOT)
    for gone in ("<metadata", "<!--", "<?xml", "<!DOCTYPE", "\n", "xlink:href", "> <"):
        assert gone not in svg, gone
    # coordinates to a tenth of a point; a scale (a glyph's 1/64) and a style's opacity intact
    assert 'viewBox="0 0 473 302.6"' in svg and 'width="473pt"' in svg
    assert 'transform="translate(75.6 268.2) scale(0.08 -0.08)"' in svg
    assert 'transform="scale(0.015625)"' in svg and 'transform="translate(63.6 0)"' in svg
    assert 'd="M1172 4494L1172 3500z"' in svg
    # the points' one style once, on their group; a shift of -0.012 is 0, not -0
    assert svg.count("fill-opacity: 0.25") == 1
    assert '<g clip-path="url(#p0a4d1ba343)" style="fill: #a0aec0; fill-opacity: 0.25">' in svg
    assert '<use href="#m698f809126" x="152" y="0"/>' in svg
    # the glyph's id, which its <use> refers to, short; a group's, which nothing refers to, gone
    assert '<path id="i0" d=' in svg and '<use href="#i0" transform=' in svg
    assert "DejaVuSans" not in svg and "text_1" not in svg
    assert len(svg) < 0.6 * len(PLOT)


def test_every_reference_of_a_compacted_svg_has_its_target():
    svg = compact_svg(
        '<svg><defs><path id="m40a5955550" d="M 0 0"/></defs>'
        '<g id="patch_1" clip-path="url(#p0a4d1ba343)"><use xlink:href="#m40a5955550" x="1"/></g>'
        '<clipPath id="p0a4d1ba343"><rect/></clipPath></svg>'
    )
    assert svg == (
        '<svg><defs><path id="i0" d="M0 0"/></defs><g clip-path="url(#i1)">'
        '<use href="#i0" x="1"/></g><clipPath id="i1"><rect/></clipPath></svg>'
    )


def test_a_group_of_differently_styled_points_keeps_each_style():
    points = (
        '<g><use xlink:href="#m" x="1" y="2" style="fill: red"/>'
        '<use xlink:href="#m" x="3" y="4" style="fill: blue"/></g>'
    )
    assert compact_svg(points) == (
        '<g><use href="#m" x="1" y="2" style="fill: red"/>'
        '<use href="#m" x="3" y="4" style="fill: blue"/></g>'
    )


def test_the_data_uri_needs_no_html_escaping_and_decodes_to_the_compact_svg():
    uri = svg_data_uri(PLOT)
    assert uri.startswith("data:image/svg+xml,%3Csvg ")
    assert not re.search(r'["<>&#\s]', uri.replace(" ", "")), "escape-free, one line"
    assert unquote(uri.split(",", 1)[1]) == compact_svg(PLOT).replace('"', "'")
    # an SVG with single quotes of its own keeps its double quotes (percent-encoded)
    quoted = svg_data_uri("<svg><text style=\"font: 10px 'DejaVu Sans'\">a</text></svg>")
    assert "%22" in quoted and "'DejaVu Sans'" in unquote(quoted)
