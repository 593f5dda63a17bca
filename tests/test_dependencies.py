"""Every third-party module the code imports is declared in pyproject.toml, and every declared dependency is
imported somewhere (or says here why not): a module that only arrives because another package happens to pull it
in disappears the day that package stops, and a declared package nothing uses is installed for nothing.

The check reads the code's `import` statements (the standard library's `ast`, also those inside functions) and
maps each module to the installed distributions that provide it (`importlib.metadata.packages_distributions`).
Code the service runs (backend/, console/) may use only the project's dependencies; the training harness may
also use the `train` extra; the tests may use the `dev` and `train` extras too.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"backend", "console", "tests"}
# where an extra may be imported besides the project's own dependencies (path prefix -> extras)
EXTRAS_BY_PATH = {"tests/": ("dev", "train"), "backend/injection_training/": ("train",)}

# Declared, but no module of ours imports them: the reason each one is there.
USED_WITHOUT_IMPORT = {
    "pytest-asyncio": "pytest plugin (asyncio_mode = auto)",
    "pytest-timeout": "pytest plugin (per-test ceilings, tests/conftest.py)",
    "ruff": "linter, run by scripts/test",
    "mypy": "type checker, run by scripts/typecheck (its plugin scripts/mypy_piccolo.py imports it)",
    "uv": "scripts/lock writes constraints.txt with it",
    "schemathesis": "run as a command by tests/api/test_api_contract.py (python -m schemathesis.cli)",
    "datamodel-code-generator": "run as a command by tests/api/test_api_contract.py",
}


# Modules of the `train` extra, which scripts/setup does not install: who provides them when they are absent.
NOT_INSTALLED_OWNERS = {"sklearn": "scikit-learn", "scipy": "scipy"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    assert match, spec
    return normalize(match.group(1))


@dataclass(frozen=True)
class Declared:
    main: frozenset[str]
    extras: Mapping[str, frozenset[str]]

    @classmethod
    def from_pyproject(cls, path: Path) -> Declared:
        project = tomllib.loads(path.read_text())["project"]
        extras = project.get("optional-dependencies", {})
        return cls(
            frozenset(map(requirement_name, project["dependencies"])),
            {extra: frozenset(map(requirement_name, specs)) for extra, specs in extras.items()},
        )

    def allowed_for(self, relative: str) -> frozenset[str]:
        allowed = set(self.main)
        for prefix, extras in EXTRAS_BY_PATH.items():
            if relative.startswith(prefix):
                for extra in extras:
                    allowed |= self.extras.get(extra, frozenset())
        return frozenset(allowed)

    def everything(self) -> frozenset[str]:
        return self.main.union(*self.extras.values())


def imported_modules(source: str) -> set[str]:
    """Top-level names of the absolute imports in `source`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def is_local(module: str, file: Path, root: Path) -> bool:
    """Ours: a first-party package, or a module beside the importing file (a script's own directory)."""
    if module in FIRST_PARTY or module == "__main__":
        return True
    return (file.parent / f"{module}.py").exists() or (file.parent / module / "__init__.py").exists()


def owners(module: str, distributions: Mapping[str, list[str]]) -> set[str]:
    if module not in distributions and module in NOT_INSTALLED_OWNERS:
        return {NOT_INSTALLED_OWNERS[module]}
    return {normalize(name) for name in distributions.get(module, [])}


@dataclass
class Findings:
    undeclared: dict[str, set[str]]  # "file: module" -> the distributions that provide it
    unknown: set[str]  # "file: module" no installed distribution provides
    unused: set[str]  # declared, never imported, no reason given
    stale_reasons: set[str]  # a reason for not being imported, given for a package that is imported


def check(
    files: Iterable[Path],
    root: Path,
    declared: Declared,
    distributions: Mapping[str, list[str]],
    used_without_import: Mapping[str, str],
) -> Findings:
    findings = Findings({}, set(), set(), set())
    imported: set[str] = set()
    for file in files:
        relative = file.relative_to(root).as_posix()
        allowed = declared.allowed_for(relative)
        for module in sorted(imported_modules(file.read_text())):
            if module in sys.stdlib_module_names or is_local(module, file, root):
                continue
            provided_by = owners(module, distributions)
            if not provided_by:
                findings.unknown.add(f"{relative}: {module}")
                continue
            imported |= provided_by
            if not provided_by & allowed:
                findings.undeclared[f"{relative}: {module}"] = provided_by
    excused = set(map(normalize, used_without_import))
    findings.unused = declared.everything() - imported - excused
    findings.stale_reasons = excused & imported
    return findings


def source_files(root: Path) -> list[Path]:
    return sorted(path for top in ("backend", "console", "tests") for path in (root / top).rglob("*.py"))


def test_every_imported_module_is_declared_and_every_dependency_used() -> None:
    findings = check(
        source_files(ROOT),
        ROOT,
        Declared.from_pyproject(ROOT / "pyproject.toml"),
        importlib.metadata.packages_distributions(),
        USED_WITHOUT_IMPORT,
    )
    assert not findings.undeclared, f"imported but not declared where they run: {findings.undeclared}"
    assert not findings.unknown, f"imported but no installed distribution provides them: {findings.unknown}"
    assert not findings.unused, (
        f"declared, never imported (remove, or say why in USED_WITHOUT_IMPORT): {findings.unused}"
    )
    assert not findings.stale_reasons, (
        f"imported after all (drop from USED_WITHOUT_IMPORT): {findings.stale_reasons}"
    )


def test_defusedxml_is_what_openpyxl_parses_with() -> None:
    """The reason defusedxml is declared: without it openpyxl falls back to the standard library's parser."""
    from openpyxl.xml import DEFUSEDXML

    assert DEFUSEDXML is True


def test_the_check_finds_an_undeclared_import_an_unknown_one_and_an_unused_dependency(tmp_path: Path) -> None:
    """Positive control on a hand-made project: each kind of fault is reported, and the clean parts are not."""
    (tmp_path / "backend").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "backend" / "a.py").write_text(
        "import json\nimport httpx\nfrom backend import b\nimport faker\n"
        "def later():\n    import no_such_module_anywhere\n"
    )
    (tmp_path / "tests" / "test_a.py").write_text("import faker\nimport helper\nfrom . import helper\n")
    (tmp_path / "tests" / "helper.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["httpx>=0.27", "croniter>=2", "ruff"]\n'
        '[project.optional-dependencies]\ndev = ["Faker>=20"]\n'
    )
    findings = check(
        source_files(tmp_path),
        tmp_path,
        Declared.from_pyproject(tmp_path / "pyproject.toml"),
        {"httpx": ["httpx"], "faker": ["Faker"], "croniter": ["croniter"]},
        {"ruff": "a linter", "httpx": "a stale reason"},
    )
    # faker is declared for the tests only: the service code may not import it
    assert findings.undeclared == {"backend/a.py: faker": {"faker"}}
    assert findings.unknown == {"backend/a.py: no_such_module_anywhere"}
    assert findings.unused == {"croniter"}
    assert findings.stale_reasons == {"httpx"}
