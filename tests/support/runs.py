"""A run's proposal body, turning code execution on for a company, and acting as a user."""

from __future__ import annotations

from typing import Any

from backend.tenancy.tables import Company
from tests.support.http import login

CHART_CODE = """
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
deals = pd.read_csv("/work/input/datasets/deals.csv")
by_stage = deals.groupby("stage")["amount"].sum().sort_values()
print(by_stage.to_string())
by_stage.plot.barh()
plt.tight_layout()
plt.savefig("/work/output/pipeline.png")
"""


async def enable_code(company: str = "Acme Analytics", **extra: Any) -> None:
    values = {Company.code_execution_enabled: True}
    for key, value in extra.items():
        values[getattr(Company, key)] = value
    await Company.update(values).where(Company.name == company)


def proposal(code: str = "print('hello')", datasets: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "conversation_id": extra.pop("conversation_id", "conv-1"),
        "title": extra.pop("title", "Pipeline by stage"),
        "plan": "Sum the open pipeline by stage and chart it.",
        "code": code,
        "datasets": ["deals"] if datasets is None else datasets,
        "files": extra.pop("files", []),
        **extra,
    }


async def as_user(client, email: str) -> None:
    client.cookies.clear()
    await login(client, email)
