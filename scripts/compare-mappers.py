#!/usr/bin/env python3
"""`lama plan` against published process mappers, every placement priced by one cost model.

    python3 scripts/compare-mappers.py [--lama target/release/lama] [--cases NAME,...]
                                       [--switches 4 --per-switch 22] [--free-cores 6]
                                       [--machine uniform|partial|heterogeneous]

Needs the Python packages `kahip` (KaHIP's kaffpa) and `chszlablib` (SharedMap, Schulz & Woydt
2025) from the Python package index, in the interpreter that runs this script (a virtual
environment: `python3 -m venv V && V/bin/pip install kahip chszlablib numpy`); `lama plan`
itself needs neither.

The machine is the seed paper's shape: 4 leaf switches x 22 nodes x 2 packages x 2 NUMA nodes x
6 cores (2,112 cores), or as many switches and nodes per switch as given (20 x 21: 10,080
cores), every core used, or with only the first cores of each NUMA node free (`--free-cores
4`: a partial allocation of 16 of each node's 24 cores, the same on every node, so that
SharedMap's uniform hierarchy still describes it). `--machine partial` frees node i's first
12 + (7 i mod 13) cores (12 to 24, 1,579 in all on 88 nodes); `--machine heterogeneous` makes
every other node one package and NUMA node of 16 cores (1,760 cores on 88 nodes); both as in
lama-plan's `compare` example. The model is a hop-distance one: two ranks whose closest common
level is a NUMA node cost 10 per unit of volume, a package 20, a node 40, a leaf switch 800,
and farther 1600 (on a 16-core node, whose one package and NUMA node are the whole node, every
two cores cost the node's 40, as in lama plan's model); `lama plan` is given the same distances
(`--distances`) and every placement is priced here by the same function.

Cases: "2D 48x44" and "3D 16x12x11" (stencils), "clustered 176" (groups of 176 ranks on every
core; "clustered 8 (1184)" on 1,184 ranks), "ring" (or "ring 10080"), "random 4" (each rank 4
random partners, volumes 1 to 100) and "all-to-all", both on every core.

Candidates, where each applies:
  - kaffpa: a level-by-level multisection with KaHIP's kaffpa (strong) down the machine tree:
    the ranks split into the switches, each part into its nodes, then packages, NUMA nodes and
    cores; each split sized to the children's free cores (in proportion when the ranks are
    fewer), and made exact by moving the boundary ranks that cost least (KaHIP takes no
    per-part sizes: on uneven children it is given the imbalance the largest needs).
  - sharedmap: SharedMap (mode strong, one thread), on full uniform machines only.
  - lama: `lama plan` (its own time, end to end, is printed too).
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
# Cost of two PEs whose coordinates (switch, node, package, NUMA node, core) first differ at
# each position.
DIFFER = [1600, 800, 40, 20, 10]
WIDE = "pack:2 numa:2 core:6 pu:1"
NARROW = "pack:1 numa:1 core:16 pu:1"


class Machine:
    """The processing elements (one per free core) and each node's topology and free CPUs.

    `pes` lists (switch, node, package, NUMA node, core) for every free core, in the order the
    nodes and their CPUs come; `where` gives each PE's node index and OS CPU. A node of the
    narrow kind (one package, one NUMA node of 16 cores) has each core as its own "package"
    coordinate: there every two cores cost the node's 40, as in lama plan's model (a level
    whose one object is the whole node separates nothing)."""

    def __init__(self, kind, free_cores):
        switches, per = HIER[4], HIER[3]
        self.topologies, self.free, self.pes, self.where = [], [], [], []
        for node in range(switches * per):
            narrow = kind == "heterogeneous" and node % 2 == 1
            if narrow:
                cpus = list(range(16))
            elif kind == "partial":
                cpus = list(range(12 + (7 * node) % 13))
            else:
                cpus = [c for c in range(24) if c % 6 < free_cores]
            self.topologies.append(NARROW if narrow else WIDE)
            self.free.append(cpus)
            for c in cpus:
                coords = (c, 0, 0) if narrow else (c // 12, (c % 12) // 6, c % 6)
                self.pes.append((node // per, node % per) + coords)
                self.where.append((node, c))
        self.uniform = kind == "uniform"


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


def random_sparse(n, partners, seed=7):
    """Each rank sends to `partners` others chosen at random, volumes 1 to 100."""
    rng = np.random.default_rng(seed)
    edges = {}
    for i in range(n):
        for j in rng.choice(n - 1, size=partners, replace=False):
            j = int(j) + (1 if j >= i else 0)
            a, b = sorted((i, j))
            edges[(a, b)] = edges.get((a, b), 0) + int(rng.integers(1, 101))
    return n, [(i, j, w) for (i, j), w in edges.items()]


def all_to_all(n):
    return n, [(i, j, 1) for i in range(n) for j in range(i + 1, n)]


def case(name, slots):
    """The matrix a case names: "2D 48x44", "3D 16x12x11", "clustered 176" (on every PE) or
    "clustered 176 (1408)" (on 1,408 ranks), "ring" or "ring 10080"."""
    words = name.replace("(", "").replace(")", "").split()
    if words[0] in ("2D", "3D"):
        return stencil([int(d) for d in words[1].split("x")])
    if words[0] == "clustered":
        return clustered(int(words[2]) if len(words) > 2 else slots, int(words[1]))
    if words[0] == "ring":
        return ring(int(words[1]) if len(words) > 1 else slots)
    if words[0] == "random":
        return random_sparse(slots, int(words[1]))
    if words[0] == "all-to-all":
        return all_to_all(slots)
    raise SystemExit(f"unknown case {name!r}")


def cost(edges, assign, pes):
    """Sum of volume x the cost of the first coordinate where the two PEs differ."""
    total = 0
    for i, j, w in edges:
        a, b = pes[assign[i]], pes[assign[j]]
        if a != b:
            total += w * DIFFER[next(k for k in range(5) if a[k] != b[k])]
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
    loses the least connection, until no part is over its size."""
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


def shares(n, caps):
    """How many of `n` ranks each child of capacity `caps` takes: its capacity when they fill
    them, else in proportion (largest remainders first), as lama plan's multisection does."""
    total = sum(caps)
    if n >= total:
        return list(caps)
    want = [c * n // total for c in caps]
    order = sorted(range(len(caps)), key=lambda q: -(caps[q] * n % total))
    for q in order[:n - sum(want)]:
        want[q] += 1
    return want


def kaffpa_split(n, edges, members, sizes, kahip):
    """The part of each member: kaffpa strong into as many parts as sizes are not zero (an
    imbalance that lets the largest size fit), the largest part given the largest size, then
    made to fit (no part above its size) by least-loss moves. KaHIP takes no per-part target
    sizes, hence the moves."""
    k = len(sizes)
    xadj, adjncy, adjw = csr(n, edges, members)
    used = [q for q in range(k) if sizes[q] > 0]
    if len(used) == 1:
        return [used[0]] * len(members)
    imbalance = max(0.0, max(sizes) * len(used) / len(members) - 1.0)
    _, raw = kahip.kaffpa([1] * len(members), xadj, adjw, adjncy, len(used), imbalance, True, 0,
                          kahip.STRONG)
    if len(set(sizes[q] for q in used)) == 1:
        relabel = dict(enumerate(used))
    else:
        count = [0] * len(used)
        for p in raw:
            count[p] += 1
        parts = sorted(range(len(used)), key=lambda p: -count[p])
        relabel = dict(zip(parts, sorted(used, key=lambda q: -sizes[q])))
    part = [relabel[p] for p in raw]
    return exact_parts(part, k, sizes, xadj, adjncy, adjw)


def kaffpa_multisection(n, edges, pes, kahip):
    """Level-by-level multisection with kaffpa strong down the PEs' tree, top level first."""
    assign = [0] * n
    work = [(list(range(n)), list(range(len(pes))), 0)]
    while work:
        members, slots, depth = work.pop()
        if not members:
            continue
        if depth == len(pes[0]):
            assign[members[0]] = slots[0]
            continue
        children = {}
        for p in slots:
            children.setdefault(pes[p][depth], []).append(p)
        children = list(children.values())
        if len(children) == 1:
            work.append((members, slots, depth + 1))
            continue
        caps = [len(c) for c in children]
        # Fewer ranks than cores: each part may take up to its child's cores (so a group of
        # heavy talkers need not be cut to fill every child in proportion), as lama plan's
        # multisection allows.
        sizes = caps if len(members) < sum(caps) else shares(len(members), caps)
        part = kaffpa_split(n, edges, members, sizes, kahip)
        for q, child in enumerate(children):
            work.append(([m for t, m in enumerate(members) if part[t] == q], child, depth + 1))
    return assign


def sharedmap(n, edges):
    from chszlablib import Graph
    from chszlablib.decomposition import Decomposition
    g = Graph.from_edge_list([(i, j, int(w)) for i, j, w in edges])
    r = Decomposition.process_map(g, hierarchy=HIER, distance=DIST, mode="strong",
                                  imbalance=0.0, threads=1, seed=0)
    return [int(a) for a in r.assignment], int(r.comm_cost)


def cpu_list(cpus):
    """0-3,6-9 for [0, 1, 2, 3, 6, 7, 8, 9]."""
    runs, out = [], []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    for a, b in runs:
        out.append(f"{a}" if a == b else f"{a}-{b}")
    return ",".join(out)


def lama_plan(lama, n, edges, machine, workdir, distances):
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
    kinds = sorted(set(machine.topologies))
    topology = [a for t in (kinds if len(kinds) == 1 else machine.topologies)
                for a in ("--topology", t)]
    restrict = []
    if len(set(map(tuple, machine.free))) == 1:
        if len(machine.free[0]) < 24:
            restrict = ["--restrict", cpu_list(machine.free[0])]
    else:
        for i, (t, cpus) in enumerate(zip(machine.topologies, machine.free)):
            if len(cpus) < (16 if t == NARROW else 24):
                restrict += ["--restrict", f"n{i + 1}={cpu_list(cpus)}"]
    out = os.path.join(workdir, "plan")
    t0 = time.monotonic()
    subprocess.run([lama, "plan", "--matrix", mat, "--format", "sparse", "--np", str(n), *restrict,
                    *topology, "--node-names", f"n[1-{nodes}]", "--network", net, *distances,
                    "--out", out], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    index = {w: p for p, w in enumerate(machine.where)}
    assign = [0] * n
    with open(out + ".lama") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "rank":
                rank, node, cpu = int(parts[1]), int(parts[2][1:]) - 1, int(parts[4])
                assign[rank] = index[(node, cpu)]
    return assign, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lama", default="target/release/lama")
    ap.add_argument("--cases", default="2D 48x44,3D 16x12x11,clustered 176,ring")
    ap.add_argument("--switches", type=int, default=4)
    ap.add_argument("--per-switch", type=int, default=22)
    ap.add_argument("--free-cores", type=int, default=6,
                    help="cores free in each NUMA node (the first ones): a partial allocation")
    ap.add_argument("--machine", choices=["uniform", "partial", "heterogeneous"],
                    default="uniform",
                    help="every node alike (uniform), node i with its first 12 + (7 i mod 13) "
                         "of 24 cores free (partial), or every other node of one package and "
                         "NUMA node of 16 cores (heterogeneous)")
    ap.add_argument("--lama-distances", choices=["model", "default"], default="model",
                    help="give lama plan the model's distances, or leave it its defaults")
    ap.add_argument("--plan-only", action="store_true",
                    help="run lama plan alone (no KaHIP or SharedMap: their columns say -), to "
                         "compare with a table already measured")
    args = ap.parse_args()
    HIER[0], HIER[3], HIER[4] = args.free_cores, args.per_switch, args.switches
    machine = Machine(args.machine, args.free_cores)
    pes = machine.pes
    if not args.plan_only:
        import kahip
    print("| case | lama plan | kaffpa multisection | plan vs kaffpa | SharedMap strong "
          "| plan vs SharedMap | lama plan time (s) | kaffpa time (s) | SharedMap time (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    pct = lambda a, b: f"{100.0 * (a - b) / b:+.2f} %" if b else "-"
    for name in args.cases.split(","):
        n, edges = case(name, len(pes))
        with tempfile.TemporaryDirectory() as d:
            distances = ["--distances", LAMA_DISTANCES] if args.lama_distances == "model" else []
            plan, t_plan = lama_plan(args.lama, n, edges, machine, d, distances)
        assert len(set(plan)) == n
        c_plan = cost(edges, plan, pes)
        if args.plan_only:
            print(f"| {name} | {c_plan} | - | - | - | - | {t_plan:.2f} | - | - |", flush=True)
            continue
        t0 = time.monotonic()
        kaff = kaffpa_multisection(n, edges, pes, kahip)
        t_kaff = time.monotonic() - t0
        assert len(set(kaff)) == n
        c_kaff = cost(edges, kaff, pes)
        row = f"| {name} | {c_plan} | {c_kaff} | {pct(c_plan, c_kaff)} | "
        if machine.uniform and n == len(pes):
            t0 = time.monotonic()
            shared, reported = sharedmap(n, edges)
            t_shared = time.monotonic() - t0
            c_shared = cost(edges, shared, pes) if sorted(shared) == list(range(n)) else None
            row += (f"{c_shared if c_shared is not None else 'unbalanced'} (own {reported}) | "
                    f"{pct(c_plan, c_shared) if c_shared else '-'} | {t_plan:.2f} | "
                    f"{t_kaff:.2f} | {t_shared:.2f} |")
        else:
            # SharedMap maps full, uniform hierarchies only.
            row += f"- | - | {t_plan:.2f} | {t_kaff:.2f} | - |"
        print(row, flush=True)


if __name__ == "__main__":
    sys.exit(main())
