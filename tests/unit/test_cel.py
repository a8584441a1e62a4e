"""The meaning of upstream k8s.io/dynamic-resource-allocation/cel cases, in our engine."""

import pytest

from app.dra import cel

DEVICE = cel.device_variable("dra.example.com", {
    "attributes": {
        "name": {"string": "gpu-0"}, "count": {"int": 4}, "enabled": {"bool": True},
        "driverVersion": {"version": "1.2.3"}, "other.example.com/model": {"string": "A"},
    },
    "capacity": {"memory": {"value": "16Gi"}, "other.example.com/cores": {"value": "8"}},
})


@pytest.mark.parametrize("expression, expected", [
    ("device.driver == 'dra.example.com'", True),
    ("device.attributes['dra.example.com'].name == 'gpu-0'", True),
    ("device.attributes['dra.example.com'].count > 3", True),
    ("device.attributes['dra.example.com'].enabled", True),
    ("device.attributes['other.example.com'].model == 'A'", True),  # fully qualified name
    ("'count' in device.attributes['dra.example.com']", True),
    ("'missing' in device.attributes['dra.example.com']", False),
    ("device.attributes['dra.example.com'].driverVersion == semver('1.2.3')", True),
    ("device.attributes['dra.example.com'].driverVersion.isGreaterThan(semver('1.2.0'))", True),
    ("device.attributes['dra.example.com'].driverVersion.isLessThan(semver('1.10.0'))", True),  # not string order
    ("device.attributes['dra.example.com'].driverVersion.major() == 1", True),
    ("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", True),
    ("device.capacity['dra.example.com'].memory == quantity('16Gi')", True),
    ("device.capacity['dra.example.com'].memory == quantity('17179869184')", True),  # same amount
    ("device.capacity['dra.example.com'].memory.compareTo(quantity('10Gi')) > 0", True),
    ("device.capacity['dra.example.com'].memory.isLessThan(quantity('1Ti'))", True),
    ("device.capacity['other.example.com'].cores.asInteger() == 8", True),
    ("device.allowMultipleAllocations", False),
    ("device.attributes['dra.example.com'].name.upperAscii() == 'GPU-0'", True),
    ("device.attributes['dra.example.com'].name.matches('^gpu-[0-9]+$')", True),
    ("['a', 'b'].exists(x, x == 'b')", True),
    ("'a,b,c'.split(',').size() == 3", True),
])
def test_expressions(expression, expected):
    assert cel.compile_selector(expression).matches(DEVICE) is expected


@pytest.mark.parametrize("expression, message", [
    ("device.attributes[", "syntax error"),
    ("nosuchfunction(device)", "undeclared reference to function 'nosuchfunction'"),
    ("request.name == 'x'", "undeclared reference to 'request'"),
    ("", "empty"),
    ("true && " * 2000 + "true", "more than the limit"),
])
def test_compile_errors(expression, message):
    with pytest.raises(cel.CelError, match=message):
        cel.compile_selector(expression)


def test_missing_attribute_is_a_runtime_error_as_upstream():
    selector = cel.compile_selector("device.attributes['dra.example.com'].missing == 1")
    with pytest.raises(cel.CelError, match="no such key"):
        selector.matches(DEVICE)


def test_non_boolean_result_is_an_error():
    with pytest.raises(cel.CelError, match="must evaluate to bool"):
        cel.compile_selector("device.driver").matches(DEVICE)


def test_compile_is_cached():
    assert cel.compile_selector("device.driver == 'x'") is cel.compile_selector("device.driver == 'x'")


def test_cost_limit_rejects_nested_comprehensions_over_large_ranges():
    big = "[" + ", ".join(str(i) for i in range(100)) + "]"
    nested = f"{big}.exists(a, {big}.exists(b, {big}.exists(c, a + b + c == 7)))"
    with pytest.raises(cel.CelError, match="estimated cost"):
        cel.compile_selector(nested)
    assert cel.estimated_cost("device.driver == 'x'") < 20
    assert cel.estimated_cost("['a', 'b'].exists(t, device.driver == t)") < 50
    # Comprehensions over runtime values count as 64 elements.
    assert cel.estimated_cost("device.driver.split('.').exists(p, p == 'x')") >= 64
