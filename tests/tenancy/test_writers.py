"""No code path outside backend/tenancy writes a person, a password hash or a permission (issue 53): every
module of the backend is read (its syntax tree, not its text), and a write to one of tenancy's identity tables
(an insert, update, delete or raw statement through the table, or a row made from it) or SQL text that writes
one (INSERT INTO / UPDATE / DELETE FROM "app_user" ...) is a finding. Migrations are the schema's, not a
writer. The controls show the check finds each kind of write when one is added."""

from __future__ import annotations

import ast
import re
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[2] / "backend"
# a person (and their password hash), a team and who is in it, and what anyone may read
GUARDED = {
    "User": "app_user",
    "PermissionSet": "permission_set",
    "UserPermissionSet": "user_permission_set",
    "TeamPermissionSet": "team_permission_set",
    "TeamMembership": "team_membership",
    "Team": "team",
    "PersonLink": "person_link",
}
WRITES = {"insert", "update", "delete", "raw", "save", "alter", "create_table"}
SQL_WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?(" + "|".join(GUARDED.values()) + r")\"?\b", re.IGNORECASE
)


def findings(source: str, name: str = "<module>") -> list[str]:
    """The guarded writes in one module's source: `Table.insert(...)`, `Table(...)` (a row to save), and SQL
    text that writes a guarded table."""
    tree = ast.parse(source)
    imported: dict[str, str] = {}  # local name -> guarded table
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("backend.tenancy"):
            for alias in node.names:
                if alias.name in GUARDED:
                    imported[alias.asname or alias.name] = alias.name
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in imported:
                out.append(f"{name}:{node.lineno}: a {imported[func.id]} row made")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in WRITES
                and isinstance(func.value, ast.Name)
                and func.value.id in imported
            ):
                out.append(f"{name}:{node.lineno}: {imported[func.value.id]}.{func.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_WRITE.search(node.value):
            out.append(f"{name}:{node.lineno}: SQL writing {SQL_WRITE.search(node.value).group(2)}")
    return out


def outside_tenancy() -> list[Path]:
    skip = (BACKEND / "tenancy", BACKEND / "migrations")
    return [p for p in sorted(BACKEND.rglob("*.py")) if not any(p.is_relative_to(s) for s in skip)]


def test_no_module_outside_tenancy_writes_a_person_a_password_or_a_permission() -> None:
    modules = outside_tenancy()
    assert len(modules) > 100  # the walk covers the backend, not an empty list
    texts = {path: path.read_text() for path in modules}
    # only a module that imports from tenancy or holds SQL writing a guarded table can write one: the rest
    # are not parsed (the walk stays cheap)
    suspects = {p: t for p, t in texts.items() if "backend.tenancy" in t or SQL_WRITE.search(t)}
    assert len(suspects) > 30  # the filter keeps the modules that read people (credits, runs, drive, ...)
    found = [f for path, text in suspects.items() for f in findings(text, str(path.relative_to(BACKEND)))]
    assert found == []


def test_control_the_check_finds_each_kind_of_write() -> None:
    planted = {
        "from backend.tenancy.tables import User\nasync def f():\n    await User.update({User.role: 'admin'})": 1,
        "from backend.tenancy.tables import PermissionSet as P\nasync def f():\n    await P(grants={}).save()": 1,
        "from backend.tenancy.tables import TeamMembership\nasync def f():\n    await TeamMembership.insert()": 1,
        'async def f(e):\n    await e.run(\'UPDATE "app_user" SET "password_hash" = 1\')': 1,
        "q = 'DELETE FROM user_permission_set WHERE 1'": 1,
        # reading is not writing (controls of the control)
        "from backend.tenancy.tables import User\nasync def f():\n    await User.select(User.id)": 0,
        "q = 'SELECT * FROM \"app_user\"'": 0,
    }
    for source, expected in planted.items():
        assert len(findings(source)) == expected, source
    # and tenancy itself, which is the writer, is found writing (the check reads real modules too)
    assert findings((BACKEND / "tenancy" / "people.py").read_text())
    assert findings((BACKEND / "tenancy" / "grid.py").read_text())
