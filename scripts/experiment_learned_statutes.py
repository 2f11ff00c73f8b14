#!/usr/bin/env python
"""Experiment (a script, not a product stage): statute codes predicted by a model learned from the
questions of the training courses (tf-idf centroids of the questions citing each code), fold by
fold with folds grouped by course, added after the explicitly named codes in the statute stage.

  python scripts/experiment_learned_statutes.py [N_CODES [ARTIFACTS]]   (ARTIFACTS default /tmp/datasets, built as in the README)

Prints how often a predicted code is a gold code, then Macro F1 and Recall@100 at k = 3 and 5."""
import collections, math, sys, warnings

warnings.simplefilter("ignore")
from lexrag import citations as cit
from lexrag.config import load_config
from lexrag.eval.cv import grouped_folds, read_groups
from lexrag.eval.metrics import evaluate
from lexrag.index.lexical import Analyzer
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.stages.statutes import detector_for
import lexrag.stages.statutes as S

path = "../shared/data/lexam_dev.csv"
qs = {q.query_id: q for q in load_queries(path)}
gold = load_gold(path)
groups = read_groups(path)
an = Analyzer()
toks = {q: collections.Counter(an(qs[q].text)) for q in gold}
def codes_of(g):
    out = []
    for c in g:
        p = cit.try_parse(c)
        if p is not None and p.kind == "law" and p.code not in out: out.append(p.code)
    return out
gcodes = {q: codes_of(gold[q]) for q in gold}
folds = grouped_folds(list(gold), groups)
pred = {}
for fold in folds:
    test = set(fold)
    train = [q for q in gold if q not in test]
    df = collections.Counter(t for q in train for t in toks[q])
    n = len(train)
    idf = {t: math.log((n + 1) / (c + 1)) + 1 for t, c in df.items()}
    cent = collections.defaultdict(collections.Counter)
    for q in train:
        for c in gcodes[q]:
            for t, f in toks[q].items(): cent[c][t] += f * idf[t]
    norms = {c: math.sqrt(sum(v * v for v in vec.values())) for c, vec in cent.items()}
    for q in fold:
        vq = {t: f * idf.get(t, 0) for t, f in toks[q].items()}
        nq = math.sqrt(sum(v * v for v in vq.values())) or 1
        sims = sorted(((sum(vq.get(t, 0) * w for t, w in cent[c].items() if t in vq) / (norms[c] * nq + 1e-9), c) for c in cent), reverse=True)
        pred[q] = [c for _, c in sims[:int(sys.argv[1]) if len(sys.argv) > 1 else 2]]
hit = sum(1 for q in gold if set(pred[q]) & set(gcodes[q])); print("learned code hit rate", hit / len(gold))
# plug into the statute stage: explicit detections first, then the learned codes
det_real = S.StatuteDetector.detect
def detect(self, text, max_codes=3, _map={qs[q].text: q for q in gold}):
    found = det_real(self, text, max_codes)
    q = next((qid for t, qid in _map.items() if t in text), None)
    for c in (pred.get(q, []) if q else []):
        if c not in found and len(found) < max_codes: found.append(c)
    return found
S.StatuteDetector.detect = detect
cfg = load_config(None, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, "graph.enabled": False,
                         "prior.enabled": False, "statutes.enabled": True})
art = Artifacts.load(sys.argv[2] if len(sys.argv) > 2 else "/tmp/datasets", cfg)
res = run_pipeline(list(qs.values()), art, cfg)
for k in (3, 5):
    cut = {q: r[:k] for q, r in res.ranked.items()}
    m = evaluate(gold, cut, res.ranked, ks=(100,)); print(k, round(m["macro_f1"], 4), round(m["recall@100"], 4))
