"""Dependencies between backend packages point one way: no package reaches, through any chain of imports,
back to itself, and every import points down the declared layers (or stays within its layer). Every import
counts, a function-local one too (hiding a cycle inside a function does not remove it). A node is a package
under backend/ (runs, actions, …) or a loose module (db, app, …). No backend module imports the tests."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[1] / "backend"

Edges = dict[str, dict[str, list[str]]]


# The layers, lowest first, as the code has them (read off `package_graph()`): a node may import its own layer
# and the ones below it, never one above. A new package has to be placed here.
LAYERS: list[tuple[str, set[str]]] = [
    # what everything may use: configuration, time, hashes, file modes, errors, the conditional decision write,
    # the one seccomp generator, the API's lock tables, the package's version, log lines and counters, the API's
    # contract (how the document states refusals)
    (
        "foundations",
        {
            *("settings", "clock", "errors", "hashing", "filemodes", "decisions", "seccomp_filter", "locks"),
            *("version", "observe", "contract"),
        },
    ),
    # machinery that knows no company: the scanner, the converters, the VM runner, the hash-chained audit trail
    ("engines", {"injection", "convert", "sandbox", "audit"}),
    ("tenancy", {"tenancy"}),
    # a company's data: records, credits, Drive, and the bundle staged from them
    ("company data", {"records", "credits", "drive", "staging", "notify"}),
    # the life of a run or flow, from proposal to decided action items
    ("runs and decisions", {"runs", "actions", "flows", "schedules", "evidence", "review"}),
    # the API as its callers see it: the typed client (console, MCP, host agent) and the health schema it reads
    ("client", {"client", "system_schemas"}),
    # carrying approved runs out: the local loop, and the fleet's API side and host agent
    ("execution", {"execution", "fleet"}),
    # the engine and the Piccolo app over every capability's tables
    ("database", {"db", "piccolo_app", "piccolo_conf"}),
    # what a serving process is: the Litestar app, /mcp, /metrics, health, its Server-Timing
    ("serving", {"app", "mcp", "metrics", "system_controller", "timing", "heap"}),
    # run beside the product, never by it: benches, soak, demo data, the injection training harness
    ("tools", {"benches", "soak", "demo", "injection_training", "localhost"}),
    ("command line", {"cli", "__main__"}),
]


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


def layer_violations(edges: Edges, layers: list[tuple[str, set[str]]] = LAYERS) -> list[str]:
    """Every import that points up the layers, with where it is; and every node no layer (or two) declares."""
    rank: dict[str, int] = {}
    problems: list[str] = []
    for i, (_name, members) in enumerate(layers):
        for node in sorted(members):
            if node in rank:
                problems.append(f"{node} is declared in two layers")
            rank[node] = i
    nodes = set(edges) | {d for targets in edges.values() for d in targets}
    problems += [f"{node} is in no layer" for node in sorted(nodes - set(rank))]
    for source, targets in sorted(edges.items()):
        for dest, places in sorted(targets.items()):
            if source in rank and dest in rank and rank[dest] > rank[source]:
                problems.append(
                    f"{source} ({layers[rank[source]][0]}) -> {dest} ({layers[rank[dest]][0]}): {', '.join(places[:3])}"
                )
    return problems


def imports_of_tests(root: Path = BACKEND) -> list[str]:
    """Where a backend module imports the tests package."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        for target, line in _imported(tree, module, path.name == "__init__.py"):
            where = f"{path.relative_to(root.parent)}:{line}"
            if (target == "tests" or target.startswith("tests.")) and where not in found:
                found.append(where)
    return found


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


def test_every_import_points_down_the_layers() -> None:
    problems = layer_violations(package_graph())
    assert not problems, "imports against the declared layers:\n" + "\n".join(problems)


def test_every_declared_layer_member_exists() -> None:
    """The list stays the code's: a node named in a layer that no longer exists is a stale name."""
    edges = package_graph()
    nodes = set(edges) | {d for targets in edges.values() for d in targets}
    declared = set().union(*(members for _, members in LAYERS))
    assert declared - nodes == set()


def test_the_layer_check_reports_an_import_pointing_up() -> None:
    """Positive control on the real graph: one synthetic import from a foundation up to runs is reported, with
    its place, and nothing else is; an undeclared node is reported too."""
    edges = package_graph()
    edges.setdefault("settings", {})["runs"] = ["backend/settings.py:1"]
    assert layer_violations(edges) == [
        "settings (foundations) -> runs (runs and decisions): backend/settings.py:1"
    ]
    edges = {"runs": {"tenancy": ["a"]}, "newcomer": {"runs": ["b"]}}
    assert layer_violations(edges, [("low", {"tenancy"}), ("high", {"runs"})]) == ["newcomer is in no layer"]
    assert layer_violations({"tenancy": {"runs": ["c"]}}, [("low", {"tenancy"}), ("high", {"runs"})]) == [
        "tenancy (low) -> runs (high): c"
    ]


def test_no_backend_module_imports_the_tests(tmp_path: Path) -> None:
    """The injection training harness keeps its regression sets itself; nothing in backend/ reaches tests/.
    Control: a function-local import of tests in a synthetic tree is found."""
    assert imports_of_tests() == []
    root = tmp_path / "backend"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "train.py").write_text("def data():\n    from tests.injection.corpus import rows\n")
    assert imports_of_tests(root) == ["backend/trainer/train.py:2"]
