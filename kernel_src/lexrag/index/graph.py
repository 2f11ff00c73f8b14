"""Citation graph over parents (decisions without ``E.``, law articles without ``Abs.``).

Built from the court considerations of the corpus: every law, BGE and docket reference found in
a consideration's text (``lexrag.citations.extract``, run over the texts by worker processes:
:mod:`lexrag.index.graph_references`) adds one to the weight of the edge from the consideration's
decision to the referenced parent.  Law articles are nodes too (they are cited, they cite
nothing).  Stored as an artifact folder of arrays and parquet, no pickle:

* ``nodes.parquet``: ``name``, ``kind`` (law | bge | docket), ``comm_0..2`` (Leiden communities,
  coarse to fine), ``in_strength``;
* ``edges.parquet``: ``src``, ``dst``, ``weight`` (reference count);
* ``doc_node.npy``: node of each corpus document; ``doc_cited.npy``: how often each exact corpus
  string (``BGE 145 II 32 E. 3.1``) is cited — used to pick which consideration of a cited
  decision to emit;
* ``params.json``.

Communities: Leiden (RB configuration model, fixed seed) on the undirected graph with summed
weights.  The finest level (highest resolution) is found first on the full graph (igraph's
Leiden; ``params.finest``, absent in graphs whose finest level leidenalg found); each coarser
level is leidenalg's Leiden at its lower resolution on the graph aggregated by the level below,
so every coarse community is a union of finer ones (nested by construction).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from lexrag.citations import CITATION_KINDS
from lexrag.artifacts import ArtifactError, check_corpus_id, check_params, reading, rebuild_hint, write_params
from lexrag.index.graph_references import row_group_references
from lexrag.io.publish import publishes
from lexrag.registry import ArtifactSpec, declare

__all__ = ["CitationGraph", "build_graph", "leiden_levels", "KINDS", "LEIDEN_SEED", "NO_COURT_EDGES", "has_court_edges", "SPEC"]

log = logging.getLogger(__name__)

ARTIFACT = "graph"
KINDS = CITATION_KINDS  # a node's kind is stored as its index here
LEIDEN_SEED = 42  # the random seed of Leiden, so graph builds repeat


def leiden_levels(
    n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, resolutions: Sequence[float], seed: int = LEIDEN_SEED,
    method: str = "igraph",
) -> np.ndarray:
    """Nested Leiden partitions, one row per resolution in ``resolutions`` (sorted coarse -> fine).

    Returns an int32 array of shape ``(len(resolutions), n)``.  The finest partition is computed
    on the graph; each coarser one by Leiden on the aggregate of the next finer partition.

    ``method``: who finds the finest partition, the one run over every edge.  ``igraph``
    (default): igraph's own Leiden (``community_leiden``, C), which optimises the same quality
    (modularity with a resolution is the RB configuration model divided by twice the total
    weight) about 15 times faster than leidenalg on 1.7M edges, with as good a partition;
    ``leidenalg``: ``leidenalg.find_partition``, as graphs built before were.  The coarser
    levels are leidenalg's either way (on the aggregate graphs, which are small).
    """
    import random

    import igraph as ig
    import leidenalg as la

    res = sorted(resolutions)
    # the undirected graph with summed weights, as igraph's simplify(combine_edges="sum") makes it
    # (edges sorted by their lower then higher end), merged in numpy: igraph is handed half the edges
    lo = np.minimum(src, dst).astype(np.int64)
    hi = np.maximum(src, dst).astype(np.int64)
    key, inverse = np.unique(lo * max(n, 1) + hi, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=np.asarray(weight, dtype=np.float64), minlength=len(key))
    g = ig.Graph(n=n, edges=list(zip((key // max(n, 1)).tolist(), (key % max(n, 1)).tolist())), directed=False)
    g.es["weight"] = summed.tolist()
    out = np.zeros((len(res), n), dtype=np.int32)
    if method == "igraph":
        ig.set_random_number_generator(random.Random(seed))
        try:
            fine = g.community_leiden(objective_function="modularity", weights="weight", resolution=res[-1],
                                      n_iterations=2).membership
        finally:
            ig.set_random_number_generator(random)
        part = la.RBConfigurationVertexPartition(g, weights="weight", resolution_parameter=res[-1], initial_membership=fine)
        part.renumber_communities()  # largest community first, as leidenalg numbers them
    elif method == "leidenalg":
        part = la.find_partition(g, la.RBConfigurationVertexPartition, weights="weight",
                                 resolution_parameter=res[-1], seed=seed)
    else:
        raise ValueError(f"leiden method {method!r}: igraph or leidenalg")
    membership = np.asarray(part.membership, dtype=np.int32)
    out[-1] = membership
    for level in range(len(res) - 2, -1, -1):
        agg = part.aggregate_partition()
        agg.resolution_parameter = res[level]
        opt = la.Optimiser()
        opt.set_rng_seed(seed)
        opt.optimise_partition(agg)
        membership = np.asarray(agg.membership, dtype=np.int32)[membership]
        out[level] = membership
        # the next coarser level aggregates this one
        part = la.RBConfigurationVertexPartition(g, weights="weight", resolution_parameter=res[level],
                                                 initial_membership=membership.tolist())
    return out


@dataclass
class CitationGraph:
    """The loaded graph: names, kinds, weighted adjacency (src -> dst), communities, doc links."""

    names: list[str]
    kind: np.ndarray  # int8 index into KINDS
    adj: sp.csr_matrix  # n x n, float32 reference counts
    communities: np.ndarray  # (levels, n) int32, coarse -> fine
    resolutions: list[float]
    doc_node: np.ndarray  # int32 per corpus doc
    doc_cited: np.ndarray  # int32 per corpus doc
    params: dict

    def __post_init__(self) -> None:
        self.n = len(self.names)
        self.adj_t = self.adj.T.tocsr()
        self.in_strength = np.asarray(self.adj.sum(axis=0)).ravel().astype(np.float32)
        self.out_strength = np.asarray(self.adj.sum(axis=1)).ravel().astype(np.float32)
        order = np.argsort(self.doc_node, kind="stable")
        counts = np.bincount(self.doc_node, minlength=self.n)
        self._node_docs_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._node_docs = order.astype(np.int32)
        self.node_id = {name: i for i, name in enumerate(self.names)}

    def docs_of_node(self, node: int) -> np.ndarray:
        return self._node_docs[self._node_docs_ptr[node] : self._node_docs_ptr[node + 1]]

    def level_of(self, resolution: float) -> int:
        for i, r in enumerate(self.resolutions):
            if abs(r - resolution) < 1e-9:
                return i
        raise ArtifactError(f"graph has communities at resolutions {self.resolutions}, not {resolution}")

    # ------------------------------------------------------------------ io

    @classmethod
    def load(cls, folder: str | Path, n_docs: int, corpus_id: str | None = None, resolutions: Sequence[float] | None = None,
             aliases: str | None = None, parents: Sequence[str] | None = None) -> "CitationGraph":
        """``aliases``: the loaded corpus's :attr:`~lexrag.index.corpus.Corpus.aliases_digest`; a
        graph whose court citations were read through other code aliases is refused.  ``parents``
        (each document's parent): spot-checked against their nodes, as no hash check sees a
        document map altered with its hashes re-recorded."""
        folder = Path(folder)
        expected = {"resolutions": sorted(resolutions)} if resolutions is not None else {}
        params = check_params(folder, ARTIFACT, expected)
        check_corpus_id(folder, ARTIFACT, params.get("corpus_id"), corpus_id)
        if aliases is not None and params.get("aliases") != aliases:
            if "aliases" not in params:
                log.warning("graph at %s was built before law-code aliases: French and Italian citations of the court "
                            "are not edges; %s", folder, rebuild_hint(ARTIFACT))
            else:
                raise ArtifactError(f"graph at {folder} read the court's citations through other law-code aliases than the "
                                    f"loaded corpus has (the corpus was rebuilt with or without --abbreviations); "
                                    f"{rebuild_hint(ARTIFACT)}")
        with reading(ARTIFACT, folder):
            nodes = pq.read_table(folder / "nodes.parquet")
            edges = pq.read_table(folder / "edges.parquet")
            n = nodes.num_rows
            res = params["params"]["resolutions"]
            comm = (np.vstack([nodes.column(f"comm_{i}").to_numpy().astype(np.int32) for i in range(len(res))]) if res
                    else np.zeros((0, n), np.int32))
            adj = sp.csr_matrix(
                (edges.column("weight").to_numpy().astype(np.float32),
                 (edges.column("src").to_numpy(), edges.column("dst").to_numpy())),
                shape=(n, n),
            )
            doc_node = np.load(folder / "doc_node.npy", allow_pickle=False)
            doc_cited = np.load(folder / "doc_cited.npy", allow_pickle=False)
            if len(doc_node) and (int(doc_node.min()) < 0 or int(doc_node.max()) >= n):
                raise ArtifactError(f"{folder / 'doc_node.npy'}: node ids outside 0..{n - 1}; {rebuild_hint(ARTIFACT)}")
        if len(doc_node) != n_docs:
            raise ArtifactError(f"graph at {folder} covers {len(doc_node)} documents, the corpus has {n_docs}; rebuild it")
        names = nodes.column("name").to_pylist()
        if parents is not None and n_docs:
            for d in np.unique(np.linspace(0, n_docs - 1, num=min(n_docs, 2048)).astype(np.int64)):
                if names[int(doc_node[d])] != parents[d]:
                    raise ArtifactError(f"graph at {folder}: document {int(d)} ({parents[d]!r}) maps to node "
                                        f"{names[int(doc_node[d])]!r}: its doc_node.npy is not this corpus's (altered?); "
                                        f"{rebuild_hint(ARTIFACT)}")
        kind = np.asarray([KINDS.index(k) for k in nodes.column("kind").to_pylist()], dtype=np.int8)
        return cls(names, kind, adj, comm, list(res), doc_node, doc_cited, params)


@publishes("out_dir")
def build_graph(
    corpus,  # lexrag.index.corpus.Corpus
    out_dir: str | Path,
    resolutions: Sequence[float] = (0.5, 1.0, 2.0),
    seed: int = LEIDEN_SEED,
    corpus_id: str = "",
    progress: bool = False,
    workers: int = 0,
    leiden: str = "igraph",
) -> CitationGraph:
    """Extract references from every court consideration of ``corpus`` and save the graph.

    ``workers``: processes that read and search the court texts (0: one per core, at most 8); the
    graph is the same for any number.  ``leiden``: who finds the finest communities
    (:func:`leiden_levels`)."""
    from lexrag.errors import ArtifactError, require
    from lexrag.index.corpus import CORPUS_FILE

    require("graph build (Leiden communities)", "graph", "igraph", "leidenalg", error=ArtifactError)  # before any work
    t0 = time.perf_counter()
    node_id: dict[str, int] = {}
    kinds: list[int] = []

    def node(name: str, kind: str) -> int:
        i = node_id.get(name)
        if i is None:
            i = node_id[name] = len(node_id)
            kinds.append(KINDS.index(kind))
        return i

    doc_node = np.empty(len(corpus), dtype=np.int32)
    for d, (parent, source) in enumerate(zip(corpus.parents, corpus.sources)):
        doc_node[d] = node(parent, source)
    doc_cited = np.zeros(len(corpus), dtype=np.int32)
    index = corpus.index  # lookup keys of every corpus string (kept by the corpus build, else parsed here)
    codes, aliases = index.extract_codes, index.aliases  # with the codes' French and Italian abbreviations
    meta = pq.ParquetFile(corpus.folder / CORPUS_FILE).metadata
    starts = np.concatenate([[0], np.cumsum([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])]).astype(int)
    tasks = [(g, int(starts[g])) for g in range(meta.num_row_groups)]
    with row_group_references(corpus.folder, tasks, codes, aliases, workers) as results:
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(corpus), desc="graph references", unit="docs", mininterval=5)
        try:
            src_parts, dst_parts = [], []
            cited: dict[str, int] = {}  # corpus string -> references to it (paragraphs and considerations)
            n_refs = 0
            for (g, first), (docs, targets, keys, target_names, key_strings, n) in zip(tasks, results):
                n_refs += n
                if n:
                    tmap = np.fromiter((node(name, kind) for name, kind in target_names), np.int32, len(target_names))
                    s, t = doc_node[docs], tmap[targets]
                    keep = s != t
                    src_parts.append(s[keep])
                    dst_parts.append(t[keep])
                    counts = np.bincount(keys[keys >= 0], minlength=len(key_strings))
                    for key, count in zip(key_strings, counts.tolist()):
                        hit = index.by_key.get(key)
                        if hit is not None and count:
                            cited[hit] = cited.get(hit, 0) + count
                if bar is not None:
                    bar.update(int(starts[g + 1] - first))
        finally:
            if bar is not None:
                bar.close()
    for hit, count in cited.items():
        doc_cited[corpus.docs_of(hit)] += count
    n = len(node_id)
    src = np.concatenate(src_parts).astype(np.int64) if src_parts else np.empty(0, np.int64)
    dst = np.concatenate(dst_parts).astype(np.int64) if dst_parts else np.empty(0, np.int64)
    key, weight = np.unique(src * n + dst, return_counts=True) if len(src) else (np.empty(0, np.int64), np.empty(0, np.int64))
    src, dst = (key // n).astype(np.int32), (key % n).astype(np.int32)
    weight = weight.astype(np.float32)
    t1 = time.perf_counter()
    if len(src):
        comm = leiden_levels(n, src, dst, weight, resolutions, seed, leiden)
    else:  # no links: every node is its own community
        comm = np.tile(np.arange(n, dtype=np.int32), (len(resolutions), 1))
    t2 = time.perf_counter()

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").unlink(missing_ok=True)
    names = [None] * n
    for name, i in node_id.items():
        names[i] = name
    in_strength = np.bincount(dst, weights=weight, minlength=n).astype(np.float32)
    cols = {"name": names, "kind": [KINDS[k] for k in kinds], "in_strength": in_strength}
    for i in range(len(resolutions)):
        cols[f"comm_{i}"] = comm[i]
    pq.write_table(pa.table(cols), out / "nodes.parquet", compression="zstd")
    pq.write_table(pa.table({"src": src, "dst": dst, "weight": weight}), out / "edges.parquet", compression="zstd")
    np.save(out / "doc_node.npy", doc_node, allow_pickle=False)
    np.save(out / "doc_cited.npy", doc_cited, allow_pickle=False)
    write_params(
        out, ARTIFACT, "lexrag.index.graph.build_graph",
        {"resolutions": sorted(resolutions), "seed": seed, "leiden": "RBConfigurationVertexPartition",
         **({"finest": leiden} if leiden != "leidenalg" else {})},
        n_docs=len(corpus), n_nodes=n, n_edges=int(len(src)), n_references=n_refs, corpus_id=corpus_id,
        code_aliases=len(index.aliases), aliases=corpus.aliases_digest,
        communities=[int(c.max()) + 1 if n else 0 for c in comm],
    )  # no timings in params.json: a rebuild must give the same bytes (build_datasets.py --check)
    adj = sp.csr_matrix((weight, (src, dst)), shape=(n, n))
    from lexrag.artifacts import read_params

    graph = CitationGraph(names, np.asarray(kinds, np.int8), adj, comm, sorted(resolutions), doc_node, doc_cited,
                          read_params(out, ARTIFACT))
    graph.build_seconds = {"references": round(t1 - t0, 1), "leiden": round(t2 - t1, 1)}
    return graph


NO_COURT_EDGES = ("the graph has no court edges (the corpus holds no court considerations that cite): runs leave the "
                  "graph signals off over it; build the corpus with court_considerations.csv (notebook 01) and rebuild")


def has_court_edges(graph: CitationGraph) -> bool:
    """A graph with at least one citation edge; without one (a law-only corpus) the graph signals
    carry nothing but article siblings, which lowered Macro F1 on held-out legal areas."""
    return graph.adj.nnz > 0


def build_graph_step(cfg, dest: Path, inputs) -> CitationGraph:
    from lexrag.artifacts import corpus_id
    from lexrag.index.corpus import Corpus

    corpus = inputs.corpus or Corpus(inputs.corpus_dir)  # with the citation lookups the graph reads
    graph = build_graph(corpus, dest, cfg.graph.resolutions, LEIDEN_SEED, corpus_id=corpus_id(inputs.corpus_dir),
                        progress=cfg.runtime.progress)
    if not has_court_edges(graph):
        log.warning("graph: %s", NO_COURT_EDGES)  # not the staging folder's path, gone when this is read
    return graph


def load_graph_step(folder: Path, cfg, art) -> CitationGraph | None:
    """The graph, or None (left off, said in ``art.missing`` with its fix) when it has no court
    edges: over a law-only corpus the graph signals carry nothing but article siblings."""
    from lexrag.artifacts import corpus_id

    graph = CitationGraph.load(folder, len(art.corpus), corpus_id=corpus_id(art.corpus_dir),
                               resolutions=cfg.graph.resolutions, aliases=art.corpus.aliases_digest, parents=art.corpus.parents)
    if has_court_edges(graph):
        return graph
    art.missing["graph"] = "the graph has no court edges (its corpus holds no court considerations that cite)"
    art.fixes["graph"] = "rebuild the corpus with court_considerations.csv, then the graph"
    log.warning("graph: left off (%s); %s", art.missing["graph"], art.fixes["graph"])
    return None


SPEC = declare(ArtifactSpec(
    "graph", ("corpus",), switch="graph.enabled", dataset="lexrag-graph", title="lexrag citation graph",
    description="citation graph over decisions and law articles with nested Leiden communities (parquet + npy)",
    builder="python build_datasets.py --only graph --out OUT", notebook="03_build_graph", attr="graph", build_with="courts",
    build=build_graph_step, load=load_graph_step,
    rebuild="python -m lexrag build ... --courts COURTS.csv --out ARTIFACTS (or build_datasets.py --only graph)"))
