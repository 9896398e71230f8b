"""Real sample lengths (scenario key `sequence_lengths`): a file read once, checked, summarized.

Three formats, by the file's name: `.npy` (a 1-D integer NumPy array, no pickles), `.csv` (a
header with a `length` column) or anything else (one integer per line; blank lines are skipped).
Every length must be a positive integer up to MAX_LENGTH. Samples longer than the scenario's
seq_len are truncated to it (their lost tokens are reported), in padded and packed batching
alike.

If the file holds exactly samples_per_step lengths it is one step, exactly: D = sum of the
(truncated) lengths and the attention's sum of squares is theirs. Otherwise it is a distribution:
its mean and mean of squares are scaled to samples_per_step samples.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from costmodel.errors import CostModelError
from costmodel.formats import shown

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


@dataclass(frozen=True)
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


def _fail(path: Path, what: str, allowed: str) -> CostModelError:
    return CostModelError(f"sequence_lengths '{path}': {what} is not allowed; expected {allowed}")


def _read_bytes(path: Path) -> bytes:
    try:
        if path.is_dir():
            raise CostModelError(f"sequence_lengths '{path}': is a directory; expected a file")
        size = path.stat().st_size
        if size > MAX_LENGTHS_BYTES:
            raise _fail(path, f"{size:,} bytes", f"at most {MAX_LENGTHS_BYTES:,} bytes (64 MiB)")
        with path.open("rb") as stream:
            data = stream.read(MAX_LENGTHS_BYTES + 1)
    except FileNotFoundError:
        raise CostModelError(f"sequence_lengths '{path}': no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise CostModelError(f"sequence_lengths '{path}': cannot be read ({reason})") from None
    if len(data) > MAX_LENGTHS_BYTES:
        raise _fail(path, "more than 64 MiB", f"at most {MAX_LENGTHS_BYTES:,} bytes (64 MiB)")
    return data


def _integer(path: Path, text: str, where: str) -> int:
    stripped = text.strip().replace("_", "")
    if not (stripped.isascii() and stripped.isdigit()) or len(stripped) > 12:
        raise _fail(path, f"{shown(text.strip(), 40)} ({where})", "a positive integer length")
    return int(stripped)


def _from_text(path: Path, text: str) -> list[int]:
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            values.append(_integer(path, line, f"line {number}"))
    return values


def _from_csv(path: Path, text: str) -> list[int]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    names = [name.strip() for name in header or []]
    if "length" not in names:
        raise _fail(path, f"a CSV header {shown(','.join(names), 80)}", "a 'length' column")
    column = names.index("length")
    values = []
    for number, row in enumerate(reader, 2):
        if not row or not any(cell.strip() for cell in row):
            continue
        if column >= len(row):
            raise _fail(path, f"row {number} without a length", "a 'length' on every row")
        values.append(_integer(path, row[column], f"line {number}"))
    return values


def _from_npy(path: Path, data: bytes) -> list[int]:
    np = _numpy()
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise CostModelError(f"sequence_lengths '{path}': not a NumPy .npy file ({exc})") from None
    if not isinstance(array, np.ndarray) or array.ndim != 1:
        raise _fail(path, f"an array of shape {getattr(array, 'shape', '?')}", "a 1-D array")
    if array.dtype.kind not in "iu":
        if (
            array.dtype.kind == "f"
            and np.all(np.isfinite(array))
            and np.all(array == np.round(array))
        ):
            array = array.astype(np.int64)
        else:
            raise _fail(path, f"an array of dtype {array.dtype}", "an integer array")
    return [int(v) for v in array]


def read_lengths(path: str | Path) -> list[int]:
    """The lengths in a file, each checked: a positive integer up to MAX_LENGTH; at least one and
    at most MAX_LENGTHS of them. Raises CostModelError with a one-line message."""
    path = Path(path)
    data = _read_bytes(path)
    if path.suffix.lower() == ".npy":
        values = _from_npy(path, data)
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CostModelError(
                f"sequence_lengths '{path}': cannot be read (not UTF-8 at byte {exc.start})"
            ) from None
        values = _from_csv(path, text) if path.suffix.lower() == ".csv" else _from_text(path, text)
    if not values:
        raise _fail(path, "a file with no lengths", "at least one length")
    if len(values) > MAX_LENGTHS:
        raise _fail(path, f"{len(values):,} lengths", f"at most {MAX_LENGTHS:,}")
    for index, value in enumerate(values):
        if not 1 <= value <= MAX_LENGTH:
            raise _fail(
                path,
                f"length {value:,} (sample {index + 1})",
                f"a positive integer up to {MAX_LENGTH:,}",
            )
    return values


def summarize(path: str | Path, seq_len: int, samples_per_step: int) -> Lengths:
    values = read_lengths(path)
    return Lengths(str(path), tuple(values), int(seq_len), int(samples_per_step))
