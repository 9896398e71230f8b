"""evaluate.levers: what to fix first. Public face: advice.advice (the levers ranked, each the
scenario changed by the one what-if path and predicted again), lever.Lever, levers (one
function per lever), router (the simulated router) and its generated table."""
