"""Layer 4, present: number formats, the report as text/Markdown/JSON, the GEMM and parameter
tables, and the notebooks' display helpers (computed prose, tables, equations, MathML). The
publishing machinery (pages, index, booklet, the output folder, workers, signals) is
costmodel.publish, the layer after this one."""
