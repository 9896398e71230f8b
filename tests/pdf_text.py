"""The text a printed PDF holds, page by page, for the tests that read a booklet.

PDFium's text layer (pypdfium2) reads the course's 118-page student booklet in about 0.4 s of CPU;
pypdf's `extract_text` took 8 s for the same pages (its CJK font maps are decoded in Python), and
the tests read four booklets. pypdf still reads the PDF's structure (fonts, metadata) where a
test checks that. A file's pages are read once per process (keyed by its path, size and
modification time): the tests of one module read the same booklet more than once.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path


def page_texts(pdf: str | os.PathLike) -> list[str]:
    """Each page's text, lines separated by "\\n"."""
    stat = Path(pdf).stat()
    return list(_read(str(Path(pdf).resolve()), stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _read(path: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        texts = []
        for page in document:
            textpage = page.get_textpage()
            texts.append(_plain(textpage.get_text_range()))
            textpage.close()
            page.close()
        return tuple(texts)
    finally:
        document.close()


def text(pdf: str | os.PathLike) -> str:
    """The whole document's text, its pages joined by a line break."""
    return "\n".join(page_texts(pdf))


def _plain(text: str) -> str:
    """PDFium's text as written: its line ends as "\\n", and the hyphen it marks where a word
    was broken at a line end (U+FFFE, the line end dropped) as that hyphen and line end."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "-\n")
