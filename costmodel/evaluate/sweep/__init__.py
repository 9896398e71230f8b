"""evaluate.sweep: `costmodel sweep`. Public face: sweep.evaluate_grid (a grid of points),
sweep_axes.parse_axis (the --vary axes), sweep_points.point (a point's scenario, by the one
what-if path) and evaluate_point (its figures)."""
