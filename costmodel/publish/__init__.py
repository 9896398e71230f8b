"""Layer 5, publish: the machinery that turns the course into files a reader opens. The
notebook suite and its execution (suite, runner), the handouts build (handouts) with its pages,
index and booklet (pages, index, booklet), the output-folder rule and its manifests (output,
manifest), the atomic swap (swap), the workers (workers) and the signals that stop a build
(signals), temporary folders that record their owner (tempdirs), and the scratch copy that
JupyterLab opens (lab). It may import every layer before it; nothing but the command line
imports it."""
