"""Graph signals: from the seed candidates of a query to new candidates through the citation graph.

Every function works on node ids of a :class:`lexrag.index.graph.CitationGraph` and a seed vector
(seed nodes with weights from the fused scores of the top candidates); :func:`nodes_to_docs`
turns node scores into corpus documents.  Seed nodes themselves are left out of the signals that
are meant to surface *new* authorities (PPR, coupling, co-citation, community), so the
cross-signal boost in fusion rewards agreement, not self-confirmation; HITS ranks the candidate
subgraph seeds included, because there the question is which candidates the graph supports.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from lexrag.index.graph import CitationGraph
from lexrag.ranking import best_first

__all__ = [
    "seed_vector",
    "personalized_pagerank",
    "hits",
    "bibliographic_coupling",
    "co_citation",
    "community_members",
    "siblings",
    "nodes_to_docs",
    "top_nodes",
]

PPR_ALPHA = 0.40  # PPR probability of following a citation (igraph damping; the paper's 0.40)
HITS_MAX_NODES = 2000  # size cap of the HITS candidate subgraph
DOCS_PER_NODE = 2  # documents a graph signal emits per node (decision or article)


def seed_vector(graph: CitationGraph, hits: Sequence[tuple[int, float]], k: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Seed nodes and weights (summing to 1) from the top-``k`` fused ``(doc_id, score)`` hits."""
    acc: dict[int, float] = {}
    for doc, score in hits[:k]:
        node = int(graph.doc_node[doc])
        acc[node] = acc.get(node, 0.0) + max(float(score), 0.0)
    if not acc:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    nodes = np.fromiter(acc.keys(), dtype=np.int64)
    w = np.fromiter(acc.values(), dtype=np.float64)
    w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
    return nodes, w


def _row_normalised(graph: CitationGraph) -> sp.csr_matrix:
    p = getattr(graph, "_row_norm", None)
    if p is None:
        inv = np.zeros(graph.n, dtype=np.float64)
        nz = graph.out_strength > 0
        inv[nz] = 1.0 / graph.out_strength[nz]
        p = sp.diags(inv) @ graph.adj.astype(np.float64)
        p = p.tocsr()
        graph._row_norm = p  # type: ignore[attr-defined]
    return p


def personalized_pagerank(
    graph: CitationGraph, nodes: np.ndarray, weights: np.ndarray, alpha: float = PPR_ALPHA, tol: float = 1e-8,
    max_iter: int = 100,
) -> np.ndarray:
    """Score-weighted personalized PageRank over the directed, weighted citation graph.

    ``x = (1 - alpha) r + alpha (P^T x + (dangling mass) r)``, where ``P`` is the row-normalised
    adjacency and ``r`` the seed weights: ``alpha`` is the probability of following a citation
    (igraph's ``damping``, NetworkX's ``alpha``); the paper's 0.40 keeps walks short (a restart
    with probability 0.6 at every step).  Dangling nodes (law articles cite nothing) restart at
    ``r``.  Power iteration touching only rows of nodes that carry mass, so a query costs what its
    neighbourhood costs, not the whole graph.
    """
    n = graph.n
    r = np.zeros(n, dtype=np.float64)
    np.add.at(r, nodes, weights)
    if r.sum() == 0:
        return r
    r /= r.sum()
    p = _row_normalised(graph)
    dangling = graph.out_strength == 0
    x = r.copy()
    for _ in range(max_iter):
        nz = np.flatnonzero(x)
        y = np.zeros(n, dtype=np.float64)
        rows = p[nz]
        y += np.asarray(rows.T @ x[nz]).ravel()
        y = alpha * y + ((1 - alpha) + alpha * x[nz][dangling[nz]].sum()) * r
        if np.abs(y - x).sum() < tol:
            return y
        x = y
    return x


def hits(graph: CitationGraph, nodes: np.ndarray, max_nodes: int = HITS_MAX_NODES, iters: int = 100,
         tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HITS (Kleinberg 1999) on the candidate subgraph: the seeds and their citing and cited
    neighbours (the most strongly linked first when more than ``max_nodes``).

    Returns ``(subgraph_nodes, hub, authority)``, each score vector scaled to max 1 as igraph does.
    """
    seeds = np.unique(nodes)
    if len(seeds) == 0:
        return seeds, np.empty(0), np.empty(0)
    link = np.asarray(graph.adj[seeds].sum(axis=0)).ravel() + np.asarray(graph.adj_t[seeds].sum(axis=0)).ravel()
    link[seeds] = 0
    neigh = np.flatnonzero(link)
    if len(seeds) + len(neigh) > max_nodes:
        keep = max(max_nodes - len(seeds), 0)
        neigh = neigh[np.argsort(-link[neigh], kind="stable")[:keep]]
    sub = np.concatenate([seeds, np.sort(neigh)])
    m = graph.adj[sub][:, sub].astype(np.float64).tocsr()
    if m.nnz == 0:
        return sub, np.zeros(len(sub)), np.zeros(len(sub))
    a = np.ones(len(sub))
    h = np.ones(len(sub))
    for _ in range(iters):
        a_new = m.T @ h
        h_new = m @ a_new
        a_new /= np.linalg.norm(a_new) or 1.0
        h_new /= np.linalg.norm(h_new) or 1.0
        done = np.abs(a_new - a).sum() + np.abs(h_new - h).sum() < tol
        a, h = a_new, h_new
        if done:
            break
    return sub, h / (h.max() or 1.0), a / (a.max() or 1.0)


def _two_hop(first: sp.csr_matrix, second: sp.csr_matrix, damp: np.ndarray, nodes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``second^T (mid / log(2 + damp))`` with ``mid = first[nodes]^T w``, touching only the rows
    that carry weight."""
    mid = np.asarray(first[nodes].T @ weights).ravel()
    j = np.flatnonzero(mid)
    if len(j) == 0:
        return np.zeros(first.shape[0])
    return np.asarray(second[j].T @ (mid[j] / np.log(2.0 + damp[j]))).ravel()


def bibliographic_coupling(graph: CitationGraph, nodes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Nodes that cite what the seeds cite: ``c(v) = sum_j A[v,j] refs(j) / log(2 + indeg(j))``
    with ``refs = A^T w``; a shared reference to a hub everybody cites counts less."""
    return _two_hop(graph.adj, graph.adj_t, graph.in_strength, nodes, weights)


def co_citation(graph: CitationGraph, nodes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Nodes cited together with the seeds: ``c(v) = sum_c A[c,v] citers(c) / log(2 + outdeg(c))``
    with ``citers = A w``; a decision citing everything counts less."""
    return _two_hop(graph.adj_t, graph.adj, graph.out_strength, nodes, weights)


def community_members(graph: CitationGraph, nodes: np.ndarray, weights: np.ndarray, level: int,
                      top_k: int = 100) -> list[tuple[int, float]]:
    """Members of the seeds' communities at ``level``: communities by summed seed weight, members
    inside a community by in-strength (the community's most cited authorities first; members
    nobody cites are not emitted)."""
    comm = graph.communities[level]
    cw: dict[int, float] = {}
    for node, w in zip(nodes, weights):
        cw[int(comm[node])] = cw.get(int(comm[node]), 0.0) + float(w)
    members = _members_by_strength(graph, level)
    seeds = set(int(x) for x in nodes)
    out: list[tuple[int, float]] = []
    for c, w in sorted(cw.items(), key=lambda kv: (-kv[1], kv[0])):
        rank = 0
        for node in members(c):
            if graph.in_strength[node] <= 0:
                break  # members are sorted by in-strength: the rest are never cited
            if node in seeds:
                continue
            out.append((int(node), w / (1.0 + rank)))
            rank += 1
            if rank >= top_k:
                break
    out.sort(key=lambda t: (-t[1], t[0]))
    return out[:top_k]


def _members_by_strength(graph: CitationGraph, level: int):
    cache = graph.__dict__.setdefault("_members_cache", {})
    if level not in cache:
        comm = graph.communities[level]
        order = np.lexsort((-graph.in_strength, comm))
        counts = np.bincount(comm, minlength=int(comm.max()) + 1 if len(comm) else 0)
        ptr = np.concatenate([[0], np.cumsum(counts)])
        cache[level] = (order, ptr)
    order, ptr = cache[level]
    return lambda c: order[ptr[c] : ptr[c + 1]]


def siblings(
    graph: CitationGraph, seed_hits: Sequence[tuple[int, float]], k: int = 20, top_k: int = 100,
    kinds: Sequence[str] = ("bge", "docket"),
) -> list[tuple[int, float]]:
    """Other documents of the seed documents' parents (other considerations of the same decision;
    other paragraphs of the same article when ``"law"`` is in ``kinds``), most cited first, scored
    by the seed's score."""
    from lexrag.index.graph import KINDS

    allowed = {KINDS.index(k) for k in kinds}
    seed_docs = {int(d) for d, _ in seed_hits[:k]}
    out: dict[int, float] = {}
    for doc, score in seed_hits[:k]:
        node = int(graph.doc_node[doc])
        if int(graph.kind[node]) not in allowed:
            continue
        docs = graph.docs_of_node(node)
        order = sorted(docs.tolist(), key=lambda x: (-int(graph.doc_cited[x]), x))
        for i, d in enumerate(order):
            if d in seed_docs or d in out:
                continue
            out[d] = float(score) / (1.0 + i)
    ranked = sorted(out.items(), key=lambda t: (-t[1], t[0]))
    return ranked[:top_k]


def nodes_to_docs(
    graph: CitationGraph,
    node_scores: Sequence[tuple[int, float]],
    doc_pref: np.ndarray | None = None,
    per_node: int = DOCS_PER_NODE,
    top_k: int = 100,
) -> list[tuple[int, float]]:
    """Corpus documents for ranked graph nodes.

    A node is a decision or a law article, but outputs must be corpus strings
    (``BGE 145 II 32 E. 3.1``, ``Art. 8 Abs. 1 BV``).  For each node, in order, its documents are
    ranked by (1) the query's lexical score of the document (``doc_pref``, the BM25 scores of this
    query: the consideration or paragraph that talks about the question), (2) how often that exact
    consideration or paragraph is cited in the court corpus (what the court itself cites when it
    cites this decision), (3) corpus order (``E. 1`` / ``Abs. 1`` first); the first ``per_node``
    are emitted with the node's score, slightly decreasing to keep the order.  Nodes with no corpus
    document (cited but absent from the corpus) are skipped.
    """
    out: list[tuple[int, float]] = []
    for node, score in node_scores:
        docs = graph.docs_of_node(node)
        if len(docs) == 0:
            continue
        if len(docs) > 1:
            pref = doc_pref[docs] if doc_pref is not None else np.zeros(len(docs))
            order = np.lexsort((docs, -graph.doc_cited[docs], -pref))
            docs = docs[order]
        for i, d in enumerate(docs[:per_node]):
            out.append((int(d), float(score) * (1.0 - 1e-3 * i)))
            if len(out) >= top_k:
                break
        if len(out) >= top_k:
            break
    out.sort(key=lambda t: -t[1])
    return out


def top_nodes(scores: np.ndarray, exclude: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best nodes with a positive score, ``exclude`` left out, best first."""
    s = scores.copy()
    s[exclude] = 0.0
    nz = np.flatnonzero(s > 0)
    if len(nz) > k:
        nz = nz[np.argpartition(-s[nz], k - 1)[:k]]
    return [(int(i), float(s[i])) for i in best_first(nz, s[nz])]
