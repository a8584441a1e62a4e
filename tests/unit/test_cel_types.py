"""Issue 24: what upstream's type checker refuses is refused at compile time whatever the
inventory holds (the oracle test in tests/upstream/test_cel_library.py compares every form with
upstream; these run without Go)."""

import pytest

from app import dra
from app import cel

DEVICE = cel.device_variable("gpu.nvidia.com", {"name": "g", "attributes": {"productName": {"string": "NVIDIA L4"}},
                                                "capacity": {"memory": {"value": "24Gi"}}})


@pytest.mark.parametrize("expression, why", [
    ("quantity('1').sign() == 1", "'sign' called as a method"),
    ("compareTo(quantity('1'), quantity('2')) < 0", "'compareTo' called as a function"),
    ("'1.2.3'.isSemver()", "'isSemver' called as a method"),
    ("bool(1)", "'bool' applied to '(int)'"),
    ("bool('yes')", "type conversion error from 'string' to 'bool'"),
    ("int(true) == 1", "'int' applied to '(bool)'"),
    ("device.foo == 1", "undefined field 'foo'"),
    ("has(device.foo)", "undefined field 'foo'"),
    ("'a' == 1", "'_==_' applied to '(string, int)'"),
    ("device.driver == 1", "'_==_' applied to '(string, int)'"),
    ("1u == 1", "'_==_' applied to '(uint, int)'"),
    ("true && 1", "expected type 'bool' but found 'int'"),
    ("!1", "'!_' applied to '(int)'"),
    ("1 + 'a' == 'b'", "'_+_' applied to '(int, string)'"),
    ("'abc'.reverse() == 'cba'", "'reverse' applied to 'string.()'"),
    ("'x'.contains(1)", "'contains' applied to 'string.(int)'"),
    ("device.driver.size()", "not int"),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii()", "not string"),
])
def test_type_errors_are_compile_errors_whatever_the_devices(expression, why):
    with pytest.raises(dra.CelError) as raised:
        cel.compile_selector(expression)
    assert why in str(raised.value)


@pytest.mark.parametrize("expression, matches", [
    ("bool('true')", True), ("bool('F')", False), ("bool(true)", True),
    ("sign(quantity('1')) == 1", True),
    ("matches(device.attributes['gpu.nvidia.com'].productName, '^NVIDIA')", True),
    ("device.attributes[?'gpu.nvidia.com'].hasValue()", True),
    ("device.attributes[?'other.example.com'].hasValue()", True),  # every domain reads as a map upstream
    ("sets.contains([1, 2], [1])", True), ("optional.of(1).hasValue()", True),
    ("'1 == 1'.size() == 6 && device.driver == 'gpu.nvidia.com'", True),  # operators inside strings are text
    ("[1, 2].indexOf(2) == 1 && 'ab'.indexOf('b') == 1", True),
    ("1 < 2.0", True),  # cross-type numeric comparison is declared
    ("{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v * 10) == {'b': 20}", True),
    ("{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}", True),
    ("[1, 2].first().orValue(0) == 1 && [1, 2].last().value() == 2 && ![].first().hasValue()", True),
    ("!format.dns1123Label().validate('gpu-0').hasValue() && format.dns1123Label().validate('GPU_0').hasValue()", True),
    ("format.named('uuid').hasValue() && !format.named('nope').hasValue()", True),
    ("'%d GPUs'.format([2]) == '2 GPUs'", True),  # the string method, not the library
])
def test_what_upstream_declares_compiles_and_runs(expression, matches):
    assert cel.compile_selector(expression).matches(DEVICE) is matches
