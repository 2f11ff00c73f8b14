"""Graph and prior stages: from each query's seed candidates (the top ``graph.seed_k`` of the
seed fusion) to new candidates through the citation graph, and through training gold."""

from __future__ import annotations

from lexrag.config.sections import COMMUNITY_RESOLUTION
from lexrag.ranking import Ranking, best_first_order
from lexrag.signals import GRAPH_SIGNALS, PRIOR_SIGNALS
from lexrag.stages import graph_signals as gs
from lexrag.stages.base import Phase, register_stage

__all__ = ["GraphSignals", "PriorSignals", "PRIOR_TOP_K"]

PRIOR_TOP_K = 100  # documents kept per prior signal


class GraphSignals:
    """PPR, HITS, bibliographic coupling, co-citation, community members and siblings."""

    name = "graph"
    reads = ("graph", "lexical", "query")  # config sections its output depends on (the signal cache keys on them)
    family = "graph"
    phase = Phase.GRAPH
    essential = False
    signals = GRAPH_SIGNALS
    needs = ("graph",)

    def enabled(self, cfg, art) -> bool:
        return cfg.graph.enabled and art.graph is not None

    def run(self, batch, ctx):
        out: dict[str, Ranking] = {}
        for q in batch.queries:
            for name, hits in self.query_signals(q, batch.seeds.get(q.query_id, []), ctx):
                out.setdefault(name, Ranking(name, "graph")).hits[q.query_id] = hits
        return list(out.values())

    @staticmethod
    def query_signals(q, seed_hits, ctx):
        cfg, art = ctx.cfg, ctx.art
        gc, g = cfg.graph, art.graph
        seeds = seed_hits[: gc.seed_k]
        if not seeds:
            return
        on = {s for s in GRAPH_SIGNALS if gc.signals.get(s, True)}
        nodes, w = gs.seed_vector(g, seeds, gc.seed_k)
        pref = (art.bm25.query_scores(q.preferred_text(cfg.query.preference_variants), cfg.lexical)
                if art.bm25 is not None and cfg.lexical.enabled else None)  # lexical off: nothing of BM25 leaks in

        def docs(node_hits):
            return gs.nodes_to_docs(g, node_hits, pref, gs.DOCS_PER_NODE, gc.top_k)

        if "ppr" in on:
            yield "ppr", docs(gs.top_nodes(gs.personalized_pagerank(g, nodes, w, gs.PPR_ALPHA), nodes, gc.top_k))
        if on & {"hits_authority", "hits_hub"}:
            sub, hub, auth = gs.hits(g, nodes, gs.HITS_MAX_NODES)
            for name, vec in (("hits_authority", auth), ("hits_hub", hub)):
                if name in on:
                    order = [i for i in best_first_order(sub, vec) if vec[i] > 0][: gc.top_k]
                    yield name, docs([(int(sub[i]), float(vec[i])) for i in order])
        if "coupling" in on:
            yield "coupling", docs(gs.top_nodes(gs.bibliographic_coupling(g, nodes, w), nodes, gc.top_k))
        if "cocitation" in on:
            yield "cocitation", docs(gs.top_nodes(gs.co_citation(g, nodes, w), nodes, gc.top_k))
        if "community" in on:
            yield "community", docs(gs.community_members(g, nodes, w, g.level_of(COMMUNITY_RESOLUTION), gc.top_k))
        if "siblings" in on:
            yield "siblings", gs.siblings(g, seeds, gc.seed_k, gc.top_k, gc.siblings_kinds)


class PriorSignals:
    """Citations co-cited in training gold with the seed candidates, and frequently cited ones."""

    name = "prior"
    reads = ("prior", "graph")
    family = "prior"
    phase = Phase.GRAPH
    essential = False
    signals = PRIOR_SIGNALS
    needs = ("prior",)

    def enabled(self, cfg, art) -> bool:
        return cfg.prior.enabled and art.prior is not None

    def run(self, batch, ctx):
        pc, art = ctx.cfg.prior, ctx.art
        out = {name: Ranking(name, "prior") for name in PRIOR_SIGNALS if name != "prior_similar" or pc.neighbours}
        for q in batch.queries:
            seeds = batch.seeds.get(q.query_id, [])[: ctx.cfg.graph.seed_k]
            total = sum(max(s, 0.0) for _, s in seeds) or 1.0
            seed_cits = [(art.corpus.citations[d], max(s, 0.0) / total) for d, s in seeds]
            lists = [("prior_cocited", art.prior.cocited(seed_cits, q.query_id, pc.min_count, PRIOR_TOP_K) if seeds else []),
                     ("prior_frequent", art.prior.frequent(q.query_id, pc.min_count, PRIOR_TOP_K))]
            if pc.neighbours:
                lists.append(("prior_similar", art.prior.similar(q.variant("de") or q.text, q.query_id, pc.neighbours, PRIOR_TOP_K)))
            for name, cits in lists:
                docs: dict[int, float] = {}
                for c, score in cits:
                    for s in art.corpus.index.resolve(c):
                        for d in art.corpus.docs_of(s):
                            docs.setdefault(d, score)
                out[name].hits[q.query_id] = sorted(docs.items(), key=lambda t: (-t[1], t[0]))
        return list(out.values())


register_stage(GraphSignals())
register_stage(PriorSignals())
