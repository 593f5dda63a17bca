"""Dependencies between backend packages point one way: no package reaches, through any chain of imports,
back to itself. Every import counts, a function-local one too (hiding a cycle inside a function does not
remove it). A node is a package under backend/ (runs, actions, …) or a loose module (db, app, …)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[1] / "backend"

Edges = dict[str, dict[str, list[str]]]


def _node(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "backend" and len(parts) > 1 else None


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterable[tuple[str, int]]:
    """Every module an import statement anywhere in the file names, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([node.module] if node.module else [])])
            yield base, node.lineno
            for alias in node.names:  # `from backend import db` names the module backend.db
                yield f"{base}.{alias.name}", node.lineno


def package_graph(root: Path = BACKEND) -> Edges:
    edges: Edges = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        source = _node(module)
        if source is None:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for target, line in _imported(tree, module, path.name == "__init__.py"):
            dest = _node(target)
            if dest and dest != source:
                where = f"{path.relative_to(root.parent)}:{line}"
                places = edges.setdefault(source, {}).setdefault(dest, [])
                if where not in places:
                    places.append(where)
    return edges


def find_cycles(graph: dict[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one node, as a closed path [a, b, …, a]."""
    nodes = sorted(set(graph) | {d for targets in graph.values() for d in targets})
    succ = {n: sorted(graph.get(n, ())) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in succ[node]:
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in nodes:
        if node not in index:
            connect(node)
    return [_closed_path(component, succ) for component in sorted(components)]


def _closed_path(component: list[str], succ: dict[str, list[str]]) -> list[str]:
    """A shortest path from the component's first node back to itself, inside the component."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in succ[node]:
                if nxt not in members:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, node, start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def _describe(cycle: list[str], edges: Edges) -> str:
    steps = [f"  {a} -> {b}: {', '.join(edges[a][b][:3])}" for a, b in zip(cycle, cycle[1:], strict=False)]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


def test_backend_packages_import_each_other_in_one_direction() -> None:
    edges = package_graph()
    cycles = find_cycles({a: list(targets) for a, targets in edges.items()})
    assert not cycles, "import cycles between backend packages:\n" + "\n".join(
        _describe(c, edges) for c in cycles
    )


def test_the_cycle_finder_finds_what_it_must() -> None:
    """Positive control on small graphs: a function-local-free chain, a long cycle and a self-contained one."""
    assert find_cycles({"runs": ["tenancy"], "actions": ["runs"], "tenancy": []}) == []
    assert find_cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c", "a"]]
    assert find_cycles({"x": ["y"], "y": ["x"], "p": ["q"], "q": ["p"]}) == [["p", "q", "p"], ["x", "y", "x"]]


def test_a_function_local_import_counts(tmp_path: Path) -> None:
    """The graph reader sees an import hidden inside a function, and reports the cycle it closes."""
    root = tmp_path / "backend"
    for package in ("runs", "actions"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "actions" / "service.py").write_text("from backend.runs.tables import Run\n")
    (root / "runs" / "service.py").write_text("def detail():\n    from backend.actions import service\n")
    edges = package_graph(root)
    assert edges["runs"]["actions"] == ["backend/runs/service.py:2"]
    assert find_cycles({a: list(t) for a, t in edges.items()}) == [["actions", "runs", "actions"]]
