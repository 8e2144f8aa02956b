#!/usr/bin/env python3
"""The layering the code keeps (Documentation/nvmet-rdma-rs.md, "Layers and imports").

Checks, on the source tree this file is in:
- the transport's modules import in one direction only: the graph of `crate::x`
  references between the modules of nvmet_rdma_rs/ (a file `x.rs` and the files under
  `x/` are module `x`) has no cycle;
- no `bindings::` item is used outside the binding layers (rdma/ and nvmet/).

Prints the modules in an order that respects the imports (lowest first), or the cycle.
Exit status 1 if a check fails."""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRANSPORT = os.path.join(ROOT, "nvmet_rdma_rs")
OUTSIDE_LAYERS = ["nvmet_rdma_rs", "rdma_server", "rdma_client"]
# Generated and shared-by-source folders compiled into the transport, not its modules.
NOT_MODULES = {"rdma_bindings_generated", "nvmet_rdma"}


def code_of(path):
    """The file's text without comments."""
    src = open(path).read()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return "\n".join(line.split("//")[0] for line in src.splitlines())


def modules():
    """Module name -> its files."""
    mods = {}
    for entry in sorted(os.listdir(TRANSPORT)):
        path = os.path.join(TRANSPORT, entry)
        if entry.endswith(".rs"):
            name = entry[:-3]
            if name not in NOT_MODULES:
                mods.setdefault(name, []).append(path)
        elif os.path.isdir(path):
            for dirpath, _, names in os.walk(path):
                mods.setdefault(entry, []).extend(
                    os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".rs"))
    return mods


def imports(mods):
    """Module -> the modules its files name through `crate::`."""
    graph = {}
    for name, paths in mods.items():
        code = "\n".join(code_of(p) for p in paths)
        used = set(re.findall(r"\bcrate::(\w+)", code))
        for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
            used.update(re.findall(r"\b(\w+)\b", group))
        graph[name] = sorted((used & set(mods)) - {name})
    return graph


def order(graph):
    """The modules lowest first, or (None, cycle)."""
    done, on_path, out = set(), [], []

    def visit(node):
        if node in done:
            return None
        if node in on_path:
            return on_path[on_path.index(node):] + [node]
        on_path.append(node)
        for other in graph[node]:
            cycle = visit(other)
            if cycle:
                return cycle
        on_path.pop()
        done.add(node)
        out.append(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle:
            return None, cycle
    return out, None


def bindings_outside():
    hits = []
    for top in OUTSIDE_LAYERS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                path = os.path.join(dirpath, n)
                if not n.endswith(".rs") or "generated" in n:
                    continue
                for number, line in enumerate(code_of(path).splitlines(), 1):
                    if re.search(r"\bbindings::", line):
                        hits.append(f"{os.path.relpath(path, ROOT)}:{number}")
    return hits


def main():
    failed = False
    lowest_first, cycle = order(imports(modules()))
    if cycle:
        print("import cycle: " + " -> ".join(cycle))
        failed = True
    else:
        print("transport modules, lowest first: " + ", ".join(lowest_first))
    hits = bindings_outside()
    for hit in hits:
        print(f"bindings:: outside the binding layers: {hit}")
    failed |= bool(hits)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
