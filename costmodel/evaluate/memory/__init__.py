"""evaluate.memory: the memory model. Public face: gpu_memory.most_loaded (the bytes on the most
loaded GPU, by phase), capacity, stage_params, model_states, stage_phases (each one formula for a
scenario's floats and for the plan's arrays of layouts)."""
