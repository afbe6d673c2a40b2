"""The core's packages are layered, and no module comes back to itself through its imports.

`LAYERS` lists the core's packages from the bottom up (docs/ARCHITECTURE.md draws the same map): a module may import
its own package and the packages of lower layers, never a sibling of its layer or anything above. The top-level
modules (`cellab.errors`, `inputs`, `records`, ...) are the foundation; the CLI, the bench runner and the test kit
sit on top. Imports inside functions count as much as the others (a lazy import is still a dependency); only those
under `if TYPE_CHECKING:` are left out, since they never run. The circle check covers the rooms' packages too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "cellab"
ROOMS = {"ran-config": "cellab.ran", "core-config": "cellab.epc", "attenuator": "cellab.attenuator",
         "ue-agents": "cellab.ue", "server-modules": "cellab.server", "emulator": "cellab.emulator"}
FOUNDATION = "cellab"  # the modules directly under cellab/
TOP = {"cellab.cli", "cellab.bench", "cellab.__main__", "cellab.testkit"}  # the CLI, and what runs it
LAYERS: list[set[str]] = [
    {FOUNDATION},
    {"cellab.bus"},
    {"cellab.contracts"},
    {"cellab.labs"},
    {"cellab.faults", "cellab.inventory"},
    {"cellab.campaign"},
    {"cellab.results"},
    {"cellab.run"},
    {"cellab.report", "cellab.cluster"},
    {"cellab.fidelity"},
    {"cellab.cli"},
    TOP - {"cellab.cli"},
]


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ROOMS:
        parts = ROOMS[parts[0]].split(".") + parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, known: set[str] = frozenset()) -> set[str]:
    """Every cellab module this file imports, at import time or inside functions (not under TYPE_CHECKING);
    `from cellab.report import page` names the module cellab.report.page when `known` has it."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("cellab"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            found |= subs or {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cellab")}
    return found


def package_of(module: str) -> str:
    """The core package a module belongs to: cellab.X for cellab.X.*, the foundation for cellab.Y modules."""
    parts = module.split(".")
    if len(parts) >= 2 and f"cellab.{parts[1]}" in TOP:
        return f"cellab.{parts[1]}"
    if len(parts) >= 3 or (len(parts) == 2 and (CORE / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return FOUNDATION


def layer_of(package: str, layers: list[set[str]] = LAYERS) -> int | None:
    return next((i for i, layer in enumerate(layers) if package in layer), None)


def core_files(core: Path = CORE) -> list[Path]:
    return sorted(p for p in core.rglob("*.py") if "tests" not in p.relative_to(core).parts)


def layering_violations(core: Path = CORE, layers: list[set[str]] = LAYERS) -> list[str]:
    out = []
    known = {module_name(p, core.parent) for p in core_files(core)}
    for path in core_files(core):
        mine = package_of(module_name(path, core.parent))
        my_layer = layer_of(mine, layers)
        if my_layer is None:
            out.append(f"{path.relative_to(core.parent)}: package {mine} is in no layer (add it to LAYERS)")
            continue
        for target in sorted(imports(path, known)):
            theirs = package_of(target)
            if theirs == mine or not target.startswith("cellab.") or (layer := layer_of(theirs, layers)) is None:
                continue  # its own package; a room (test_room_imports keeps those apart)
            if layer >= my_layer:
                out.append(f"{path.relative_to(core.parent)}: {mine} (layer {my_layer + 1}) imports {target} "
                           f"(layer {layer + 1})")  # layers counted from 1, as docs/ARCHITECTURE.md draws them
    return out


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = [p for p in root.rglob("*.py") if not ({".venv", "build", ".git", "runs", "tests"} & set(p.relative_to(root).parts))
             and (p.relative_to(root).parts[0] in ROOMS or p.relative_to(root).parts[0] == "cellab")]
    modules = {module_name(p, root): p for p in files}
    return {name: {m for m in imports(path, set(modules)) if m in modules and m != name} for name, path in modules.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_core_package_imports_only_lower_layers():
    found = layering_violations()
    assert not found, "\n".join(found)


def test_no_module_of_the_project_comes_back_to_itself():
    found = cycle(module_graph())
    assert found is None, " -> ".join(found)


def test_the_layering_check_sees_an_upward_import(tmp_path):
    core = tmp_path / "cellab"
    for pkg in ("results", "report"):
        (core / pkg).mkdir(parents=True)
        (core / pkg / "__init__.py").write_text("")
    (core / "errors.py").write_text("def hint():\n    from cellab.results.store import ResultStore\n")
    (core / "results" / "store.py").write_text("from cellab.report.page import write_report\nfrom cellab.errors import x\n")
    (core / "report" / "page.py").write_text("from cellab.results.store import ResultStore\n")
    layers = [{FOUNDATION}, {"cellab.results"}, {"cellab.report"}]
    assert layering_violations(core, layers) == [
        "cellab/errors.py: cellab (layer 1) imports cellab.results.store (layer 2)",
        "cellab/results/store.py: cellab.results (layer 2) imports cellab.report.page (layer 3)",
    ]


def test_the_circle_check_sees_a_circle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_every_source_file_is_under_500_lines():
    """Python and C alike, the core's and the rooms' (tests included): a file that grows past it is split by
    concern."""
    sources = [p for folder in ("cellab", *ROOMS) for ext in ("*.py", "*.c", "*.h") for p in (ROOT / folder).rglob(ext)]
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in sorted(sources) if (n := len(p.read_text().splitlines())) >= 500]
    assert not long, "\n".join(long)
