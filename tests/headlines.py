"""Each notebook's headline number for a scenario: the handouts test and the notebooks'
re-run test look for it (tests/ is on sys.path for the test modules)."""


def section_headlines(account) -> dict[str, str]:
    """Each section's headline number, formatted as the notebooks format it."""
    from costmodel.present import display as d

    return {
        "01": d.pct(account["mfu"]),
        "02": d.sci(account["model_flops_per_step"]),
        "03": d.pct(account["hfu"]),
        "04": d.pct(account["padding"]["waste_fraction"]),
        "05": d.pct(account["attention"]["padded"]["share"]),
        "06": d.num(account["tokens_per_expert"]),
        "07": f"{account['machine_balance']:.1f}",
        "08": d.times(account["padding"]["packing_speedup"]),
        "09": d.pct(account["mfu_if_total_params"]),
        "10": f"{account['padding']['step_time_after_packing']:.1f} s",
    }
