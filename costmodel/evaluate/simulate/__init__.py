"""evaluate.simulate: the step-time model and a team's run. Public face: step_time.predict (the
predicted step, part by part), compute_time.compute, gemms.model_gemms, linear.linear_attention,
stage (the dispatch and stage rules one formula uses for floats and for NumPy arrays), run
(memory, communication, the changes that make a run fit)."""
