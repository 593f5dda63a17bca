"""Dependencies between backend packages point one way: no package reaches, through any chain of imports,
back to itself, and every import points down the declared layers (or stays within its layer). Every import
counts, a function-local one too (hiding a cycle inside a function does not remove it). A node is a package
under backend/ (runs, actions, …) or a loose module (db, app, …). No backend module imports the tests."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[1] / "backend"
CONSOLE = BACKEND.parent / "console"

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
            "lazy",  # a package's public names loaded on first use (PEP 562)
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


@cache
def _parsed(path: Path) -> ast.Module:
    """Each file parsed once per test process (the tests here walk the same tree several times)."""
    return ast.parse(path.read_text(), filename=str(path))


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
        tree = _parsed(path)
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


def imports_of_tests(root: Path = BACKEND, above: tuple[str, ...] = ("tests", "console")) -> list[str]:
    """Where a backend module imports the tests package, or the console (which sits above the whole backend: it
    calls the API, the API never calls into it)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        tree = _parsed(path)
        for target, line in _imported(tree, module, path.name == "__init__.py"):
            where = f"{path.relative_to(root.parent)}:{line}"
            if target.split(".")[0] in above and where not in found:
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
    """The injection training harness keeps its regression sets itself; nothing in backend/ reaches tests/ (or
    console/). Control: a function-local import of tests in a synthetic tree is found."""
    assert imports_of_tests() == []
    root = tmp_path / "backend"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "train.py").write_text("def data():\n    from tests.injection.corpus import rows\n")
    (root / "trainer" / "view.py").write_text("import console.widgets\n")
    assert imports_of_tests(root) == ["backend/trainer/train.py:2", "backend/trainer/view.py:1"]


# The console and the typed client are clients of the API: they see it through the client and the API's own
# schemas, never a table or a service (a second way in, and Piccolo loaded into the console's process). What each
# may import from backend/, as module name patterns (fnmatch); every import counts, a function-local one too.
SCHEMAS = ("backend.*.schemas", "backend.*.sso_schemas", "backend.system_schemas", "backend.*.status")
CLIENT_MAY_IMPORT = (
    "backend.client",
    "backend.client.*",
    *SCHEMAS,
    "backend.observe",  # the request id a call carries (a foundation)
)
CONSOLE_MAY_IMPORT = (
    *CLIENT_MAY_IMPORT,
    # Piccolo-free leaves the console shares with the API
    *("backend.records.columns", "backend.records.names", "backend.staging.manifest"),
    *("backend.injection.text", "backend.injection.reasons", "backend.injection.categories"),
    # its own process: configuration, file modes, log lines, and the trusted hop to the API
    *("backend.settings", "backend.filemodes", "backend.tenancy.origin", "backend.tenancy.forwarded"),
)


@cache
def _is_module(name: str, root: Path) -> bool:
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def backend_imports(folder: Path, root: Path = BACKEND) -> dict[str, list[str]]:
    """Every backend module the .py files under `folder` import, with where: `from backend.x import y` names
    `backend.x.y` when that is a module, else `backend.x`."""
    found: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        tree = _parsed(path)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                base = node.module or ""
                targets = [
                    f"{base}.{a.name}" if _is_module(f"{base}.{a.name}", root) else base for a in node.names
                ]
            for target in targets:
                if target == "backend" or target.startswith("backend."):
                    where = f"{path.relative_to(folder.parent)}:{node.lineno}"
                    places = found.setdefault(target, [])
                    if where not in places:
                        places.append(where)
    return found


def outside(allowed: tuple[str, ...], imports: dict[str, list[str]]) -> list[str]:
    return [
        f"{target}: {', '.join(places[:3])}"
        for target, places in sorted(imports.items())
        if not any(fnmatch(target, pattern) for pattern in allowed)
    ]


def test_the_console_imports_only_the_client_and_the_apis_schemas() -> None:
    leaks = outside(CONSOLE_MAY_IMPORT, backend_imports(CONSOLE))
    assert not leaks, "the console imports backend modules outside its allow-list:\n" + "\n".join(leaks)


def test_the_client_imports_only_schemas_and_statuses() -> None:
    leaks = outside(CLIENT_MAY_IMPORT, backend_imports(BACKEND / "client"))
    assert not leaks, "backend/client imports more than schemas and status modules:\n" + "\n".join(leaks)


def test_the_allow_lists_report_a_table_or_a_service(tmp_path: Path) -> None:
    """Positive control: a synthetic console reaching a table (a function-local import too) and a client reaching
    a service are reported with their places; the schemas beside them are not."""
    console = tmp_path / "console"
    (console / "pages").mkdir(parents=True)
    (console / "pages" / "audit.py").write_text(
        "from backend.records.datasets import DATASET_NAMES\n"
        "from backend.runs.schemas import RunDetail\n"
        "def page():\n    from backend import db\n"
    )
    assert outside(CONSOLE_MAY_IMPORT, backend_imports(console)) == [
        "backend.db: console/pages/audit.py:4",
        "backend.records.datasets: console/pages/audit.py:1",
    ]
    client = tmp_path / "client"
    client.mkdir()
    (client / "api.py").write_text(
        "from backend.runs import service\nfrom backend.runs.status import RunStatus\n"
    )
    assert outside(CLIENT_MAY_IMPORT, backend_imports(client)) == ["backend.runs.service: client/api.py:1"]


# What a client's process must not load by importing it: the server's web framework, the ORM, libvirt, the
# console's UI, and our own tables, services and scanner. Run in a fresh interpreter (this one has them all).
LOADED = """
import importlib, json, pkgutil, sys
for name in {modules!r}:
    module = importlib.import_module(name)
    if {walk!r}:
        for info in pkgutil.walk_packages(module.__path__, name + "."):
            if not info.name.endswith(".__main__"):  # starts the server
                importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(*modules: str, walk: bool = False) -> list[str]:
    code = LOADED.format(modules=list(modules), walk=walk)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _heavy(loaded: list[str], packages: set[str]) -> list[str]:
    ours = (".tables", ".service", ".scanner", ".controller")
    return sorted(
        m for m in loaded if m.split(".")[0] in packages or (m.startswith("backend.") and m.endswith(ours))
    )


def test_importing_the_client_loads_no_server() -> None:
    # the whole typed client (the package loads `CleanroomClient` and every schema it names on first use)
    loaded = loaded_by("backend.client.api")
    assert _heavy(loaded, {"litestar", "piccolo", "libvirt", "nicegui"}) == []
    assert "backend.client" in loaded and "backend.runs.schemas" in loaded  # the probe saw the import


def test_importing_every_console_module_loads_no_table_or_service() -> None:
    loaded = loaded_by("console", walk=True)
    assert _heavy(loaded, {"piccolo", "libvirt"}) == []
    assert "console.pages.audit" in loaded and "nicegui" in loaded
