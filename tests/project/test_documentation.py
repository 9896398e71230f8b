"""The documentation (issue 37): README.md is a front door of at most 250 lines, every relative
link and anchor in it and in docs/ resolves, and every command the tutorial shows runs and prints
what the page shows."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hang import hang_limit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "tutorial.md"
README_MAX_LINES = 250

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code (links there are not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped (letters, digits,
    spaces, '-' and '_' kept), spaces to '-'."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown page, repeated ones numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of a page whose file or anchor does not exist."""
    bad = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target} (no such heading)")
    return bad


def test_slugs_are_githubs():
    assert slug("A grid of scenarios: `costmodel sweep`") == "a-grid-of-scenarios-costmodel-sweep"
    assert slug("1. Your model: its config.json") == "1-your-model-its-configjson"
    assert slug("What's in a step (6ND)") == "whats-in-a-step-6nd"


def test_the_checker_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Two words\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#two-words) [gone](c.md) [bad](a.md#three) `[code](x.md)`\n"
        "```\n[fenced](y.md)\n```\n[self](#nowhere)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "c.md (no such file)",
        "a.md#three (no such heading)",
        "#nowhere (no such heading)",
    ]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert not broken_links(page), broken_links(page)


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    # the two commands first, unchanged
    first = next(i for i, line in enumerate(lines) if line.startswith("## "))
    assert lines[first] == "## Two commands"
    block = "\n".join(lines[first : first + 8])
    assert "make handouts" in block and "make test" in block


def test_every_docs_page_is_reachable_from_the_readme():
    """Each page in docs/ is linked from README.md or from docs/README.md, the guide's index."""
    linked = set()
    for page in (ROOT / "README.md", DOCS / "README.md"):
        for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
            linked.add((page.parent / target.partition("#")[0]).resolve())
    missing = [
        p.name for p in DOCS.glob("*.md") if p.resolve() not in linked and p.name != "README.md"
    ]
    assert not missing, missing


# ------------------------------------------------------------------ the tutorial's commands


def console_blocks(text: str) -> list[tuple[str, list[str]]]:
    """Each `console` block's command (its `$ ` line) and the output lines the page shows."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.strip() == "```console":
            current = []
        elif current is not None and line.strip() == "```":
            command = current[0]
            assert command.startswith("$ "), command
            blocks.append((command[2:], current[1:]))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def shown_in(shown: list[str], actual: list[str]) -> str | None:
    """None where `shown` is `actual` with runs of lines left out at each '...' line, else the
    first shown line that is not where the page says."""
    pos = 0
    gap = False
    for line in shown:
        if line == "...":
            gap = True
            continue
        if gap:
            while pos < len(actual) and actual[pos] != line:
                pos += 1
        if pos >= len(actual) or actual[pos] != line:
            return line
        pos += 1
        gap = False
    if not gap and pos != len(actual):
        return f"(the page ends; the command printed {len(actual) - pos} more lines)"
    return None


def test_shown_in():
    actual = ["a", "b", "c", "d"]
    assert shown_in(["a", "...", "c", "d"], actual) is None
    assert shown_in(["a", "b", "..."], actual) is None
    assert shown_in(["a", "c", "..."], actual) == "c"  # no gap marked
    assert shown_in(["a", "b"], actual).startswith("(the page ends")
    assert shown_in(["...", "x"], actual) == "x"


#: What the tutorial writes for the folder it is run in (a command prints an absolute path).
CHECKOUT = "~/costmodel"


@pytest.mark.parametrize(
    "command, shown", console_blocks(TUTORIAL.read_text(encoding="utf-8")), ids=lambda x: ""
)
def test_the_tutorials_commands_print_what_it_shows(command, shown, tmp_path):
    """Each command run as the page shows it, from a checkout's root: here a folder whose
    `scenarios/` is the repository's, so what the commands write lands in the test's folder."""
    args = shlex.split(command)
    assert args[0] == ".venv/bin/costmodel", command
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    done = subprocess.run(
        [sys.executable, "-m", "costmodel", *args[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=hang_limit(20),
    )
    printed = (done.stdout + done.stderr).replace(str(tmp_path), CHECKOUT)
    wrong = shown_in(shown, printed.splitlines())
    assert wrong is None, f"{command}\nnot as shown: {wrong}\nprinted:\n{printed}"
    assert done.returncode == (2 if "error:" in "\n".join(shown) else 0)


def test_the_tutorials_scenario_is_the_file_it_shows():
    text = TUTORIAL.read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block == (ROOT / "scenarios" / "tutorial-qwen3-8b.yaml").read_text(encoding="utf-8")


def test_the_tutorials_config_is_the_published_preset():
    """The tutorial reads a team's own config.json; the file is the shipped preset's, unchanged."""
    preset = ROOT / "costmodel" / "inputs" / "presets" / "qwen3-8b.json"
    assert (ROOT / "scenarios" / "configs" / "qwen3-8b.json").read_bytes() == preset.read_bytes()
