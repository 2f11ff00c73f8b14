"""Citation seeds: citations named in the question (and, as a weaker signal, by the LLM),
mapped onto corpus strings by the one corpus resolver; a string the corpus lacks is dropped."""

from __future__ import annotations

from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

__all__ = ["CitationSeeds", "LLMSeeds", "resolve_docs"]


def resolve_docs(corpus, texts: list[str], strings: list[str] = (), exclude: set[int] = frozenset()) -> list[int]:
    """Corpus documents of the citations mentioned in ``texts`` and of the loose citation
    ``strings``, in order of mention, each once."""
    index = corpus.index
    cits: dict[str, None] = {}
    for t in texts:
        for c in index.resolve_text(t):
            cits.setdefault(c, None)
    for s in strings:
        for c in index.resolve(s):
            cits.setdefault(c, None)
    docs: dict[int, None] = {}
    for c in cits:
        docs.update((d, None) for d in corpus.docs_of(c) if d not in exclude)
    return list(docs)


def _scored(docs: list[int]) -> list[tuple[int, float]]:
    return [(d, 1.0 / (i + 1)) for i, d in enumerate(docs)]


class CitationSeeds:
    """Citations named in the question as written, in order of mention."""

    name = "citation_seeds"
    reads = ("seeds",)  # config sections its output depends on (the signal cache keys on them)
    family = "seed"
    phase = Phase.CONTENT
    essential = True
    signals = ("citation_seeds",)
    needs: tuple[str, ...] = ()

    def enabled(self, cfg, art) -> bool:
        return cfg.seeds.enabled

    def run(self, batch, ctx):
        out = Ranking("citation_seeds", "seed")
        for q in batch.queries:
            docs = resolve_docs(ctx.art.corpus, [q.text])
            out.hits[q.query_id] = _scored(docs)
        return [out]


class LLMSeeds:
    """Citations the LLM named (provisions from concept extraction, citations in its German
    translation), resolved onto corpus strings exactly like the question's own; those already
    named by the question are left to ``citation_seeds``.  The LLM never writes an output string:
    an unknown citation resolves to nothing."""

    name = "llm_seeds"
    reads = ("seeds",)
    family = "seed"
    phase = Phase.CONTENT
    essential = False
    signals = ("llm_seeds",)
    needs = ("llm",)
    reads_stages = ("rewrite",)  # the German variant and the LLM's citations are the rewrite's output

    def enabled(self, cfg, art) -> bool:
        return cfg.seeds.enabled and cfg.llm.enabled and art.llm_ready

    def run(self, batch, ctx):
        out = Ranking("llm_seeds", "seed")
        corpus = ctx.art.corpus
        question = batch.signals.get("citation_seeds")  # ran before, in this phase
        for q in batch.queries:
            own = set(question.doc_ids(q.query_id)) if question is not None else set()
            texts = [t for t in (q.variant("de"),) if t]
            docs = resolve_docs(corpus, texts, q.llm_citations, exclude=own)
            if docs:
                out.hits[q.query_id] = _scored(docs)
        return [out]


register_stage(CitationSeeds())
register_stage(LLMSeeds())
