"""Where a test's helpers come from: tests/support/, one module per concern. A test file may import another
test module's or a conftest's fixtures (pytest's way to share one across folders), never its helpers, so a
newcomer finds every helper in one place and no test file is a library for others (tests/README.md)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_fixture(node: ast.AST) -> bool:
    return any("fixture" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
    return names


def helpers_imported_from_tests(root: Path = TESTS) -> list[str]:
    """Every name a file under `root` imports from a conftest or a test_*.py module that is not a fixture."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            parts = node.module.split(".")
            if parts[0] != root.name or not (parts[-1] == "conftest" or parts[-1].startswith("test_")):
                continue
            source = root.parent.joinpath(*parts).with_suffix(".py")
            defined = _top_level(ast.parse(source.read_text())) if source.is_file() else {}
            for alias in node.names:
                if not _is_fixture(defined.get(alias.name, ast.Pass())):
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} {alias.name} from {node.module}"
                    )
    return found


def test_helpers_come_from_tests_support() -> None:
    found = helpers_imported_from_tests()
    assert not found, "helpers imported from a conftest or a test module (move them to tests/support/):\n" + (
        "\n".join(found)
    )


def test_the_layout_check_sees_a_helper_and_lets_a_fixture_pass(tmp_path: Path) -> None:
    """Positive control: a helper imported from a conftest and one from a test module are reported (a
    function-local import too); a fixture imported from a test module is not."""
    root = tmp_path / "tests"
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "conftest.py").write_text("def proposal():\n    return {}\n")
    (root / "runs" / "test_a.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef alice():\n    return 1\n\ndef _queued():\n    return 2\n"
    )
    (root / "runs" / "test_b.py").write_text(
        "from tests.runs.conftest import proposal\nfrom tests.runs.test_a import alice\n"
        "def test_x():\n    from tests.runs.test_a import _queued\n"
    )
    assert helpers_imported_from_tests(root) == [
        "tests/runs/test_b.py:1 proposal from tests.runs.conftest",
        "tests/runs/test_b.py:4 _queued from tests.runs.test_a",
    ]
