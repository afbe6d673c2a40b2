"""The rooms stand alone: the core (cellab/) imports no room, and a room imports only the core and itself.
Every Python file of the project is parsed; its imports (also the ones inside functions) are checked."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# import package -> its folder (pyproject.toml's package-dir)
ROOM_PACKAGES = {"cellab.ran": "ran-config", "cellab.epc": "core-config", "cellab.attenuator": "attenuator",
                 "cellab.ue": "ue-agents", "cellab.server": "server-modules", "cellab.emulator": "emulator"}
SKIP = {".venv", "build", ".git", "runs"}


def room_of_module(module: str) -> str | None:
    """The folder a module lives in: a room's, 'cellab' for the core, None outside the project."""
    for package, folder in ROOM_PACKAGES.items():
        if module == package or module.startswith(package + "."):
            return folder
    return "cellab" if module == "cellab" or module.startswith("cellab.") else None


def imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in SKIP or len(rel.parts) == 1:
            continue
        home = rel.parts[0]
        for line, module in imports(path):
            room = room_of_module(module)
            if room is not None and room not in ("cellab", home):
                out.append(f"{rel}:{line}: imports {module} (room {room})")
    return out


def test_no_room_imports_another_and_the_core_imports_no_room():
    found = violations()
    assert not found, "\n".join(found)


def test_the_check_sees_a_violation(tmp_path):
    # the rule can fail: a core module importing a room, and a room importing another room, are both found
    (tmp_path / "cellab").mkdir()
    (tmp_path / "cellab" / "bad.py").write_text("def f():\n    from cellab.emulator.vlab import VirtualLab\n")
    (tmp_path / "attenuator").mkdir()
    (tmp_path / "attenuator" / "bad.py").write_text("import cellab.server.modules\nfrom cellab.errors import InputError\n")
    assert violations(tmp_path) == ["attenuator/bad.py:1: imports cellab.server.modules (room server-modules)",
                            "cellab/bad.py:2: imports cellab.emulator.vlab (room emulator)"]
