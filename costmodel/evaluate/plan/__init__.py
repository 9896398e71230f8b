"""evaluate.plan: `costmodel plan`. Public face: plan.search (the layouts ranked), plan.limits,
plan.as_scenario, plan_findings.findings, plan_base.rebase; plan_space (the layouts searched),
plan_eval.Evaluator and plan_batch.Batch (the models' formulas over arrays of layouts), layouts
(the CP sizes and layouts notebooks show)."""
