"""The import graph of the site's code (chats/, citations/, demo_agent/, migrations aside) has no
cycle, and no function imports a module of the site where a module-level import would do.

The graph is grimp's, the one import-linter holds the layers on: every import statement, at
module level, inside functions, and under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import grimp

ROOTS = ("chats", "citations", "demo_agent")
SITE = (*ROOTS, "researchsite")
REPO = Path(__file__).resolve().parent.parent

# Imports a function makes of a site module, each with the reason it cannot be at the top.
LOCAL_IMPORTS_ALLOWED = {
    # AppConfig.ready(): the module imports the models, which Django loads after apps.py.
    ("chats.apps", "chats.live.event_log"),
    ("chats.apps", "chats.live.limits"),
}


def test_the_site_has_no_import_cycle_and_no_function_local_import():
    graph = grimp.build_graph(*SITE)
    modules = checked(graph, ROOTS)
    assert {"chats.run.lifespan", "citations.resolve", "demo_agent.app"} <= set(modules)
    assert cycle(graph, modules) == []
    assert local_imports(graph, modules, REPO, SITE) == []


def test_a_cycle_through_type_checking_and_a_function_local_import_are_found(tmp_path, monkeypatch):
    """The checks above see what they look for, in a package made up for the purpose."""
    package = tmp_path / "madeup"
    (package / "migrations").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "migrations" / "__init__.py").write_text("import madeup.a\n")
    (package / "a.py").write_text("import madeup.b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from madeup.a import x\n"
    )
    (package / "c.py").write_text("def f():\n    from madeup import b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("madeup", cache_dir=None)
    modules = checked(graph, ("madeup",))
    assert "madeup.migrations" not in modules
    assert set(cycle(graph, modules)) == {"madeup.a", "madeup.b"}
    assert local_imports(graph, modules, tmp_path, ("madeup",)) == ["madeup.c:2 imports madeup.b"]


def checked(graph: grimp.ImportGraph, roots: tuple[str, ...]) -> list[str]:
    """The modules under `roots`, migrations aside."""
    return sorted(m for m in graph.modules if m.split(".")[0] in roots and ".migrations" not in m)


def cycle(graph: grimp.ImportGraph, modules: list[str]) -> list[str]:
    """One import cycle among `modules` (each module in it once), or []."""
    imports = {m: graph.find_modules_directly_imported_by(m) & set(modules) for m in modules}
    try:
        graphlib.TopologicalSorter(imports).prepare()
    except graphlib.CycleError as error:
        return error.args[1][:-1]  # the cycle names its first module again at its end
    return []


def local_imports(
    graph: grimp.ImportGraph, modules: list[str], root: Path, site: tuple[str, ...]
) -> list[str]:
    """Each import of a module of `site` made inside a function, but those allowed."""
    found = []
    for module in modules:
        lines = _lines_of_imports_in_functions(root, module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported.split(".")[0] not in site or (module, imported) in LOCAL_IMPORTS_ALLOWED:
                continue
            details = graph.get_import_details(importer=module, imported=imported)
            found += [
                f"{module}:{d['line_number']} imports {imported}"
                for d in details
                if d["line_number"] in lines
            ]
    return found


def _lines_of_imports_in_functions(root: Path, module: str) -> set[int]:
    path = root.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(path.read_text(), str(path))
    return {
        node.lineno
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
    }
