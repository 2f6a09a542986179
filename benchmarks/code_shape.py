"""The shape of tunebench's code: what a reader meets (modules over 500 lines, the largest
classes and functions, untyped dicts, private names imported across modules, kind names
tested by string). Counts the source as it is; run it on two checkouts to see a change.

    python benchmarks/code_shape.py [--root DIR] [--json]

Nothing is run or imported: the files are parsed (ast) and their text counted.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import Counter
from pathlib import Path

LONG_MODULE = 500
UNTYPED = re.compile(r"dict\[str, Any\]")
# the same looseness under another name: a mapping whose values are Any, and the parameters
# typed RowView (points/cells.py: a row the rules read, typed or read back from points.csv)
LOOSE_MAPPING = re.compile(r"Mapping\[str, Any\]|: RowView\b")
# a deployment kind or a load kind compared by its name, the way a Kind property or the
# LoadKind enum would replace it
KIND_NAME_TEST = re.compile(
    r"""(\.kind|kind_of\([^)]*\)\.name|\bkind)\s*(==|!=)\s*["'](local|recorded|replay|helm|endpoint)["']"""
)


def _sizes(node: ast.AST) -> int:
    end = getattr(node, "end_lineno", None)
    return (end - node.lineno + 1) if end else 0


def shape(root: Path) -> dict:
    package = root / "tunebench"
    modules = sorted(package.rglob("*.py"))
    lines_total = 0
    untyped: Counter[str] = Counter()
    loose = 0
    lines_by: Counter[str] = Counter()
    long_modules = []
    classes, functions = [], []
    private_imports = []
    kind_tests = []
    for path in modules:
        text = path.read_text()
        rel = path.relative_to(root).as_posix()
        count = len(text.splitlines())
        lines_total += count
        top = rel.split("/")[1] if rel.count("/") > 1 else "(top)"
        lines_by[top] += count
        untyped[top] += len(UNTYPED.findall(text))
        loose += len(LOOSE_MAPPING.findall(text))
        if count > LONG_MODULE:
            long_modules.append((rel, count))
        for number, line in enumerate(text.splitlines(), 1):
            if KIND_NAME_TEST.search(line):
                kind_tests.append(f"{rel}:{number}")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.append((_sizes(node), f"{rel}:{node.name}"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((_sizes(node), f"{rel}:{node.name}"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tunebench"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private_imports.append(f"{rel}: {node.module}.{alias.name}")
    kloc = lines_total / 1000
    return {
        "modules": len(modules),
        "lines": lines_total,
        "dict_str_any": sum(untyped.values()),
        "dict_str_any_per_kloc": round(sum(untyped.values()) / kloc, 1),
        "mapping_str_any": loose,
        "dict_str_any_per_kloc_by_package": {
            p: round(untyped[p] / (lines_by[p] / 1000), 1)
            for p in sorted(lines_by)
            if lines_by[p] >= 500
        },
        "modules_over_500_lines": sorted(long_modules, key=lambda m: -m[1]),
        "largest_classes": [f"{name} {size}" for size, name in sorted(classes, reverse=True)[:5]],
        "largest_functions": [
            f"{name} {size}" for size, name in sorted(functions, reverse=True)[:5]
        ],
        "private_names_imported_across_modules": private_imports,
        "kind_name_tests": kind_tests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not (args.root / "tunebench").is_dir():
        print(f"--root {args.root}: no tunebench/ package there", file=sys.stderr)
        return 2
    found = shape(args.root)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"{found['modules']} modules, {found['lines']} lines")
    print(
        f"dict[str, Any]: {found['dict_str_any']} ({found['dict_str_any_per_kloc']} per kloc); "
        "by package: "
        + ", ".join(f"{p} {v}" for p, v in found["dict_str_any_per_kloc_by_package"].items())
    )
    print(f"Mapping[str, Any] and RowView parameters: {found['mapping_str_any']}")
    long = found["modules_over_500_lines"]
    print(
        f"modules over {LONG_MODULE} lines: {len(long)}"
        + (": " + ", ".join(f"{m} {n}" for m, n in long) if long else "")
    )
    print("largest classes: " + ", ".join(found["largest_classes"]))
    print("largest functions: " + ", ".join(found["largest_functions"]))
    private = found["private_names_imported_across_modules"]
    print(f"private names imported across modules: {len(private)}")
    for line in private:
        print(f"  {line}")
    tests = found["kind_name_tests"]
    print(f"kind names tested by string: {len(tests)}")
    for line in tests:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
