"""No file of the MCP server grows past 500 lines (issue 26: tools.py was 1,354 lines before it became a package
whose modules each register their own tools)."""

from __future__ import annotations

from pathlib import Path

MCP = Path(__file__).resolve().parents[2] / "backend" / "mcp"
MAX_LINES = 500


def over_long(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Every Python file under `root` longer than `limit` lines, with its line count."""
    counts = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in sorted(root.rglob("*.py"))}
    return {name: n for name, n in counts.items() if n > limit}


def test_no_mcp_file_is_over_500_lines() -> None:
    assert (MCP / "tools" / "__init__.py").is_file()  # the tools are a package: the walk reaches its modules
    assert over_long(MCP) == {}


def test_the_check_reports_an_over_long_file(tmp_path: Path) -> None:
    """Control: a synthetic tree with one file just over the limit, one at it, one nested over it."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "fine.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "tools" / "deep.py").write_text("x = 1\n" * 1354)
    assert over_long(tmp_path) == {"long.py": MAX_LINES + 1, "tools/deep.py": 1354}
