"""The one set of number formats (costmodel.formats), against strings written by hand."""

import math

from costmodel import formats as f


def test_percent_scientific_and_counts():
    assert f.pct(0.0585304) == "5.85%" and f.pct(0.413, 1) == "41.3%" and f.pct(None) == "n/a"
    assert f.sci(4.158e16) == "4.16e16" and f.sci(2.31e6, 4) == "2.310e6"
    assert f.sci4(346.5) == "346.5" and f.sci4(4.158e16) == "4.1580e+16"
    assert f.num(2_310_000) == "2,310,000" and f.num(None) == "n/a"
    assert f.count(28875) == "28,875" and f.count(1.5) == "1.50" and f.count(2.0) == "2"
    assert f.tflops(148e12) == "148.0 TFLOP/s" and f.gb(14.9e9) == "14.9 GB"
    assert f.times(1.7) == "1.70×" and f.times(math.inf) == "∞" and f.seconds(70.59) == "70.6 s"


def test_inputs_and_table_values():
    assert f.input_value(3e9) == "3,000,000,000" and f.input_value(148e12) == "1.48e+14"
    assert f.input_value(0.3) == "0.3" and f.input_value("full") == "full"
    assert f.table_value(None) == "—" and f.table_value(49152) == "49,152"


def test_tex_forms_and_csv_cells():
    assert f.tex_sci(2.31e6) == r"2.31 \times 10^{6}"
    assert f.tex_num(3_932_160) == "3{,}932{,}160"
    assert f.csv_cell("2048") == "2,048" and f.csv_cell("0.000123456") == "0.0001235"
    assert f.csv_cell("matmul_6ND") == "matmul_6ND" and f.csv_cell("nan") == "nan"


def test_limits_and_shown():
    assert f.limits(1, 10**8) == ["1", "100,000,000"]
    assert f.limits(1e-6, 1e9) == ["1e-6", "1e9"]
    assert f.shown("x" * 100).endswith("…") and len(f.shown("x" * 100)) < 60


def test_printable_without_its_pattern_for_plain_ascii():
    """printable's shortcut (printable ASCII is left as it is) gives what the pattern gives, for
    every ASCII character and a few others."""
    import re

    from costmodel import formats

    pattern = re.compile(formats._CONTROL)
    texts = [chr(c) for c in range(128)] + ["", "a\x1bb", "课程 + x", "\u202e", "\x85", "é"]
    texts += ["name " + chr(c) for c in range(0, 0x2100, 7)]
    for text in texts:
        assert formats.printable(text) == pattern.sub(formats._escape, text), repr(text)


def test_names_and_surrogates_without_patterns():
    """A config's name field (letters, digits, _ . -, 1 to 100 of them) and a scenario text's
    lone surrogate are found as the patterns they replace found them."""
    import re

    from costmodel.errors import CostModelError
    from costmodel.inputs import fields
    from costmodel.inputs.config import Fields

    name = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
    for value in [
        "silu",
        "gelu_pytorch_tanh",
        "a.b-c",
        "x" * 100,
        "x" * 101,
        "",
        "a b",
        "é",
        "a\n",
    ]:
        try:
            got = Fields({"hidden_act": value}, "llama").name_field("hidden_act", "silu")
        except CostModelError:
            got = None
        assert (got == value) == bool(name.fullmatch(value)), repr(value)
    surrogate = re.compile("[\ud800-\udfff]")
    for text in ["plain", "课程", "a\ud800b", "\udfff", "\U0001f600", ""]:
        assert fields._has_surrogate(text) == bool(surrogate.search(text)), repr(text)
