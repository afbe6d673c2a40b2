"""The core's modules import each other without a circle: at import time none comes back to itself, and the
campaign loader, its checks, the inventory lab, the store and the traces do not even inside functions (they
depend on leaf modules: records, errors, inputs). Imports under `if TYPE_CHECKING:` never run and do not
count; a lazy import elsewhere (errors' key hints reading the schema) is a deliberate late binding."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1]


PLANNING = {"campaign", "campaign_checks", "inventory_lab", "store", "store_check", "traces", "records", "schedules"}


def _imports(path: Path, lazy: bool = True) -> set[str]:
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    if not lazy:  # inside functions: not run at import time
        skipped |= {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for n in ast.walk(f)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cellab."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cellab.")}
    return found


def _graph(lazy: bool, only: set[str] | None = None) -> dict[str, set[str]]:
    modules = {f"cellab.{p.stem}": p for p in CORE.glob("*.py")
               if p.stem != "__init__" and (only is None or p.stem in only)}
    return {name: {m for m in _imports(path, lazy) if m in modules} for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def test_the_core_modules_import_each_other_without_a_circle():
    cycle = _cycle(_graph(lazy=False))
    assert cycle is None, " -> ".join(cycle)


def test_planning_and_storing_have_no_circle_even_inside_functions():
    cycle = _cycle(_graph(lazy=True, only=PLANNING))
    assert cycle is None, " -> ".join(cycle)


def test_the_checker_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
