"""costmodel: the arithmetic of training efficiency as SymPy derivations.

Data flows one way: scenario -> resolved inputs -> SymPy expressions -> numbers -> text/JSON.
Modules, one concept each: symbols, flops, recompute, utilization, padding, attention,
roofline, hardware, models, scenario, report, cli.
"""

__version__ = "0.1.0"
