"""MIG profile names as NVIDIA names them, from what NVML answered on a real GPU. What the NVML
backend reads through NVML itself is tested over the real C ABI in tests/nvml (the test
library), which replaced the Python stand-in of pynvml these tests once used."""

import pytest

from app.reporter.backends import profile_name


# What NVML answered on a real H200 (143771 MiB, driver 580.159.04), with NVML's own names.
H200_GI_PROFILES = [(0, 1, 16384, "1g.18gb"), (1, 2, 33280, "2g.35gb"), (2, 3, 71424, "3g.71gb"),
                    (3, 4, 71424, "4g.71gb"), (4, 7, 143360, "7g.141gb"), (7, 1, 16384, "1g.18gb+me"),
                    (9, 1, 33280, "1g.35gb")]


@pytest.mark.parametrize("profile_id,slices,memory_mb,nvml_name", H200_GI_PROFILES)
def test_mig_profile_names_match_nvml_on_a_real_h200(profile_id, slices, memory_mb, nvml_name):
    # 3g/4g: 70.5 GB rounds half away from zero (Go's math.Round), as go-nvlib names them
    assert profile_name(profile_id, slices, memory_mb, 143771 << 20) == nvml_name
