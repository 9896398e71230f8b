"""Layer 4, present: number formats, the report as text/Markdown/JSON, the notebooks' display
helpers, the notebook suite and the handouts (HTML, index, templates)."""
