"""Load a module of benchmarks/ by its path (benchmarks/ is not a package)."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(stem: str, name: str):
    """benchmarks/<stem>.py as module ``name``, registered in sys.modules (dataclasses look
    their module up there); loaded once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
