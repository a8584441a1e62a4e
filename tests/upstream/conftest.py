import pytest

from tests.upstream.oracle import Oracle, OracleUnavailable, build


@pytest.fixture(scope="session")
def oracle():
    try:
        binary = build()
    except OracleUnavailable as exc:
        pytest.skip(str(exc))
    judge = Oracle(binary)
    yield judge
    judge.close()


def pytest_terminal_summary(terminalreporter):
    from tests.upstream.report import lines

    report = lines()
    if report:
        terminalreporter.write_sep("-", "dra-bridge vs upstream Kubernetes")
        for line in report:
            terminalreporter.write_line(line)
