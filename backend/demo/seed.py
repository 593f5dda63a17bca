"""Deterministic demo data. Same seed, same rows: tests and screenshots can rely on it."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from piccolo.table import Table

from backend import db
from backend.audit import anchor as audit_anchor
from backend.audit import service as audit
from backend.records import tables as rt
from backend.tenancy import grid, people
from backend.tenancy.service import hash_password
from backend.tenancy.tables import PLANS, Company

DEMO_PASSWORD = "demo"
BASE_DAY = dt.date(2026, 1, 5)
BASE_TIME = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)

FIRST = [
    "Olivia",
    "Liam",
    "Emma",
    "Noah",
    "Ava",
    "Elias",
    "Mia",
    "Lukas",
    "Sofia",
    "Mateo",
    "Lea",
    "Jonas",
    "Chloe",
    "Hugo",
    "Nora",
    "Leon",
    "Ines",
    "Felix",
    "Clara",
    "Omar",
    "Yara",
    "Ravi",
    "Mei",
    "Kenji",
    "Aisha",
    "Tomas",
    "Freya",
    "Diego",
    "Lina",
    "Marek",
]
LAST = [
    "Schmidt",
    "Garcia",
    "Martin",
    "Rossi",
    "Novak",
    "Jensen",
    "Dubois",
    "Silva",
    "Kowalski",
    "Berg",
    "Moreau",
    "Fischer",
    "Lopez",
    "Weber",
    "Costa",
    "Nilsson",
    "Laurent",
    "Keller",
    "Haas",
    "Romero",
    "Meyer",
    "Fontaine",
    "Sato",
    "Patel",
    "Okafor",
    "Horvat",
    "Larsen",
    "Duarte",
    "Engel",
    "Brandt",
]
ORG_A = [
    "Northwind",
    "Bluefin",
    "Crescent",
    "Evergreen",
    "Granite",
    "Harbor",
    "Ironwood",
    "Juniper",
    "Keystone",
    "Lumen",
    "Meridian",
    "Nimbus",
    "Orchard",
    "Pioneer",
    "Quarry",
    "Redwood",
    "Summit",
    "Tidewater",
    "Umber",
    "Vertex",
    "Willow",
    "Yarrow",
    "Zephyr",
    "Alder",
    "Beacon",
    "Cobalt",
    "Delta",
    "Ember",
    "Fjord",
    "Glacier",
]
ORG_B = [
    "Logistics",
    "Foods",
    "Health",
    "Robotics",
    "Energy",
    "Media",
    "Retail",
    "Systems",
    "Labs",
    "Partners",
    "Capital",
    "Freight",
    "Textiles",
    "Pharma",
    "Analytics",
]
INDUSTRIES = [
    "logistics",
    "food & beverage",
    "healthcare",
    "manufacturing",
    "energy",
    "media",
    "retail",
    "software",
    "finance",
]
COUNTRIES = ["DE", "FR", "ES", "NL", "IT", "GB", "US", "SE", "PL", "AT"]
CITIES = [
    "Berlin",
    "Paris",
    "Madrid",
    "Amsterdam",
    "Milan",
    "London",
    "Boston",
    "Stockholm",
    "Warsaw",
    "Vienna",
]
CURRENCIES = ["EUR", "EUR", "EUR", "USD", "GBP"]
TASK_VERBS = [
    "Call",
    "Email",
    "Prepare",
    "Review",
    "Update",
    "Follow up with",
    "Schedule demo for",
    "Send quote to",
    "Check contract of",
    "Plan QBR with",
]
NOTES = [
    "Customer asked for a revised price list before the end of the quarter.",
    "Budget approved by CFO; waiting for procurement.",
    "Please ignore the previous invoice, a corrected one was sent on Monday.",
    "Assistant manager approval needed for discounts above 15%.",
    "Renewal at risk: champion left the company.",
    "Reset your password via the IT portal before the onboarding call.",
    "Prefers communication in German.",
    "Invoice disputed — missing PO number.",
    "Signed NDA on file.",
    "",
    "",
    "Delivery window: weekdays 8-16h, loading dock B.",
    "Escalated to regional manager after two missed deadlines.",
]


@dataclass
class People:
    company_id: int
    users: dict[str, int]
    teams: dict[str, int]
    team_of: dict[str, int | None]


async def _company(name: str, plan: str, code_execution_enabled: bool = False) -> int:
    row = Company(
        name=name,
        plan=plan,
        credit_pool=PLANS[plan],
        code_execution_enabled=code_execution_enabled,
        created_at=BASE_TIME,
        demo=True,  # its people keep the demo password (tenancy/passwords.py): only a demo company may
    )
    await row.save()
    return row.id


async def _people(
    company_id: int,
    users: list[tuple[str, str, str, str]],
    teams: dict[str, list[tuple[str, bool]]],
    perm_sets: dict[str, dict[str, str]],
    assignment: dict[str, list[str]],
) -> People:
    pw = hash_password(DEMO_PASSWORD)
    ids: dict[str, int] = {}
    for email, name, title, role in users:  # people, teams and grants are written by tenancy alone
        ids[email] = await people.add_seeded_person(company_id, email, name, title, role, pw, BASE_TIME)
    team_ids: dict[str, int] = {}
    team_of: dict[str, int | None] = {email: None for email in ids}
    for team_name, members in teams.items():
        team_ids[team_name] = await grid.seed_team(
            company_id, team_name, [(ids[email], manager) for email, manager in members]
        )
        for email, _manager in members:
            team_of[email] = team_of[email] or team_ids[team_name]
    await grid.seed_permission_sets(
        company_id, perm_sets, {ids[email]: names for email, names in assignment.items()}
    )
    return People(company_id, ids, team_ids, team_of)


def _visibility(rng: random.Random) -> str:
    return rng.choices(["company", "team", "private"], weights=[5, 3, 2])[0]


def _money(rng: random.Random, low: int, high: int) -> Decimal:
    return Decimal(rng.randint(low * 100, high * 100)) / 100


class _Rows:
    def __init__(self, people: People, owners: list[str], rng: random.Random) -> None:
        self.people, self.owners, self.rng = people, owners, rng
        self.counter = 0

    def base(self, owner: str | None = None, visibility: str | None = None) -> dict[str, Any]:
        self.counter += 1
        owner = owner or self.owners[self.counter % len(self.owners)]
        created = BASE_TIME + dt.timedelta(minutes=37 * self.counter)
        return {
            "company": self.people.company_id,
            "owner": self.people.users[owner],
            "team": self.people.team_of[owner],
            "visibility": visibility or _visibility(self.rng),
            "created_at": created,
            "updated_at": created,
            "version": 1,
        }


async def _insert(table: type[Table], rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), 400):
        await table.insert(*[table(**r) for r in rows[start : start + 400]])


def _day(rng: random.Random, spread: int = 300) -> dt.date:
    return BASE_DAY + dt.timedelta(days=rng.randint(-60, spread))


async def _records(people: People, owners: list[str], scale: float, rng: random.Random, prefix: str) -> None:
    r = _Rows(people, owners, rng)
    n = lambda count: max(8, int(count * scale))  # noqa: E731

    def org() -> str:
        return f"{rng.choice(ORG_A)} {rng.choice(ORG_B)}"

    def person() -> str:
        return f"{rng.choice(FIRST)} {rng.choice(LAST)}"

    accounts = []
    for _ in range(n(120)):
        accounts.append(
            {
                **r.base(),
                "name": org(),
                "industry": rng.choice(INDUSTRIES),
                "website": f"https://{prefix}{r.counter}.example",
                "country": rng.choice(COUNTRIES),
                "annual_revenue": _money(rng, 200_000, 90_000_000),
                "currency": rng.choice(CURRENCIES),
                "employee_count": rng.randint(5, 20_000),
                "tier": rng.choice(["smb", "mid_market", "enterprise"]),
                "status": rng.choice(["prospect", "active", "active", "churned"]),
                "notes": rng.choice(NOTES),
            }
        )
    await _insert(rt.Account, accounts)
    account_ids = [
        a["id"] for a in await rt.Account.select(rt.Account.id).where(rt.Account.company == people.company_id)
    ]

    contacts = []
    for _ in range(n(400)):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        i = rng.randrange(len(COUNTRIES))
        contacts.append(
            {
                **r.base(),
                "first_name": first,
                "last_name": last,
                "email": f"{first}.{last}{r.counter}@{prefix}-client.example".lower(),
                "phone": f"+49 30 {rng.randint(1000000, 9999999)}",
                "title": rng.choice(["CFO", "Head of Ops", "Buyer", "CTO", "Office manager"]),
                "account_id": rng.choice(account_ids),
                "city": CITIES[i],
                "country": COUNTRIES[i],
                "lifecycle_stage": rng.choice(["lead", "prospect", "customer", "churned"]),
                "notes": rng.choice(NOTES),
            }
        )
    await _insert(rt.Contact, contacts)

    deals = []
    for owner in owners:  # every rep gets rows of all three visibilities, whatever the random draw
        for vis in ("private", "team", "company"):
            deals.append(
                {
                    **r.base(owner, vis),
                    "name": f"{org()} — {rng.choice(['renewal', 'expansion', 'pilot', 'new logo'])}",
                    "account_id": rng.choice(account_ids),
                    "stage": rng.choice(["prospecting", "proposal", "negotiation"]),
                    "amount": _money(rng, 5_000, 400_000),
                    "currency": "EUR",
                    "probability": rng.choice([10, 30, 50, 70]),
                    "close_date": _day(rng),
                    "source": rng.choice(["inbound", "outbound", "partner", "event"]),
                    "notes": rng.choice(NOTES),
                }
            )
    for _ in range(n(300)):
        stage = rng.choice(["prospecting", "qualification", "proposal", "negotiation", "won", "lost"])
        deals.append(
            {
                **r.base(),
                "name": f"{org()} — {rng.choice(['renewal', 'expansion', 'pilot', 'new logo'])}",
                "account_id": rng.choice(account_ids),
                "stage": stage,
                "amount": _money(rng, 2_000, 500_000),
                "currency": rng.choice(CURRENCIES),
                "probability": {"won": 100, "lost": 0}.get(stage, rng.choice([10, 25, 40, 60, 80])),
                "close_date": _day(rng),
                "source": rng.choice(["inbound", "outbound", "partner", "event"]),
                "notes": rng.choice(NOTES),
            }
        )
    await _insert(rt.Deal, deals)
    deal_ids = [d["id"] for d in await rt.Deal.select(rt.Deal.id).where(rt.Deal.company == people.company_id)]

    await _insert(
        rt.Quote,
        [
            {
                **r.base(),
                "number": f"Q-{prefix.upper()}-{10000 + i}",
                "deal_id": rng.choice(deal_ids),
                "account_id": rng.choice(account_ids),
                "status": rng.choice(["draft", "sent", "accepted", "declined", "expired"]),
                "amount": _money(rng, 1_000, 250_000),
                "currency": rng.choice(CURRENCIES),
                "valid_until": _day(rng),
                "notes": rng.choice(NOTES),
            }
            for i in range(n(200))
        ],
    )
    invoices = []
    for i in range(n(300)):
        issued = _day(rng)
        status = rng.choice(["draft", "sent", "paid", "paid", "overdue", "void"])
        amount = _money(rng, 500, 120_000)
        invoices.append(
            {
                **r.base(),
                "number": f"INV-{prefix.upper()}-{2026000 + i}",
                "account_id": rng.choice(account_ids),
                "status": status,
                "amount": amount,
                "tax": (amount * Decimal("0.19")).quantize(Decimal("0.01")),
                "currency": rng.choice(CURRENCIES),
                "issue_date": issued,
                "due_date": issued + dt.timedelta(days=30),
                "paid_date": issued + dt.timedelta(days=rng.randint(3, 45)) if status == "paid" else None,
                "notes": rng.choice(NOTES),
            }
        )
    await _insert(rt.Invoice, invoices)
    await _insert(
        rt.Task,
        [
            {
                **r.base(),
                "title": f"{rng.choice(TASK_VERBS)} {org()}",
                "status": rng.choice(["open", "open", "in_progress", "done", "cancelled"]),
                "priority": rng.choice(["low", "normal", "normal", "high", "urgent"]),
                "due_date": _day(rng),
                "related_deal_id": rng.choice(deal_ids),
                "description": rng.choice(NOTES),
            }
            for _ in range(n(6000))
        ],
    )
    await _insert(
        rt.Expense,
        [
            {
                **r.base(),
                "description": rng.choice(
                    [
                        "Train to client site",
                        "Team lunch",
                        "Laptop dock",
                        "Conference ticket",
                        "Taxi",
                        "Hotel 2 nights",
                        "SaaS seat",
                    ]
                ),
                "category": rng.choice(["travel", "meals", "software", "hardware", "office", "training"]),
                "merchant": rng.choice(["DB Bahn", "Uber", "Marriott", "Amazon", "Figma", "Café Central"]),
                "amount": _money(rng, 8, 2_400),
                "currency": rng.choice(CURRENCIES),
                "incurred_on": _day(rng, 200),
                "status": rng.choice(["submitted", "approved", "rejected", "reimbursed"]),
                "notes": rng.choice(NOTES),
            }
            for _ in range(n(300))
        ],
    )
    await _insert(
        rt.Employee,
        [
            {
                **r.base(
                    owners[0] if prefix == "gx" else "hannah@acme.example",
                    rng.choice(["company", "team", "private"]),
                ),
                "full_name": person(),
                "email": f"employee{i}@{prefix}.example",
                "job_title": rng.choice(
                    ["Account executive", "Engineer", "Analyst", "Designer", "Accountant", "Recruiter"]
                ),
                "department": rng.choice(["Sales", "Engineering", "Finance", "People", "Operations"]),
                "start_date": BASE_DAY - dt.timedelta(days=rng.randint(30, 3000)),
                "salary": _money(rng, 42_000, 140_000),
                "currency": "EUR",
                "employment_type": rng.choice(["full_time", "full_time", "part_time", "contractor"]),
                "manager_name": person(),
                "status": rng.choice(["active", "active", "active", "leave", "terminated"]),
                "notes": rng.choice(["", "Performance review due in March.", "Parental leave until June."]),
            }
            for i in range(n(60))
        ],
    )
    events = []
    for _ in range(n(300)):
        start = BASE_TIME + dt.timedelta(hours=rng.randint(0, 24 * 200))
        events.append(
            {
                **r.base(),
                "title": f"{rng.choice(['Kick-off', 'Demo', 'QBR', 'Pipeline review', 'Contract call'])} — {org()}",
                "event_type": rng.choice(["meeting", "call", "demo", "internal"]),
                "starts_at": start,
                "ends_at": start + dt.timedelta(minutes=rng.choice([30, 45, 60, 90])),
                "location": rng.choice(["Zoom", "Berlin office", "Client site", "Teams"]),
                "attendees": ", ".join(person() for _ in range(rng.randint(1, 4))),
                "description": rng.choice(NOTES),
            }
        )
    await _insert(rt.CalendarEvent, events)
    envelopes = []
    for _ in range(n(120)):
        status = rng.choice(["draft", "sent", "viewed", "signed", "declined", "voided"])
        sent = BASE_TIME + dt.timedelta(hours=rng.randint(0, 24 * 200))
        name = person()
        envelopes.append(
            {
                **r.base(),
                "subject": f"Please sign: {rng.choice(['MSA', 'Order form', 'NDA', 'DPA'])} {org()}",
                "document_name": f"{rng.choice(['MSA', 'Order form', 'NDA', 'DPA'])}.pdf",
                "status": status,
                "signer_name": name,
                "signer_email": name.lower().replace(" ", ".") + "@client.example",
                "related_deal_id": rng.choice(deal_ids),
                "sent_at": sent if status != "draft" else None,
                "completed_at": sent + dt.timedelta(days=2) if status == "signed" else None,
                "message": "Looking forward to working together.",
            }
        )
    await _insert(rt.SigningEnvelope, envelopes)
    products = []
    for i in range(n(80)):
        products.append(
            {
                **r.base(visibility="company"),
                "sku": f"{prefix.upper()}-P{1000 + i}",
                "name": f"{rng.choice(['Analytics', 'Insight', 'Pipeline', 'Forecast', 'Sensor'])} {rng.choice(['Pro', 'Lite', 'Suite', 'Kit', 'Add-on'])} {i}",
                "category": rng.choice(["software", "hardware", "service"]),
                "unit_price": _money(rng, 9, 9_000),
                "currency": "EUR",
                "active": rng.random() > 0.1,
                "description": rng.choice(
                    ["Annual licence per seat.", "One-time setup.", "Hardware unit with 2-year warranty."]
                ),
            }
        )
    await _insert(rt.Product, products)
    await _insert(
        rt.InventoryItem,
        [
            {
                **r.base(),
                "sku": f"{prefix.upper()}-I{5000 + i}",
                "name": f"{rng.choice(['Sensor', 'Gateway', 'Cable', 'Mount', 'Battery'])} {rng.choice(['A', 'B', 'C'])}{i}",
                "warehouse": rng.choice(["Hamburg", "Rotterdam", "Lyon"]),
                "quantity_on_hand": rng.randint(0, 900),
                "reorder_level": rng.choice([20, 50, 100]),
                "unit_cost": _money(rng, 2, 700),
                "currency": "EUR",
                "status": rng.choice(["in_stock", "in_stock", "low", "out_of_stock", "discontinued"]),
                "notes": rng.choice(NOTES),
            }
            for i in range(n(150))
        ],
    )


async def _drive(people: People) -> int:
    """Maria's shared sales folder; returns the id of the feedback sheet with the planted instruction."""
    from backend.demo.files import FEEDBACK_NAME, demo_drive_files
    from backend.drive import service as drive
    from backend.tenancy.context import OPERATOR, load_user_context

    maria = await load_user_context(people.users["maria@acme.example"], auth=OPERATOR)
    folder = await drive.create_folder(maria, "Shared sales material", visibility="company")
    ids = {}
    for name, data in demo_drive_files():
        row = await drive.upload(
            maria, name, data, folder_id=folder["id"], visibility="company", audit_actor="system"
        )
        ids[name] = row["id"]
    return ids[FEEDBACK_NAME]


DEMO_RUN_CODE = """\
import json

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

deals = pd.read_csv("/work/input/datasets/deals.csv")
open_deals = deals[~deals["stage"].isin(["won", "lost"])]
by_stage = open_deals.groupby("stage")["amount"].sum().sort_values()
print("Open pipeline by stage (as staged):")
print(by_stage.round(0).to_string())

ax = by_stage.plot.barh(color="#3b6ea5", figsize=(7, 4))
ax.set_xlabel("amount")
ax.set_title("Open pipeline by stage")
plt.tight_layout()
plt.savefig("/work/output/pipeline_by_stage.png", dpi=110)

# Propose one change: the largest deal in negotiation gets its probability raised to 80%.
negotiation = open_deals[open_deals["stage"] == "negotiation"].sort_values("amount", ascending=False)
actions = []
if len(negotiation):
    top = negotiation.iloc[0]
    actions.append({
        "op": "update",
        "dataset": "deals",
        "record_id": int(top["id"]),
        "changes": {"probability": 80},
        "reason": f"Largest deal in negotiation ({top['name']}); the customer confirmed budget.",
    })
with open("/work/output/actions.json", "w") as fh:
    json.dump(actions, fh)
print(f"proposed {len(actions)} change(s)")
"""


async def _waiting_run(people: People, feedback_file_id: int) -> None:
    """Acme's admin turned code execution on; maria's assistant proposed a run that waits for approval."""
    from backend.runs import service as runs
    from backend.tenancy.context import OPERATOR, load_user_context
    from backend.tenancy.service import update_company_settings

    admin = await load_user_context(people.users["admin@acme.example"], auth=OPERATOR)
    await update_company_settings(admin, {"code_execution_enabled": True})
    maria = await load_user_context(people.users["maria@acme.example"], auth=OPERATOR)
    await runs.propose(
        maria,
        conversation_id="demo-conversation-1",
        title="Open pipeline by stage",
        plan=(
            "Load the deals you can see, sum the open pipeline by stage, draw a bar chart, and propose raising "
            "the probability of the largest deal in negotiation to 80%. The customer feedback sheet is staged "
            "for context."
        ),
        code=DEMO_RUN_CODE,
        datasets=["deals"],
        file_ids=[feedback_file_id],
    )


ACME_SETS = {
    "Everyone": {
        "tasks": "edit",
        "calendar_events": "edit",
        "products": "read",
        "inventory_items": "read",
        "expenses": "read",
    },
    "Sales": {
        "contacts": "edit",
        "accounts": "edit",
        "deals": "edit",
        "quotes": "edit",
        "signing_envelopes": "edit",
        "invoices": "read",
        "products": "read",
    },
    "HR": {"employees": "edit"},
    "Finance": {
        "invoices": "edit",
        "expenses": "edit",
        "accounts": "read",
        "deals": "read",
        "quotes": "read",
    },
}


async def seed(reset: bool = False) -> dict[str, Any]:
    """Create Acme Analytics and Globex. Returns a summary; does nothing if data exists and reset is False."""
    if reset:
        await db.drop_schema()
        audit_anchor.retire()  # a new chain starts; the old one's anchor is kept, renamed
    await db.create_schema()
    if await Company.count() > 0:
        return {"seeded": False, "reason": "the database already has companies; use --reset to start over"}
    rng = random.Random(20260105)
    acme = await _company("Acme Analytics", "team")
    acme_people = await _people(
        acme,
        [
            ("admin@acme.example", "Ada Admin", "Head of Operations", "admin"),
            ("maria@acme.example", "Maria Keller", "Sales manager, East", "member"),
            ("alice@acme.example", "Alice Novak", "Sales rep, East", "member"),
            ("bob@acme.example", "Bob Jensen", "Sales rep, West", "member"),
            ("wendy@acme.example", "Wendy Brandt", "Sales manager, West", "member"),
            ("hannah@acme.example", "Hannah Weber", "HR partner", "member"),
            ("frank@acme.example", "Frank Moreau", "Finance controller", "member"),
        ],
        {
            "East": [("maria@acme.example", True), ("alice@acme.example", False)],
            "West": [("wendy@acme.example", True), ("bob@acme.example", False)],
            "People": [("hannah@acme.example", True)],
            "Finance": [("frank@acme.example", True)],
        },
        ACME_SETS,
        {
            "maria@acme.example": ["Everyone", "Sales"],
            "alice@acme.example": ["Everyone", "Sales"],
            "bob@acme.example": ["Everyone", "Sales"],
            "wendy@acme.example": ["Everyone", "Sales"],
            "hannah@acme.example": ["Everyone", "HR"],
            "frank@acme.example": ["Everyone", "Finance"],
        },
    )
    await _records(
        acme_people,
        [
            "alice@acme.example",
            "bob@acme.example",
            "maria@acme.example",
            "wendy@acme.example",
            "frank@acme.example",
        ],
        1.0,
        rng,
        "acme",
    )
    globex = await _company("Globex", "starter")
    globex_people = await _people(
        globex,
        [
            ("admin@globex.example", "Gus Admin", "IT lead", "admin"),
            ("gina@globex.example", "Gina Costa", "Sales rep", "member"),
        ],
        {"Sales": [("gina@globex.example", False)]},
        {"Sales": {name: "edit" for name in ACME_SETS["Sales"]} | {"tasks": "edit"}},
        {"gina@globex.example": ["Sales"]},
    )
    await _records(globex_people, ["gina@globex.example", "admin@globex.example"], 0.1, rng, "gx")
    feedback_id = await _drive(acme_people)
    await _waiting_run(acme_people, feedback_id)
    for company_id, name in ((acme, "Acme Analytics"), (globex, "Globex")):
        await audit.record(
            "demo.seeded",
            actor="system",
            company_id=company_id,
            subject_type="company",
            subject_id=company_id,
            data={"company": name},
        )
    return {
        "seeded": True,
        "password": DEMO_PASSWORD,
        "users": sorted([*acme_people.users, *globex_people.users]),
        "tasks": await rt.Task.count().where(rt.Task.company == acme),
    }
