"""The hostile scenario names of the readers' edition that tests/conftest.py's `hostile_readers`
builds once for two modules: tests/present/test_escaping.py (links, control characters, the
booklet's title) and tests/publish/test_handouts.py (code hidden, no script runs). The build's
name is the two one after the other (200 characters at most: fields.MAX_NAME_CHARACTERS); each
test checks its own part, which must show as written inside the whole."""

#: Links of every kind an autolinker finds, HTML, a table's pipe, a terminal escape and a
#: right-to-left override (test_escaping).
HANDOUT_NAME = (
    "see https://evil.example/x and www.evil.example and a@b.co <b>x</b> | y \x1b[2J\u202e!"
)
HANDOUT_NAME_SHOWN = (
    r"see https://evil.example/x and www.evil.example and a@b.co <b>x</b> | y \x1b[2J\u202e!"
)
#: A name that would run script in every page if it were inserted unescaped (test_handouts).
HOSTILE = (
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> '
    "*bold* $x$ [link](javascript:window.__pwned=3)"
)
#: The build's inputs: both names, and a step time of its own.
READERS = {"step_time": 90, "name": f"{HANDOUT_NAME} {HOSTILE}"}
#: The build's name as the pages and the booklet's title show it.
READERS_SHOWN = f"{HANDOUT_NAME_SHOWN} {HOSTILE}"
