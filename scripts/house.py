"""The house's edges, counted: private names imported across modules, deferred imports of worldgate's own modules,
package files over 500 lines. Prints one line per finding and a summary; exit 1 where any count is not zero."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("adapters", "evaluate", "generate", "trajectories", "worldgate")
LIMIT = 500


def files():
    for p in PACKAGES:
        for f in sorted((ROOT / p).rglob("*.py")):
            if f.is_symlink() or any(part.is_symlink() for part in f.relative_to(ROOT).parents if str(part) != "."):
                continue
            yield f


def module_of(f: Path) -> str:
    rel = f.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] != "worldgate":
        parts = ["worldgate"] + parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def main() -> int:
    private, deferred, long_files = [], [], []
    for f in files():
        text = f.read_text()
        n = text.count("\n")
        rel = f.relative_to(ROOT)
        if n > LIMIT:
            long_files.append(f"{rel}: {n} lines")
        mod = module_of(f)
        tree = ast.parse(text)
        inner = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner.update(id(x) for x in ast.walk(fn) if x is not fn)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = resolve(mod, node, f.name == "__init__.py")
                own = target.startswith("worldgate") or node.level
                if not own:
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        private.append(f"{rel}:{node.lineno}: {a.name} from {target}")
                if id(node) in inner:
                    deferred.append(f"{rel}:{node.lineno}: from {target}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("worldgate") and id(node) in inner:
                        deferred.append(f"{rel}:{node.lineno}: import {a.name}")
    for title, rows in (("private names imported across modules", private),
                        ("deferred imports of worldgate's own modules", deferred),
                        (f"package files over {LIMIT} lines", long_files)):
        print(f"{title}: {len(rows)}")
        for r in rows:
            print(f"  {r}")
    return 1 if (private or deferred or long_files) else 0


if __name__ == "__main__":
    sys.exit(main())
