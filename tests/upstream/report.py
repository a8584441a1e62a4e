"""Agreement counts of the differential tests, printed at the end of the run."""

from collections import defaultdict

RESULTS: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"agree": [], "disagree": []})
SKIPPED: dict[str, int] = defaultdict(int)  # table -> cases not compared, and why in the table's name


def record(table: str, agrees: bool, name: str) -> None:
    RESULTS[table]["agree" if agrees else "disagree"].append(name)


def skipped(table: str) -> None:
    SKIPPED[table] += 1


def lines() -> list[str]:
    out = [f"{table}: {count} case(s) not compared" for table, count in sorted(SKIPPED.items())]
    for table, result in sorted(RESULTS.items()):
        agree, disagree = len(result["agree"]), len(result["disagree"])
        out.append(f"{table}: ours agrees with upstream on {agree} of {agree + disagree}")
    return out
