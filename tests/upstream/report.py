"""Agreement counts of the differential tests, printed at the end of the run."""

from collections import defaultdict

RESULTS: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"agree": [], "disagree": []})


def record(table: str, agrees: bool, name: str) -> None:
    RESULTS[table]["agree" if agrees else "disagree"].append(name)


def lines() -> list[str]:
    out = []
    for table, result in sorted(RESULTS.items()):
        agree, disagree = len(result["agree"]), len(result["disagree"])
        out.append(f"{table}: ours agrees with upstream on {agree} of {agree + disagree}")
    return out
