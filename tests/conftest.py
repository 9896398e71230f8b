import contextlib
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from costmodel.evaluate.account.account import account
from costmodel.inputs import scenario

#: Hypothesis without its per-example deadline (200 ms): a time limit in the tests only detects a
#: hang (tests/hang.py), and a draw that resolves scenarios takes longer on a busy machine.
settings.register_profile("hangs-only", deadline=None)
settings.load_profile("hangs-only")

#: The one CI detector: CI set, and not to false, 0 or no. In CI no test may skip for a missing
#: tool (.ci/run installs them all).
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str):
    """A tool the test needs is missing: skip here, fail in CI."""
    if IN_CI:
        pytest.fail(f"{reason}: CI must install it (.ci/run)")
    pytest.skip(reason)


#: The environment variable naming the IPython folder this test run made (its pytest-xdist workers
#: and the programs the tests start inherit it).
OWN_IPYTHONDIR = "COSTMODEL_TEST_IPYTHONDIR"
#: The kernels' settings there: their history in memory, not in the user's history.sqlite.
KERNEL_CONFIG = 'c.HistoryManager.hist_file = ":memory:"\n'


def pytest_configure(config):
    """Every kernel the tests start (the notebooks' runs, nbval's, a build's) reads an IPython
    folder of this test run: the tests neither write the user's ~/.ipython history (a kernel
    appended every cell to it: 2 GB after a day of test runs, and a tenth of each notebook's run
    spent storing it) nor run the user's start-up files."""
    if os.environ.get(OWN_IPYTHONDIR) and os.environ.get(OWN_IPYTHONDIR) == os.environ.get(
        "IPYTHONDIR"
    ):
        return  # a pytest-xdist worker, or a pytest a test started: the run's folder
    folder = Path(tempfile.mkdtemp(prefix="costmodel-ipython-"))
    (folder / "profile_default").mkdir()
    (folder / "profile_default" / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    config.stash[_ipython_key] = (folder, os.environ.get("IPYTHONDIR"))
    os.environ["IPYTHONDIR"] = os.environ[OWN_IPYTHONDIR] = str(folder)


def pytest_unconfigure(config):
    folder, before = config.stash.get(_ipython_key, (None, None))
    if folder is None:
        return
    shutil.rmtree(folder, ignore_errors=True)
    del os.environ[OWN_IPYTHONDIR]
    if before is None:
        os.environ.pop("IPYTHONDIR", None)
    else:
        os.environ["IPYTHONDIR"] = before


_ipython_key = pytest.StashKey[tuple]()


@contextlib.contextmanager
def tiny_torch_runs():
    """Around a test's runs of tiny torch models: one intra-op thread (a pytest-xdist worker per
    core keeps the cores busy; two threads per worker spent most of their time waiting for each
    other on these tensors), and the objects alive before the runs left out of the garbage
    collector's scans (each of costmodel.validate_memory's gc.collect() calls scanned everything
    the worker had loaded: 0.25 s, 120 calls). What the runs count and measure is the same."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def course():
    return scenario.resolve()


@pytest.fixture(scope="session")
def course_account(course):
    return account(course)


@pytest.fixture(scope="session")
def notebook_kernel():
    """One kernel for every test of a session (of a pytest-xdist worker) that executes the
    course's notebooks: reset between notebooks as the handouts build resets it, so a kernel
    start and the SymPy derivations are paid once, not once per notebook."""
    from costmodel.publish import runner, suite

    suite.inline_figures()
    runner.skip_iri_format_checks()
    kernel = runner.Kernel(suite.NOTEBOOKS)
    kernel.launch()
    yield kernel
    kernel.shutdown()


def _built_once(request, tmp_path_factory, name: str, build):
    """`build(folder)`'s result, built once per test run. Under pytest-xdist the first worker
    that asks builds it, holding a lock, in the run's temporary folder that every worker sees;
    the others wait for it and read the same build (pickled)."""
    import fcntl
    import pickle

    if not hasattr(request.config, "workerinput"):  # no pytest-xdist worker: the only process
        return build(tmp_path_factory.mktemp(name))
    top = tmp_path_factory.getbasetemp().parent / name  # the run's, every worker's
    top.mkdir(exist_ok=True)
    done = top / "built.pickle"
    with open(top / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                done.write_bytes(pickle.dumps(build(top)))
            return pickle.loads(done.read_bytes())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def course_handouts(request, tmp_path_factory):
    """The course's handouts, both editions with their booklets: (sections, folder, timings),
    built once per test run (`_built_once`: test_handouts and test_student_leaks each built it:
    20 s of a worker). The tests read it and never write into it. The build must leave the
    stored notebooks as they were: the fixture checks it."""
    import hashlib

    from costmodel.publish import handouts, suite

    def digest():
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in suite.NOTEBOOKS.glob("*.ipynb")
        }

    def build(top: Path):
        timings: dict[str, float] = {}
        before = digest()
        sections, folder = handouts.build(
            out=top / "course", progress=False, edition="both", pdf=True, timings=timings
        )
        assert digest() == before, "the stored notebooks were modified"
        return sections, folder, timings

    return _built_once(request, tmp_path_factory, "course-handouts", build)


@pytest.fixture(scope="session")
def hostile_readers(request, tmp_path_factory):
    """The readers' edition (no code, with its booklet) of a team whose scenario name is
    hostile (tests/hostile_names.py): (sections, folder, overrides), built once per test run
    for test_escaping and test_handouts (each built one of its own: 10 s of a worker)."""
    from hostile_names import READERS

    from costmodel.publish import booklet, handouts

    if not any(map(shutil.which, booklet.CHROMIUM_NAMES)):
        missing("headless Chromium (Debian package chromium) is needed for the booklet")

    def build(top: Path):
        sections, folder = handouts.build(
            overrides=READERS, out=top / "team", no_input=True, progress=False, pdf=True
        )
        return sections, folder, dict(READERS)

    return _built_once(request, tmp_path_factory, "hostile-readers", build)


#: The test modules that take longest (measured under pytest-xdist on this 2-core machine,
#: December 2026: these took 421 of the 497 s the tests took on the two workers together).
#: Under pytest-xdist (`make test`: `--dist loadscope --no-loadscope-reorder`, a module and a
#: notebook's cells stay on one worker, handed out in collection order) they are handed out
#: first: a worker that starts a long module last finishes alone. The first two compute most
#: (the extreme scenarios through every notebook, half each, in each worker's kernel: about
#: 60 s of CPU each), one on each worker; the next three wait more than they compute (signals
#: and builds, JupyterLab, the printer: run alone, 146 s for 99 s of CPU), so whichever worker
#: is free takes them while the other computes.
#: tests/course/test_notebooks.py checks that each still exists.
LONGEST_FIRST = (
    "tests/course/test_valid_space.py",
    "tests/course/test_valid_space_extremes.py",
    "tests/publish/test_handouts_safety.py",
    "tests/publish/test_lab.py",
    "tests/publish/test_booklet.py",
    "tests/publish/test_handouts.py",
    "tests/course/test_notebooks.py",
    "tests/present/test_escaping.py",
    "tests/derive/test_activations.py",
    "tests/project/test_install.py",
    "tests/course/test_team_reruns.py",
    "tests/publish/test_pages_chinese.py",
    "tests/publish/test_print_layout.py",
    "tests/evaluate/test_properties.py",
    "tests/cli/test_bad_input.py",
)


def handed_out(modules: list[str]) -> list[str]:
    """The order the modules are handed out in: LONGEST_FIRST, then the rest in their own
    order with the stored notebooks' nbval spread evenly among them. A stored notebook waits on
    a kernel of its own more than it computes (at the end of the run, the two workers on
    notebooks kept the machine 60% busy): spread, a worker waiting on one has the other
    computing."""
    stored = [m for m in modules if m.endswith(".ipynb")]
    rest = [m for m in modules if m not in LONGEST_FIRST and m not in stored]
    every = max(1, len(rest) // max(1, len(stored)))
    spread = []
    for i, module in enumerate(rest):
        if i % every == 0 and stored:
            spread.append(stored.pop(0))
        spread.append(module)
    return [m for m in LONGEST_FIRST if m in modules] + spread + stored


def pytest_collection_modifyitems(config, items):
    """In a pytest-xdist worker: the modules in the order of `handed_out`, the tests inside
    each module in their own order (a stable sort)."""
    if not hasattr(config, "workerinput"):
        return
    module = {id(item): item.nodeid.split("::")[0] for item in items}
    order = {m: i for i, m in enumerate(handed_out(list(dict.fromkeys(module.values()))))}
    items.sort(key=lambda item: order[module[id(item)]])
