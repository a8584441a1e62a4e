"""Issue 56 item 3: what the generated differential (tests/upstream/test_cel_generated.py) found,
pinned as the oracle answered it, so a machine without Go still holds them."""

import pytest

from app import dra

D = "dra.example.com"
DEVICE = dra.device_variable(D, {"attributes": {"model": {"string": "h100-80gb"}, "index": {"int": 1},
                                                "healthy": {"bool": True}, "driverVersion": {"version": "1.2.3"}},
                                 "capacity": {"memory": {"value": "80Gi"}}})
ATTR = f"device.attributes['{D}']"

REFUSED = [  # (expression, what upstream says)
    (f"'%s-%d'.format([{ATTR}.model, 3]) != ''", "string clause can only be used on"),
    (f"'%d'.format([{ATTR}.index]) != ''", "decimal clause can only be used on integers, was given google.protobuf.Any"),
    ("'%s'.format([[quantity('1')]]) != ''", "was given kubernetes.Quantity"),
    ("'%x'.format([1.5]) != ''", "only integers, byte buffers, and strings can be formatted as hex"),
    ("false && int('a,b,c') > 0", "type conversion error from 'string' to 'int'"),
    ("uint(-1) > 0u", "unsigned integer overflow"),
    ("int(string(1.5)) > 0", "type conversion error from 'string' to 'int'"),
    ("string(b'\\xff') == ''", "invalid UTF-8"),
    ("[[1], [2]].max() == [1]", "found no matching overload for 'max'"),
    ("['a', 'b'].flatten().size() == 2", "found no matching overload for 'flatten'"),
    ("['a', 'b'].min() == 'a'", "exceeds the limit"),
    ("lists.range([1, 2].size()).size() == 2", "exceeds the limit"),
]
MATCHES = [  # (expression, upstream's answer)
    ("'%s'.format([[1.5, 'a\"b', b'x']]) == '[1.500000, \"a\\\\\"b\", b\"x\"]'", True),
    ("'%s'.format([{'b': 1, 'a': [true, 1.5]}]) == '{\"a\":[true, 1.500000], \"b\":1}'", True),
    ("'%s'.format([1.0]) == '1' && '%s'.format([null]) == 'null'", True),
    ("string(1000000.0) == '1e+06' && string(0.00001) == '1e-05' && string(123456.0) == '123456'", True),
    ("string(duration('1h')) == '3600s' && string(timestamp(0)) == '1970-01-01T00:00:00Z'", True),
    (f"string({ATTR}.healthy) == 'true'", True),
    ("'h100'.lastIndexOf('0', 4) == -1 && 'h100'.lastIndexOf('0', 5) == -1 && 'h100'.lastIndexOf('0', 2) == 2 && 'h100'.indexOf('', 9) == 4", True),
    ("[[], [4]].flatten().size() == 1 && lists.range(3).size() == 3", True),
    (f"({ATTR}.healthy ? {ATTR}.index : {{'a': 1}}) > 0", True),
    ("timestamp('2020-01-01T00:00:00Z') > timestamp(0)", True),
]
RUNTIME_ERRORS = [  # (expression, what upstream says)
    ("lists.range(-2).size() == 0", "size must be non-negative"),
    (f"isQuantity({ATTR}.driverVersion)", "no such overload"),
    (f"{ATTR}.driverVersion.indexOf('0') >= 0", "no such overload"),
    ("[].reverse()[0] > 0", "index"),
    (f"'%s'.format([device.capacity['{D}']]) == ''", "no formatting function for kubernetes.Quantity"),
    ("'h100'.indexOf('1', -1) == 0", "index out of range"),
]


@pytest.mark.parametrize("expression, said", REFUSED)
def test_what_upstream_refuses_at_creation_is_refused(expression, said):
    with pytest.raises(dra.CelError) as refused:
        dra.compile_selector(expression)
    assert said in str(refused.value)


@pytest.mark.parametrize("expression, expected", MATCHES)
def test_what_upstream_accepts_matches_as_upstream(expression, expected):
    assert dra.compile_selector(expression).matches(DEVICE) is expected


@pytest.mark.parametrize("expression, said", RUNTIME_ERRORS)
def test_runtime_errors_are_errors_not_answers(expression, said):
    selector = dra.compile_selector(expression)
    with pytest.raises(dra.CelError) as failed:
        selector.matches(DEVICE)
    assert said in str(failed.value)
