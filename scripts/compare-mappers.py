#!/usr/bin/env python3
"""`lama plan` against published process mappers, every placement priced by one cost model.

    python3 scripts/compare-mappers.py [--lama target/release/lama] [--cases NAME,...]
                                       [--switches 4 --per-switch 22]

Needs the Python packages `kahip` (KaHIP's kaffpa) and `chszlablib` (SharedMap, Schulz & Woydt
2025) from the Python package index, in the interpreter that runs this script (a virtual
environment: `python3 -m venv V && V/bin/pip install kahip chszlablib numpy`); `lama plan`
itself needs neither.

The machine is the seed paper's shape: 4 leaf switches x 22 nodes x 2 packages x 2 NUMA nodes x
6 cores (2,112 cores), or as many switches and nodes per switch as given (20 x 21: 10,080
cores), every core used, or with only the first cores of each NUMA node free (`--free-cores
4`: a partial allocation of 16 of each node's 24 cores, the same on every node, so that
SharedMap's uniform hierarchy still describes it). The model is a hop-distance one:
two ranks whose closest common level is a NUMA node cost 10 per unit of volume, a package 20,
a node 40, a leaf switch 800, and farther 1600; `lama plan` is given the same distances
(`--distances`) and every placement is priced here by the same function.

Candidates, where each applies:
  - kaffpa: a level-by-level multisection with KaHIP's kaffpa (strong): the ranks split into
    the 4 switches, each part into its 22 nodes, then 2 packages, 2 NUMA nodes, 6 cores; parts
    made exact by moving the boundary ranks that cost least.
  - sharedmap: SharedMap (mode strong, one thread), on full uniform machines.
  - lama: `lama plan --explain` (its own time, end to end, is printed too).
Prints one Markdown row per case: each cost, the plan against each, and the times.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HIER = [6, 2, 2, 22, 4]  # cores per NUMA, NUMA per package, packages, nodes per switch, switches
DIST = [10, 20, 40, 800, 1600]
LAMA_DISTANCES = "numa=10,package=20,node=40,switch=800,farther=1600"


def stencil(dims):
    """Edges (i, j, 1) of a Cartesian stencil on a grid of `dims` (rank = x + X*(y + Y*z))."""
    n = int(np.prod(dims))
    edges = []
    strides = [int(np.prod(dims[:k])) for k in range(len(dims))]
    for r in range(n):
        rem = r
        for k, d in enumerate(dims):
            c = rem % d
            rem //= d
            if c + 1 < d:
                edges.append((r, r + strides[k], 1))
    return n, edges


def clustered(n, group, seed=42):
    """Heavy traffic inside groups of `group` consecutive ranks (shuffled), light between."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    edges = {}
    for g in range(0, n, group):
        members = perm[g:g + group]
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                i, j = sorted((int(members[a]), int(members[b])))
                edges[(i, j)] = 100
    for i in range(n):
        j = int(rng.integers(n))
        if i != j:
            a, b = sorted((i, j))
            edges[(a, b)] = edges.get((a, b), 0) + 1
    return n, [(i, j, w) for (i, j), w in edges.items()]


def ring(n):
    return n, [(i, (i + 1) % n, 1) for i in range(n)]


def pe_levels(pe):
    """The coordinates of PE index `pe` (cores first) at each level, innermost first."""
    out = []
    for h in HIER:
        out.append(pe % h)
        pe //= h
    return out


def cost(edges, assign):
    """Sum of volume x distance of the closest common level."""
    coords = {}
    total = 0
    for i, j, w in edges:
        a, b = assign[i], assign[j]
        if a == b:
            continue
        # The outermost level where they differ decides.
        la = coords.setdefault(a, pe_levels(a))
        lb = coords.setdefault(b, pe_levels(b))
        top = max(k for k in range(len(HIER)) if la[k] != lb[k])
        total += w * DIST[top]
    return total


def csr(n, edges, subset=None):
    """KaHIP's CSR arrays of the graph induced by `subset` (all when None)."""
    index = {v: k for k, v in enumerate(subset)} if subset is not None else None
    adj = [[] for _ in range(n if subset is None else len(subset))]
    for i, j, w in edges:
        if index is not None:
            if i not in index or j not in index:
                continue
            i, j = index[i], index[j]
        adj[i].append((j, w))
        adj[j].append((i, w))
    xadj, adjncy, adjw = [0], [], []
    for row in adj:
        for j, w in row:
            adjncy.append(j)
            adjw.append(int(w))
        xadj.append(len(adjncy))
    return xadj, adjncy, adjw


def exact_parts(part, k, sizes, xadj, adjncy, adjw):
    """Moves vertices from parts over their size to parts under it, each move the one that
    loses the least connection, until every part has its size."""
    part = list(part)
    count = [0] * k
    for p in part:
        count[p] += 1
    while any(count[p] > sizes[p] for p in range(k)):
        best = None
        for v in range(len(part)):
            p = part[v]
            if count[p] <= sizes[p]:
                continue
            conn = [0] * k
            for e in range(xadj[v], xadj[v + 1]):
                conn[part[adjncy[e]]] += adjw[e]
            for q in range(k):
                if count[q] < sizes[q]:
                    gain = conn[q] - conn[p]
                    if best is None or gain > best[0]:
                        best = (gain, v, q)
        _, v, q = best
        count[part[v]] -= 1
        part[v] = q
        count[q] += 1
    return part


def kaffpa_multisection(n, edges, kahip):
    """Level-by-level multisection with kaffpa strong, top level first."""
    assign = [0] * n
    groups = [(list(range(n)), 0, len(HIER) - 1)]
    while groups:
        members, base, level = groups.pop()
        k = HIER[level]
        below = int(np.prod(HIER[:level]))
        if level < 0 or len(members) <= 1:
            for m in members:
                assign[m] = base
            continue
        xadj, adjncy, adjw = csr(n, edges, members)
        sizes = [len(members) // k + (1 if q < len(members) % k else 0) for q in range(k)]
        if k == 1:
            part = [0] * len(members)
        else:
            vwgt = [1] * len(members)
            _, part = kahip.kaffpa(vwgt, xadj, adjw, adjncy, k, 0.0, True, 0, kahip.STRONG)
            part = exact_parts(part, k, sizes, xadj, adjncy, adjw)
        for q in range(k):
            sub = [members[t] for t in range(len(members)) if part[t] == q]
            if level == 0:
                for m in sub:
                    assign[m] = base + q
            else:
                groups.append((sub, base + q * below, level - 1))
    return assign


def sharedmap(n, edges):
    from chszlablib import Graph
    from chszlablib.decomposition import Decomposition
    g = Graph.from_edge_list([(i, j, int(w)) for i, j, w in edges])
    r = Decomposition.process_map(g, hierarchy=HIER, distance=DIST, mode="strong",
                                  imbalance=0.0, threads=1, seed=0)
    return [int(a) for a in r.assignment], int(r.comm_cost)


def lama_plan(lama, n, edges, workdir, distances):
    per, switches = HIER[3], HIER[4]
    nodes = per * switches
    mat = os.path.join(workdir, "m")
    with open(mat, "w") as f:
        for i, j, w in edges:
            f.write(f"{i} {j} {w}\n")
    net = os.path.join(workdir, "net")
    with open(net, "w") as f:
        for s in range(switches):
            f.write(f"SwitchName=leaf{s} Nodes=n[{s * per + 1}-{s * per + per}]\n")
        f.write(f"SwitchName=top Switches=leaf[0-{switches - 1}]\n")
    out = os.path.join(workdir, "plan")
    t0 = time.monotonic()
    free = HIER[0]
    restrict = ["--restrict", ",".join(f"{b}-{b + free - 1}" for b in range(0, 24, 6))] if free < 6 else []
    subprocess.run([lama, "plan", "--matrix", mat, "--format", "sparse", "--np", str(n), *restrict,
                    "--topology", "pack:2 numa:2 core:6 pu:1", "--node-names", f"n[1-{nodes}]",
                    "--network", net, *distances, "--out", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    assign = [0] * n
    with open(out + ".lama") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "rank":
                rank, node, cpu = int(parts[1]), int(parts[2][1:]) - 1, int(parts[4])
                # CPU c: package c/12, NUMA (c%12)/6, core c%6 (of which the first HIER[0]
                # are free).
                assert cpu % 6 < free, line
                assign[rank] = cpu % 6 + free * (cpu // 6 + 4 * node)
    return assign, seconds


CASES = {
    "2D 48x44": lambda: stencil([48, 44]),
    "3D 16x12x11": lambda: stencil([16, 12, 11]),
    "clustered 176": lambda: clustered(2112, 176),
    "ring": lambda: ring(2112),
    # 10,080 ranks (--switches 20 --per-switch 21)
    "2D 120x84": lambda: stencil([120, 84]),
    "3D 24x21x20": lambda: stencil([24, 21, 20]),
    "clustered 240": lambda: clustered(10080, 240),
    "ring 10080": lambda: ring(10080),
    # 1,408 ranks (--free-cores 4: 16 of each node's 24 cores)
    "2D 44x32": lambda: stencil([44, 32]),
    "3D 16x11x8": lambda: stencil([16, 11, 8]),
    "clustered 176 (1408)": lambda: clustered(1408, 176),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lama", default="target/release/lama")
    ap.add_argument("--cases", default="2D 48x44,3D 16x12x11,clustered 176,ring")
    ap.add_argument("--switches", type=int, default=4)
    ap.add_argument("--per-switch", type=int, default=22)
    ap.add_argument("--free-cores", type=int, default=6,
                    help="cores free in each NUMA node (the first ones): a partial allocation")
    ap.add_argument("--lama-distances", choices=["model", "default"], default="model",
                    help="give lama plan the model's distances, or leave it its defaults")
    args = ap.parse_args()
    HIER[0], HIER[3], HIER[4] = args.free_cores, args.per_switch, args.switches
    import kahip
    print("| case | lama plan | kaffpa multisection | plan vs kaffpa | SharedMap strong "
          "| plan vs SharedMap | lama plan time (s) | kaffpa time (s) | SharedMap time (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.cases.split(","):
        n, edges = CASES[name]()
        with tempfile.TemporaryDirectory() as d:
            distances = ["--distances", LAMA_DISTANCES] if args.lama_distances == "model" else []
            plan, t_plan = lama_plan(args.lama, n, edges, d, distances)
        t0 = time.monotonic()
        kaff = kaffpa_multisection(n, edges, kahip)
        t_kaff = time.monotonic() - t0
        t0 = time.monotonic()
        shared, reported = sharedmap(n, edges)
        t_shared = time.monotonic() - t0
        assert sorted(kaff) == list(range(n)) and sorted(plan) == list(range(n))
        c_plan, c_kaff, c_shared = cost(edges, plan), cost(edges, kaff), cost(edges, shared)
        if sorted(shared) != list(range(n)):
            c_shared = None  # not one rank per core
        pct = lambda a, b: f"{100.0 * (a - b) / b:+.1f} %" if b else "-"
        print(f"| {name} | {c_plan} | {c_kaff} | {pct(c_plan, c_kaff)} | "
              f"{c_shared if c_shared is not None else 'unbalanced'} (own {reported}) | "
              f"{pct(c_plan, c_shared) if c_shared else '-'} | {t_plan:.2f} | {t_kaff:.2f} | "
              f"{t_shared:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
