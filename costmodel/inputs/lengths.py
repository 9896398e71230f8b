"""Real sample lengths (scenario key `sequence_lengths`): a file read once, checked, summarized.

Three formats, by the file's name: `.npy` (a 1-D integer NumPy array, no pickles), `.csv` (a
header with a `length` column) or anything else (one integer per line; blank lines are skipped).
A text or CSV file may start with a UTF-8 byte order mark. The file must be a regular file (not a
FIFO or a device); an error names the line (or the .npy sample) and the problem, never the
file's content.
Every length must be a positive integer up to MAX_LENGTH. Samples longer than the scenario's
seq_len are truncated to it (their lost tokens are reported), in padded and packed batching
alike.

If the file holds exactly samples_per_step lengths it is one step, exactly: D = sum of the
(truncated) lengths and the attention's sum of squares is theirs. Otherwise it is a distribution:
its mean and mean of squares are scaled to samples_per_step samples.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from costmodel.errors import CostModelError
from costmodel.inputs.config import read_bytes
from costmodel.records import frozen_dataclass

if TYPE_CHECKING:
    import numpy as np


def _numpy():
    """NumPy, imported when a lengths file is read (not by every `costmodel report`)."""
    import numpy

    return numpy


#: The largest lengths file read (about 8 million lengths as text).
MAX_LENGTHS_BYTES = 64 << 20  # 64 MiB
MAX_LENGTHS = 10_000_000
MAX_LENGTH = 10**8  # the bound of seq_len
_ALLOWED = f"a positive integer length up to {MAX_LENGTH:,}"


@frozen_dataclass
class Lengths:
    """A lengths file, summarized against one scenario (seq_len, samples_per_step)."""

    path: str
    raw: tuple[int, ...]  # as read (before truncation)
    seq_len: int
    samples_per_step: int

    @property
    def count(self) -> int:
        return len(self.raw)

    @property
    def exact_step(self) -> bool:
        """The file is one step: it holds exactly samples_per_step lengths."""
        return self.count == self.samples_per_step

    @property
    def truncated(self) -> np.ndarray:
        np = _numpy()
        return np.minimum(np.asarray(self.raw, dtype=np.int64), self.seq_len)

    @property
    def mean(self) -> float:
        """Mean real tokens per sample, after truncation to seq_len."""
        return int(self.truncated.sum()) / self.count

    @property
    def mean_of_squares(self) -> float:
        t = self.truncated.astype(float)
        return float(t @ t) / self.count

    @property
    def truncated_samples(self) -> int:
        return sum(1 for x in self.raw if x > self.seq_len)

    @property
    def truncated_tokens(self) -> int:
        return sum(x - self.seq_len for x in self.raw if x > self.seq_len)

    @property
    def sum_of_squares_per_step(self) -> float:
        """Sum of s_i^2 over one step's samples (exact, or the mean of squares x samples)."""
        return self.mean_of_squares * self.samples_per_step

    def summary(self) -> dict:
        """The report's `lengths` object."""
        scale = 1 if self.exact_step else self.samples_per_step / self.count
        return {
            "file": self.path,
            "count": self.count,
            "reading": "one step, exactly"
            if self.exact_step
            else f"a distribution, scaled to samples_per_step = {self.samples_per_step:,}",
            "mean": self.mean,
            "mean_of_squares": self.mean_of_squares,
            "longest": int(max(self.raw)),
            "truncated_samples": self.truncated_samples,
            "truncated_tokens": self.truncated_tokens,
            "truncated_samples_per_step": self.truncated_samples * scale,
            "truncated_tokens_per_step": self.truncated_tokens * scale,
        }


def _label(path: Path) -> str:
    return f"sequence_lengths '{path}'"


def _fail(path: Path, what: str, allowed: str) -> CostModelError:
    """One line naming the place in the file and the problem, never the file's content (the path
    may name any file: its text is not shown)."""
    return CostModelError(f"{_label(path)}: {what} is not allowed; expected {allowed}")


def _integer(path: Path, text: str, where: str) -> int:
    stripped = text.strip().replace("_", "")
    digits = stripped.lstrip("0")
    if not (stripped.isascii() and stripped.isdigit() and digits):
        raise _fail(path, f"{where} (not a positive integer)", _ALLOWED)
    if len(digits) > 12 or int(digits) > MAX_LENGTH:
        raise _fail(path, f"{where} (a length above {MAX_LENGTH:,})", _ALLOWED)
    return int(digits)


def _too_many(path: Path) -> CostModelError:
    return _fail(path, f"more than {MAX_LENGTHS:,} lengths", f"at most {MAX_LENGTHS:,}")


def _from_text(path: Path, text: str) -> list[int]:
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            values.append(_integer(path, line, f"line {number}"))
            if len(values) > MAX_LENGTHS:
                raise _too_many(path)
    return values


def _from_csv(path: Path, text: str) -> list[int]:
    import csv  # only for a .csv lengths file

    reader = csv.reader(io.StringIO(text))
    values: list[int] = []
    try:
        header = next(reader, None)
        if header is None:
            return values
        names = [name.strip() for name in header]
        if "length" not in names:  # the header is the file's content too: not shown
            raise _fail(path, "a CSV header without a 'length' column", "a 'length' column")
        column = names.index("length")
        for row in reader:
            if not row or not any(cell.strip() for cell in row):
                continue
            where = f"line {reader.line_num}"
            if column >= len(row):
                raise _fail(path, f"{where} (no length)", "a 'length' on every row")
            values.append(_integer(path, row[column], where))
            if len(values) > MAX_LENGTHS:
                raise _too_many(path)
    except csv.Error:  # e.g. a field over csv's limit; its message may quote the file
        raise _fail(path, f"line {reader.line_num} (not valid CSV)", "a CSV file") from None
    return values


#: What an .npy array of another kind of values holds, as the error says it.
_KINDS = {
    "b": "booleans",
    "c": "complex numbers",
    "m": "time spans",
    "M": "dates",
    "O": "Python objects",
    "S": "bytes",
    "U": "text",
    "V": "records",
}


def _npy_header(path: Path, stream: io.BytesIO):
    """(count, dtype) of a 1-D .npy file, read from its header alone: nothing is allocated for
    the data, and NumPy's messages (which quote the file) are not shown."""
    from numpy.lib import format as npy

    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    try:
        reader = readers.get(npy.read_magic(stream))
        header = reader(stream) if reader else None
    except (ValueError, OSError, EOFError, SyntaxError, TypeError, RecursionError):
        header = None
    if header is None or any(size < 0 for size in header[0]):
        raise _fail(path, "a file without a valid .npy header", "a NumPy .npy file")
    shape, _, dtype = header
    if len(shape) != 1:
        raise _fail(path, f"an array of {len(shape)} dimensions", "a 1-D array")
    return shape[0], dtype


def _from_npy(path: Path, data: bytes) -> list[int]:
    np = _numpy()
    stream = io.BytesIO(data)
    count, dtype = _npy_header(path, stream)
    if count > MAX_LENGTHS:
        raise _fail(path, f"{count:,} lengths", f"at most {MAX_LENGTHS:,}")
    if dtype.hasobject or dtype.kind not in "iuf" or dtype.shape:
        kind = _KINDS.get(dtype.kind, "values of another kind")
        raise _fail(path, f"an array of {kind}", "an integer array (or floats of whole numbers)")
    body = data[stream.tell() :]
    if len(body) != count * dtype.itemsize:
        raise _fail(
            path,
            f"{len(body):,} bytes of data for {count:,} values of {dtype.itemsize} bytes",
            f"{count * dtype.itemsize:,} bytes",
        )
    return _checked_array(path, np.frombuffer(body, dtype=dtype, count=count))


def _checked_array(path: Path, array: np.ndarray) -> list[int]:
    """The values of a 1-D integer or float array, each a positive integer up to MAX_LENGTH;
    floats are checked before they are cast (1e300 is refused, not wrapped round to a negative
    integer, and nothing warns). Narrower floats are compared as float64, exactly: MAX_LENGTH
    cast to float16 would overflow (NumPy warned twice)."""
    np = _numpy()
    if array.dtype.kind == "f" and array.dtype.itemsize < 8:
        array = array.astype(np.float64)
    whole = np.isfinite(array) & (array == np.floor(array)) if array.dtype.kind == "f" else True
    ok = whole & (array >= 1) & (array <= MAX_LENGTH)
    bad = np.flatnonzero(~ok)
    if bad.size:
        first = int(bad[0])
        if array.dtype.kind == "f" and not whole[first]:
            problem = "not a whole number"
        elif array[first] < 1:
            problem = "not a positive integer"
        else:
            problem = f"a length above {MAX_LENGTH:,}"
        raise _fail(path, f"sample {first + 1} ({problem})", _ALLOWED)
    return array.astype(np.int64).tolist()


def read_lengths(path: str | Path) -> list[int]:
    """The lengths in a file, each checked: a positive integer up to MAX_LENGTH; at least one and
    at most MAX_LENGTHS of them. A UTF-8 byte order mark at the start of a text or CSV file is
    skipped. Raises CostModelError with a one-line message that names the line (or sample) and
    the problem, never the file's content."""
    path = Path(path)
    data = read_bytes(path, _label(path), MAX_LENGTHS_BYTES)
    if path.suffix.lower() == ".npy":
        values = _from_npy(path, data)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CostModelError(
                f"{_label(path)}: cannot be read (not UTF-8 at byte {exc.start})"
            ) from None
        values = _from_csv(path, text) if path.suffix.lower() == ".csv" else _from_text(path, text)
    if not values:
        raise _fail(path, "a file with no lengths", "at least one length")
    return values


def summarize(path: str | Path, seq_len: int, samples_per_step: int) -> Lengths:
    values = read_lengths(path)
    return Lengths(str(path), tuple(values), int(seq_len), int(samples_per_step))
