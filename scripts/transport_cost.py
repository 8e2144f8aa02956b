"""The transport's own cost in a counted window, inclusive: its code plus the kernel
functions it calls (RDMA core helpers, rdma_rw, DMA mapping, slab, scatterlists), without
the provider (rxe, siw), the nvmet core, the backend, the host or user space, attributed
by the call chain the insn-count plugin followed (its `n` and `c` records).

The plugin counts instructions by chain node: a module function entered by a call, with
its own code and the kernel-image helpers it calls (scripts/insn-count/frames.rs). A
node is the transport's when its function is the transport's, or when its function is
neutral (the RDMA core's modules, an interrupt's entry) and its nearest caller that is
not neutral is the transport.
"""

# Modules whose code, and what it calls, is not the transport's cost.
EXCLUDED = {
    "rdma_rxe", "siw", "nvmet", "null_blk", "nvme_rdma", "nvme_fabrics", "nvme_core",
    "nvme_keyring", "nvme_auth", "user",
}


def kind_of(module, transport_module):
    if module == transport_module:
        return "transport"
    if module in EXCLUDED:
        return "excluded"
    return "neutral"


def inclusive(chains, nodes, syms, transport_module):
    """{'insns', 'locked', 'by_function': {transport function: insns},
    'locked_by_function': {transport function: locked}} of one window.

    chains: [(node, insns, locked)]; nodes: {id: (parent, func)}; syms: a
    count_report.Symbols with the window's transport loaded."""
    owner = {0: ("neutral", None)}

    def owner_of(node):
        # The node's kind and function, or its caller's for a neutral one (iterative:
        # chains can be deep).
        path, cur = [], node
        while cur not in owner:
            if cur not in nodes:
                owner[cur] = ("neutral", None)
                break
            parent, func = nodes[cur]
            fn, mod = syms.lookup(func)
            k = kind_of(mod, transport_module)
            if k != "neutral":
                owner[cur] = (k, fn)
                break
            path.append(cur)
            cur = parent
        for n in path:
            owner[n] = owner[cur]
        return owner[node]

    total = locked = 0
    by_function, locked_by_function = {}, {}
    for node, insns, lk in chains:
        k, fn = owner_of(node)
        if k != "transport":
            continue
        total += insns
        locked += lk
        by_function[fn] = by_function.get(fn, 0) + insns
        locked_by_function[fn] = locked_by_function.get(fn, 0) + lk
    return {"insns": total, "locked": locked, "by_function": by_function,
            "locked_by_function": locked_by_function}


def locked_by_module(blocks_locked, syms):
    """{module: locked instructions} of a window's blocks ({vaddr: locked executed})."""
    out = {}
    for vaddr, n in blocks_locked.items():
        _, mod = syms.lookup(vaddr)
        out[mod] = out.get(mod, 0) + n
    return out
