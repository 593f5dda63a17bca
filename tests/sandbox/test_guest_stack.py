"""The guest's Python stack as an assistant writes for it: pandas 2-only API, seaborn, scikit-learn and statsmodels
in one run that returns its chart, with the versions the guest imports equal to the built image's manifest (what
the MCP contract, the API and the approval screen say). One VM run, on the suite's image; the rest of the stack
(pyarrow, openpyxl, xlsxwriter, dateutil, tabulate, and statsmodels.api whole) is imported by the image build
itself (recipe.json `python_imports`), which fails otherwise. statsmodels is not in the warm saved state, so the
run imports its OLS module only (statsmodels.api would add ~14 s of emulated imports to this test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.sandbox.image import current_image, manifest

pytestmark = pytest.mark.vm  # a real VM: the serial group (tests/conftest.py SERIAL_PATHS)

STACK_CODE = """
import json
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import scipy, seaborn as sns, sklearn, statsmodels
from sklearn.linear_model import LinearRegression
from statsmodels.regression.linear_model import OLS
from statsmodels.tools import add_constant

rng = np.random.default_rng(7)
df = pd.DataFrame({"region": rng.choice(["north", "south", "east"], 5000), "x": rng.normal(size=5000)})
df["y"] = 3.0 * df["x"] + rng.normal(scale=0.1, size=5000)
upper = df[["region"]].map(str.upper)  # DataFrame.map: pandas 2.1 on (1.5 has only applymap)
means = df.groupby("region").apply(lambda g: g["y"].abs().mean(), include_groups=False)  # pandas 2.2 on
fit = LinearRegression().fit(df[["x"]], df["y"])
ols = OLS(df["y"], add_constant(df[["x"]])).fit()
sns.barplot(data=df, x="region", y="y")
plt.savefig("/work/output/by_region.png")
print(json.dumps({
    "upper": sorted(upper["region"].unique().tolist()), "groups": sorted(means.index.tolist()),
    "sklearn_coef": float(fit.coef_[0]), "ols_coef": float(ols.params["x"]),
    "versions": {"pandas": pd.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
                 "seaborn": sns.__version__, "scikit-learn": sklearn.__version__,
                 "statsmodels": statsmodels.__version__},
}))
"""


def test_pandas_2_seaborn_sklearn_statsmodels_run_and_return_the_chart(run, tmp_path: Path) -> None:
    guest = manifest(current_image())
    assert guest["source"] == "image"  # the built image's manifest.json, not the lock's fallback
    result = run(
        STACK_CODE, wall=120, out=tmp_path / "out"
    )  # the operator's maximum: software emulation in CI
    assert result.status == "succeeded", result.stderr[-2000:]
    said = json.loads(result.stdout)
    assert said["upper"] == ["EAST", "NORTH", "SOUTH"] and said["groups"] == ["east", "north", "south"]
    assert abs(said["sklearn_coef"] - 3.0) < 0.01 and abs(said["ols_coef"] - 3.0) < 0.01
    chart = next(f for f in result.files if f.name == "by_region.png")
    png = (tmp_path / "out" / "by_region.png").read_bytes()
    assert chart.size == len(png) > 1000 and png[:8] == b"\x89PNG\r\n\x1a\n"
    # what the guest imports is what the manifest (and so the contract, the API, the approval screen) says
    assert said["versions"] == {name: guest["packages"][name] for name in said["versions"]}
    assert said["versions"]["pandas"].startswith("2.") and said["versions"]["numpy"].startswith("2.")
