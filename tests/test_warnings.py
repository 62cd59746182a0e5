"""numpy RuntimeWarnings: the golden engine widens NaN codes (signalling NaNs in float32, D-T05)
without one, so `tensore random / coverage / regress` keep stderr for their own messages.
MARIANA seed 8 loads such codes as weights, as moving data and into the convert LUT."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

from tensore.cosim import random_programs as R
from tensore.model.array import widen64

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

SNAN = np.array([0x7F800001, 0xFFA00000, 0x7FC00000, 0x3F800000], np.uint32).view(np.float32)


def test_widen64_quiets_signalling_nans_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = widen64(SNAN)
    assert out.dtype == np.float64 and np.isnan(out[:3]).all() and out[3] == 1.0


def test_golden_run_with_nan_codes_warns_nothing():
    prog = R.generate("mariana", 8, rows=8, cols=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        R.run_golden(prog)


@pytest.mark.parametrize("argv", [["random", "--gen", "mariana", "--seed", "8", "--count", "1"],
                                  ["coverage", "--gen", "mariana", "--seed", "8", "--random", "1"]])
def test_cli_stderr_has_no_runtime_warning(tmp_path, argv):
    out = ["-o", str(tmp_path / ("cov.txt" if argv[0] == "coverage" else "random"))]
    res = subprocess.run([sys.executable, "-m", "tensore.cli", *argv, *out], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr, res.stderr
