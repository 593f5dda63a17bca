from __future__ import annotations

from typing import Any

import pytest

from backend.tenancy.tables import Company
from tests.conftest import login, token_for

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


@pytest.fixture
async def alice(client) -> dict[str, str]:
    return await token_for(client, "alice@acme.example")


@pytest.fixture
async def alice_person(client, alice) -> dict[str, str]:
    """alice herself, signed in with a session cookie (after her assistant's token was minted): a person's
    requests carry no token, so the headers to send are none."""
    await login(client, "alice@acme.example")
    return {}


@pytest.fixture
async def acme_on(demo_db: str) -> None:
    await enable_code()


async def as_user(client, email: str) -> None:
    client.cookies.clear()
    await login(client, email)
