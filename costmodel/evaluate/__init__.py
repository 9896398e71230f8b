"""Layer 3, evaluate: numbers for one scenario, grouped by feature. Each group's public face is
its modules' public names (no private name is imported across modules: tests/project); a group
package defines no names of its own, so `from costmodel.evaluate.plan import plan` is always the
module. The groups (the step-time model and the memory share `simulate.stage`, so those two
import each other; `plan` and `sweep` import the rest, nothing imports them):

- simulate: the step-time model (step_time.predict, compute_time.compute, gemms.model_gemms,
  linear.linear_attention, stage: one formula for floats and for arrays) and a team's run
  (run: memory, communication, the fit changes);
- memory: the bytes on the most loaded GPU (gpu_memory.most_loaded, stage_params, stage_phases);
- communication: the collectives of a step and what compute hides (communication.communication,
  exposed; comm_rows, comm_overlap, comm_placement);
- account: the cost account (account.account), the course's claims, packing beyond the account;
- levers: the levers ranked (advice.advice), each a what-if of the scenario; the router;
- plan: `costmodel plan` (plan.search; the layouts it enumerates, plan_space; its evaluator over
  arrays of layouts, plan_eval and plan_batch);
- sweep: `costmodel sweep` (sweep.evaluate_grid; sweep_axes, sweep_points).
"""
