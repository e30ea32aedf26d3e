"""The package reads top to bottom: no module of companion/ imports, directly or through
others, a module that imports it back (lazy imports inside functions count too)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "companion"


def _imports():
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = parts[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = list(package[:len(package) - node.level + 1]) if node.level else []
                base = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    is_module = (ROOT.parent / (sub.replace(".", "/") + ".py")).exists()
                    deps.add(sub if is_module else base)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        mods[name] = {d for d in deps if d.startswith("companion.") and d != name}
    return mods


def test_no_import_cycles():
    mods = _imports()

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for dep in mods.get(todo.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen

    cycles = sorted({tuple(sorted((a, b))) for a in mods for b in mods[a]
                     if b in mods and a in reach(b)})
    assert not cycles, f"import cycles: {cycles}"


def test_checking_an_answer_loads_no_chart_library():
    # the model and the exercise catalogue never need altair or ipywidgets: the catalogue
    # imports the explore package (which loads altair) only inside answers that use its frames
    import subprocess
    import sys
    code = ("import sys\nfrom companion import exercises\n"
            "assert exercises.check('ic-nvlink4-per-direction', 450)\n"
            "import companion.parallel, companion.cases, companion.claims\n"
            "print(sorted(m for m in ('altair', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT.parent, check=True).stdout.strip()
    assert out == "[]", out
