"""Import circles among the project's modules: `python -m testkit.import_cycles` prints each one.

A circle (a imports b, ..., which imports a) means none of its modules can be read, tested or moved
alone, and which one Python finishes first depends on which is imported first. The layers contracts of
`lint-imports` (pyproject.toml) forbid circles *between* packages; this finds them *inside* a package
too, on the same graph import-linter builds (grimp, imports under `if TYPE_CHECKING:` left out: they
never run). A circle is a strongly connected component of two or more modules (Tarjan's algorithm),
printed with one import path around it.

tests/test_architecture.py asserts there is none; the script is for the before-and-after of a change.
"""

from __future__ import annotations

import sys

PACKAGES = (
    "core",
    "curation",
    "dedup",
    "classifiers",
    "tokens",
    "mixtures",
    "trainer",
    "report",
    "workflows",
)


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """{module: the project modules it imports at run time}."""
    import grimp

    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of two or more modules, each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:  # iterative Tarjan: a deep import chain must not hit the recursion limit
        nonlocal counter
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found, key=lambda c: (-len(c), c))


def path_around(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One import path from the component's first module back to itself, inside the component."""
    inside = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth-first: the shortest way round
        nxt = []
        for node in frontier:
            for child in sorted(edges.get(node, ()) & inside):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    return component


def main() -> int:
    edges = import_graph()
    found = circles(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, {len(found)} import circles")
    for component in found:
        print(f"- {len(component)} modules ({', '.join(component)}); one way round: "
              + " -> ".join(path_around(component, edges)))  # fmt: skip
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
