"""Layer 2, inputs: what a scenario may say and where every value comes from: the scenario keys
and their validation, the GPU table, model shapes read from config.json, the course's
assumptions (each with its source), the shipped presets and scenarios."""
