"""A lengths file (`sequence_lengths`) as a hostile user gives it (issue 18, items 6, 8, 9 and 18):
an error names the line or sample and the problem, never the file's content; a directory, an
oversized file or an .npy header that claims a huge array gets its own one-line message before
anything is allocated; a byte order mark is accepted; floats are checked before they are cast."""

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hang import hang_limit

from costmodel.errors import CostModelError
from costmodel.inputs import lengths, scenario

SECRET = "hunter2-7f3a9c"


def report(tmp_path: Path, path, env=None):
    """`costmodel report` with sequence_lengths = path, in a subprocess with a timeout."""
    return subprocess.run(
        [sys.executable, "-m", "costmodel", "report", "--set", f"sequence_lengths={path}"],
        capture_output=True,
        text=True,
        timeout=hang_limit(1),
        cwd=tmp_path,
        env=env,
    )


def refused(result, message: str) -> str:
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("costmodel: error: sequence_lengths '")
    assert message in result.stderr, result.stderr
    return result.stderr


def npy_bytes(header: dict, data: bytes = b"") -> bytes:
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, header)
    return stream.getvalue() + data


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("l.txt", f"100\n200\n{SECRET}\n", "line 3 (not a positive integer) is not allowed"),
        ("l.txt", f"100\n\n  {SECRET}  \n", "line 3 (not a positive integer)"),
        ("l.txt", "100\n4815162342\n", "line 2 (a length above 100,000,000) is not allowed"),
        ("l.txt", "7" * 5000 + "\n", "line 1 (a length above 100,000,000)"),
        ("l.csv", f"{SECRET},count\n1,2\n", "a CSV header without a 'length' column is not"),
        ("l.csv", f"id,length\n1,100\n2,{SECRET}\n", "line 3 (not a positive integer)"),
        ("l.csv", f"id,length\n1,100\n{SECRET}\n", "line 3 (no length)"),
        ("l.csv", f"id,length\n1,100\n2,{SECRET * 20000}\n", "line 3 (not valid CSV)"),
        ("l.npy", f"root:{SECRET}:19000:0:99999:7:::\n", "a file without a valid .npy header"),
    ],
    ids=["text", "text-spaces", "text-number", "text-5000-digits", "csv-header", "csv-cell",
         "csv-short-row", "csv-huge-field", "npy-text"],
)  # fmt: skip
def test_an_error_never_shows_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    stderr = refused(report(tmp_path, path), message)
    for secret in (SECRET, "4815162342", "4,815,162,342", "root:", "7777777"):
        assert secret not in stderr


def test_an_npy_header_never_shows_the_file(tmp_path):
    # a record array whose field name is the secret; and a header NumPy cannot parse
    path = tmp_path / "records.npy"
    np.save(path, np.zeros(2, dtype=[(SECRET, "<i8")]))
    assert SECRET not in refused(report(tmp_path, path), "an array of records is not allowed")
    path = tmp_path / "header.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + (16).to_bytes(2, "little") + SECRET.encode() + b"\n")
    assert SECRET not in refused(report(tmp_path, path), "a file without a valid .npy header")


def test_the_environment_of_the_process_is_not_shown(tmp_path):
    env = {"COSTMODEL_SECRET": SECRET, **os.environ}  # the first line of /proc/self/environ
    stderr = refused(report(tmp_path, "/proc/self/environ", env), "line 1 (not a positive")
    assert SECRET not in stderr and "COSTMODEL_SECRET" not in stderr


def test_a_directory_and_an_oversized_file_say_so(tmp_path):
    refused(report(tmp_path, tmp_path), f"'{tmp_path}': is a directory; expected a file")
    big = tmp_path / "big.txt"
    with big.open("wb") as stream:  # sparse: 64 MiB + 1 byte
        stream.truncate(lengths.MAX_LENGTHS_BYTES + 1)
    refused(
        report(tmp_path, big),
        "67,108,865 bytes is not allowed; expected at most 67,108,864 bytes (64 MiB)",
    )


@pytest.mark.parametrize(
    "name,content",
    [("l.txt", "100\n300\n"), ("l.csv", "length,id\n100,1\n300,2\n"), ("l", "100\r\n300\r\n")],
)
def test_a_byte_order_mark_is_accepted(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + content.encode())
    assert lengths.read_lengths(path) == [100, 300]
    assert (
        scenario.resolve(overrides={"sequence_lengths": str(path)})["mean_tokens_per_sample"] == 200
    )


def test_an_npy_header_claiming_a_huge_array_is_refused_before_allocating(tmp_path):
    path = tmp_path / "huge.npy"
    data = npy_bytes({"descr": "<i8", "fortran_order": False, "shape": (10**15,)}, b"\1" * 81)
    path.write_bytes(data)
    assert len(data) == 209
    refused(
        report(tmp_path, path), "1,000,000,000,000,000 lengths is not allowed; expected at most"
    )
    cases = [
        ({"descr": "<i8", "fortran_order": False, "shape": (5_000_000,)}, b"\1" * 8,
         "8 bytes of data for 5,000,000 values of 8 bytes is not allowed"),
        ({"descr": "<i8", "fortran_order": False, "shape": (10**6, 10**6)}, b"",
         "an array of 2 dimensions is not allowed; expected a 1-D array"),
        ({"descr": "|O", "fortran_order": False, "shape": (1,)}, b"\x80\x04N.",
         "an array of Python objects is not allowed"),
        ({"descr": "<c16", "fortran_order": False, "shape": (1,)}, b"\0" * 16,
         "an array of complex numbers is not allowed"),
        ({"descr": "<i8", "fortran_order": False, "shape": (0,)}, b"",
         "a file with no lengths is not allowed"),
    ]  # fmt: skip
    for header, body, message in cases:
        path.write_bytes(npy_bytes(header, body))
        with pytest.raises(CostModelError) as error:
            lengths.read_lengths(path)
        assert message in str(error.value)


@pytest.mark.parametrize(
    "values,message",
    [
        ([100.0, 1e300], "sample 2 (a length above 100,000,000)"),
        ([-1e300], "sample 1 (not a positive integer)"),
        ([np.nan], "sample 1 (not a whole number)"),
        ([100.0, np.inf], "sample 2 (not a whole number)"),
        ([2.5], "sample 1 (not a whole number)"),
        ([0.0], "sample 1 (not a positive integer)"),
    ],
)
def test_npy_floats_are_checked_before_the_cast(tmp_path, values, message):
    path = tmp_path / "l.npy"
    np.save(path, np.array(values))
    refused(report(tmp_path, path), message)  # no RuntimeWarning, no negative length


def test_npy_integers_of_any_width_and_byte_order(tmp_path):
    for dtype in (">u2", "<i4", ">i8", "<u8", "<f4"):
        path = tmp_path / "l.npy"
        np.save(path, np.array([100, 300], dtype=dtype))
        assert lengths.read_lengths(path) == [100, 300]
    np.save(path, np.array([10**8 + 1], dtype="<u8"))
    with pytest.raises(CostModelError, match=r"sample 1 \(a length above 100,000,000\)"):
        lengths.read_lengths(path)


@pytest.mark.parametrize("dtype", ["<f2", ">f2", "<f4"])
def test_npy_half_floats_read_without_a_warning(tmp_path, dtype, capsys):
    """A float16 (or float32) lengths file: read, checked and refused as float64 would be, with
    no NumPy RuntimeWarning (MAX_LENGTH cast to float16 overflowed: two warning lines on every
    `costmodel report`)."""
    import warnings

    from costmodel.cli import main

    path = tmp_path / "l.npy"
    np.save(path, np.array([1000, 2048, 65504], dtype=dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lengths.read_lengths(path) == [1000, 2048, 65504]
        for bad, message in (([1000, np.inf], "sample 2 (not a whole number)"), ([0.5], "whole")):
            np.save(path, np.array(bad, dtype=dtype))
            with pytest.raises(
                CostModelError, match=message.replace("(", r"\(").replace(")", r"\)")
            ):
                lengths.read_lengths(path)
    np.save(path, np.array([1000, 2048], dtype=dtype))
    assert main(["report", "--set", f"sequence_lengths={path}"]) == 0
    assert capsys.readouterr().err == ""
