#!/usr/bin/env python
"""Experiment (a script, not a test): is anything left at the top of the kaggle retrieval without models?

This script ranks lexam_dev.csv with the kaggle preset's CPU stages (head reorder included) the
way ``scripts/quality.py`` does (grouped cross-validation by course: each course's questions
ranked with the prior and the statute model fitted on the other courses) and asks of those
held-out rankings:

1. Where do the first three slots go?  Each slot is a hit, the whole article of a gold paragraph,
   another paragraph of a gold article, another article of a gold law code, a court citation the
   gold does not hold, or a law code the gold does not cite.
2. How well is the law code known?  For each code predictor, how often its first code is a gold
   code (P@1), the share of gold codes among its first three (R@3) and the reciprocal rank of the
   question's most cited code (MRR); and what F1@3 the ranking would reach if it kept only gold
   codes (an oracle).
3. Does re-sorting the head (the first 30) by a further rule lift F1@3 or F1@5?  A learned
   reorder (L2 logistic regression over the signals' ranks, the code predictors' scores and the
   article structure, fitted on the other courses' questions), a bonus for the predicted code,
   a bonus for articles near the first three (gold articles cluster: see part 3's header), and
   spreading the head over articles or codes (at most one paragraph per article, at most two
   citations per code, the rest moved below).
4. Does a count picked per question beat the one k?  Bands of question length (bands and their
   k picked on the other courses), and the k that maximises the expected F1 under hit
   probabilities learned on the other courses (the learned reorder's logistic model, not
   re-sorting: 2 x the summed probabilities of the first k over k + the expected gold count).
5. Do the statutes' own cross-references point at gold?  The articles that the first five law
   hits cite in their text ("nach Art. 97 Abs. 1", "Artikel 8 ZGB"; a reference without a code
   stays in its statute), against the ranking's own slots.

  python scripts/experiment_head.py --artifacts ARTIFACTS [--data ../shared/data]

ARTIFACTS: built with ``--train lexam_dev.csv`` as README "Quality on real data" says.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from lexrag.citations import scoring_form
from lexrag.config import load_config
from lexrag.eval.cv import grouped_folds, read_groups
from lexrag.eval.experiment import held_out_runs
from lexrag.eval.variants import GPU_STAGES_OFF
from lexrag.eval.experiment_cli import experiment_args
from lexrag.eval.metrics import evaluate
from lexrag.pipeline import Artifacts
from lexrag.queries import load_gold, load_queries
from lexrag.index.statutes import VOTE_DEPTH, detector_for, predicted_codes
from scipy.optimize import minimize
from scipy.stats import spearmanr

import benchkit  # beside this script
from head_citations import article_of, code_of, law, law_references, part_references, position

HEAD = 30  # the first slots whose order this script studies
DEPTH = 300  # ranks kept per question
def held_out(art_dir: Path, tune_file: Path) -> tuple[dict, Counter]:
    """Per question of ``tune_file``: gold (scoring form), course, text length, the held-out
    ranking, each signal's ranks by citation, and the three code predictors' scores; and the
    corpus's paragraph count per law code."""
    cfg = load_config("kaggle", {**GPU_STAGES_OFF, "runtime.progress": False, "count.method": "fixed", "count.k": DEPTH})
    art = Artifacts.from_folder(art_dir, cfg)
    gold = {q: g for q, g in load_gold(tune_file).items() if g}
    qs = {q.query_id: q for q in load_queries(tune_file, cfg.query.max_chars)}
    groups = read_groups(tune_file)
    texts = {q: x.text for q, x in qs.items()}
    det = detector_for(art.corpus)
    cits = art.corpus.column("citation")
    rows = {}
    for fold, fart, res in held_out_runs(cfg, art, qs, gold, grouped_folds(list(gold), groups)):
        for q in fold:
            ranks: dict[str, dict[str, int]] = {}
            for r in res.signals:
                seen = ranks.setdefault(r.signal, {})
                for i, doc in enumerate(r.doc_ids(q)[:DEPTH], 1):
                    seen.setdefault(scoring_form(cits[doc]), i)
            named, _ = predicted_codes(det, texts[q], cfg.statutes, fart.prior, q)
            learned = dict(fart.prior.scored_codes(texts[q], 200, q))
            scores = art.bm25.query_scores(texts[q], cfg.lexical)
            vote = det.vote_shares(scores, VOTE_DEPTH) if scores is not None else {}
            rows[q] = dict(gold={scoring_form(x) for x in gold[q]}, course=groups.get(q, ""), length=len(texts[q]),
                           ranked=list(dict.fromkeys(map(scoring_form, res.ranked[q]))), ranks=ranks, named=named,
                           learned=learned, vote=vote)
    return rows, Counter(c for c in map(code_of, cits) if c)


def f1(pred, gold: set) -> float:
    tp = len(set(pred) & gold)
    return 2 * tp / (len(set(pred)) + len(gold)) if tp else 0.0


def mean_f1(rows: dict, ranked: dict, k: int) -> float:
    return float(np.mean([f1(ranked[q][:k], v["gold"]) for q, v in rows.items()]))


def by_share(scores: dict) -> dict:
    best = max(scores.values(), default=0)
    return {c: s / best for c, s in scores.items()} if best > 0 else {}


def ordered(scores: dict) -> list[str]:
    return [c for c, s in sorted(scores.items(), key=lambda t: (-t[1], t[0])) if s > 0]


def code_scores(v: dict, named: bool = True, size: Counter | None = None, power: float = 0.0,
                popular: dict | None = None, weight: float = 0.0) -> dict:
    """Vote share plus the learned model's share, with ``named`` the codes the question names on
    top (the order ``agreed_codes`` reads them in).  Variants: the vote divided by the code's
    paragraph count to the ``power``; plus ``weight`` x the share of the other courses whose gold
    cites the code (``popular``: code -> courses)."""
    vote = {c: x / max(size[c], 1) ** power for c, x in v["vote"].items()} if size is not None else v["vote"]
    s = Counter(by_share(vote))
    if popular:
        others = len({co for cs in popular.values() for co in cs} - {v["course"]}) or 1
        for c in list(s):
            s[c] += weight * len(popular.get(c, set()) - {v["course"]}) / others
    for c, x in by_share(v["learned"]).items():
        s[c] += x
    for c in v["named"] if named else ():
        s[c] += 2.0
    return dict(s)


def part_slots(rows: dict) -> None:
    kinds = Counter()
    for v in rows.values():
        g = v["gold"]
        g_articles = {article_of(x) for x in g}
        g_codes = {code_of(x) for x in g} - {None}
        for c in v["ranked"][:3]:
            if c in g:
                kinds["a hit"] += 1
            elif article_of(c) in g:
                kinds["the gold cites its whole article"] += 1
            elif article_of(c) in g_articles:
                kinds["another paragraph of a gold article"] += 1
            elif code_of(c) in g_codes:
                kinds["another article of a gold law code"] += 1
            elif code_of(c) is None:
                kinds["a court citation the gold does not hold"] += 1
            else:
                kinds["a law code the gold does not cite"] += 1
    n = sum(kinds.values())
    print(f"\n## 1. The first three slots ({n} over {len(rows)} questions)\n")
    print("| slot holds | share |\n| --- | --- |")
    for k, c in kinds.most_common():
        print(f"| {k} | {c / n:.3f} |")


def part_codes(rows: dict, size: Counter) -> None:
    popular: dict[str, set] = {}
    for v in rows.values():
        for c in filter(None, map(code_of, v["gold"])):
            popular.setdefault(c, set()).add(v["course"])
    predictors = {
        "named in the question": lambda v: list(v["named"]),
        "learned (training questions)": lambda v: ordered(v["learned"]),
        "statute vote": lambda v: ordered(v["vote"]),
        "vote + learned": lambda v: ordered(code_scores(v, named=False)),
        "named, then vote + learned": lambda v: ordered(code_scores(v)),
        **{f"named, then vote / paragraphs^{a} + learned": (lambda v, a=a: ordered(code_scores(v, size=size, power=a)))
           for a in (0.1, 0.25, 0.5)},
        **{f"named, then vote + learned + {w} x share of other courses citing the code":
           (lambda v, w=w: ordered(code_scores(v, popular=popular, weight=w))) for w in (0.25, 1.0)},
        "code of the ranking's first law": lambda v: [c for c in (code_of(x) for x in v["ranked"][:1]) if c],
    }
    print("\n## 2. Law codes (held out)\n")
    print("| predictor | P@1 | R@3 | MRR of the most cited gold code |\n| --- | --- | --- | --- |")
    for name, fn in predictors.items():
        p1 = r3 = mrr = 0.0
        n = 0
        for v in rows.values():
            gc = Counter(c for c in map(code_of, v["gold"]) if c)
            if not gc:
                continue
            n += 1
            lst = fn(v)
            main = min(gc, key=lambda c: (-gc[c], c))  # the most cited, ties by name (gold is a set)
            p1 += bool(lst) and lst[0] in gc
            r3 += len(set(lst[:3]) & set(gc)) / min(3, len(gc))
            mrr += 1 / (lst.index(main) + 1) if main in lst else 0.0
        print(f"| {name} | {p1 / n:.3f} | {r3 / n:.3f} | {mrr / n:.3f} |")
    as_ranked = {q: v["ranked"] for q, v in rows.items()}
    only_gold = {q: [c for c in v["ranked"] if code_of(c) in {code_of(x) for x in v["gold"]}] for q, v in rows.items()}
    print(f"\nF1@3 as ranked {mean_f1(rows, as_ranked, 3):.4f}; keeping only the gold codes' citations (oracle) "
          f"{mean_f1(rows, only_gold, 3):.4f}")


def head_features(v: dict, signals: list[str]) -> np.ndarray:
    head = v["ranked"][:HEAD]
    codes = code_scores(v)
    articles = Counter(article_of(c) for c in head)
    out = []
    for i, c in enumerate(head):
        f = [1.0 / (1 + i)]
        f += [10.0 / (10 + v["ranks"][s][c]) if c in v["ranks"].get(s, {}) else 0.0 for s in signals]
        cd = code_of(c)
        p = law(c)
        f += [codes.get(cd, 0.0) if cd else 0.0, float(cd is None), float(articles[article_of(c)]),
              float(p is not None and p.paragraph in (None, "1"))]
        out.append(f)
    return np.asarray(out, dtype=np.float64)


def fit_logistic(x: np.ndarray, y: np.ndarray, c: float) -> np.ndarray:
    """L2-regularised logistic regression (weights, then intercept) by L-BFGS on standardised
    features; returns a function of raw features."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])

    def loss(w):
        m = z @ w
        p = 1 / (1 + np.exp(-m))
        reg = 0.5 / c * float(w[:-1] @ w[:-1])
        return float(np.logaddexp(0, m).sum() - y @ m) + reg, z.T @ (p - y) + np.r_[w[:-1] / c, 0.0]

    w = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B").x
    return lambda xx: np.hstack([(xx - mu) / sd, np.ones((len(xx), 1))]) @ w


def reorder(v: dict, key) -> list[str]:
    head = v["ranked"][:HEAD]
    return [head[i] for i in sorted(range(len(head)), key=key)] + v["ranked"][HEAD:]


def part_head(rows: dict) -> None:
    signals = sorted({s for v in rows.values() for s in v["ranks"]})
    courses = sorted({v["course"] for v in rows.values()})
    feats = {q: head_features(v, signals) for q, v in rows.items()}
    labels = {q: np.array([c in v["gold"] for c in v["ranked"][:HEAD]], dtype=np.float64) for q, v in rows.items()}
    near = tot = 0
    for v in rows.values():
        ps = [p for p in map(position, v["gold"]) if p]
        tot += len(ps)
        near += sum(any(b != a and b[0] == a[0] and abs(b[1] - a[1]) <= 5 for b in ps) for a in ps)
    print(f"\n## 3. Re-sorting the head (first {HEAD}); {near / tot:.0%} of gold law citations have another "
          "gold article of their code within 5 article numbers\n")
    print("| rule | F1@3 | F1@5 |\n| --- | --- | --- |")
    base = {q: v["ranked"] for q, v in rows.items()}
    print(f"| as ranked (kaggle retrieval) | {mean_f1(rows, base, 3):.4f} | {mean_f1(rows, base, 5):.4f} |")
    for c in (0.1, 1.0):
        out = {}
        for held in courses:
            train = [q for q, v in rows.items() if v["course"] != held and len(labels[q])]
            score = fit_logistic(np.vstack([feats[q] for q in train]), np.concatenate([labels[q] for q in train]), c)
            for q, v in rows.items():
                if v["course"] == held:
                    s = score(feats[q]) if len(feats[q]) else np.zeros(0)
                    out[q] = reorder(v, lambda i, s=s: (-s[i], i))
        print(f"| learned reorder, logistic C = {c} (fitted on the other courses) | {mean_f1(rows, out, 3):.4f} "
              f"| {mean_f1(rows, out, 5):.4f} |")
    for b in (0.25, 1.0):
        out = {}
        for q, v in rows.items():
            cs = by_share(code_scores(v))
            out[q] = reorder(v, lambda i, v=v, cs=cs: (-(1 / (1 + i) + b * cs.get(code_of(v["ranked"][i]), 0.0)), i))
        print(f"| predicted code, bonus {b} x its share | {mean_f1(rows, out, 3):.4f} | {mean_f1(rows, out, 5):.4f} |")
    for b in (0.25, 1.0):
        out = {}
        for q, v in rows.items():
            anchors = [p for p in map(position, v["ranked"][:3]) if p]

            def key(i, v=v, anchors=anchors):
                p = position(v["ranked"][i])
                n = sum(a != p and a[0] == p[0] and abs(a[1] - p[1]) <= 5 for a in anchors) if p else 0
                return (-(1 / (1 + i) + b * n / 4), i)
            out[q] = reorder(v, key)
        print(f"| near the first three (within 5 articles), bonus {b} | {mean_f1(rows, out, 3):.4f} | {mean_f1(rows, out, 5):.4f} |")
    for name, group, cap in (("at most one paragraph per article", article_of, 1), ("at most two citations per law code", code_of, 2)):
        out = {q: spread(v["ranked"], group, cap) for q, v in rows.items()}
        print(f"| {name} in the head, the rest below | {mean_f1(rows, out, 3):.4f} | {mean_f1(rows, out, 5):.4f} |")


def spread(ranked: list[str], group, cap: int) -> list[str]:
    """The head with at most ``cap`` citations of one ``group`` (article or code; a court citation
    is its own group), in rank order; the ones over the cap follow it, then the rest."""
    head, over, seen = [], [], Counter()
    for c in ranked[:HEAD]:
        g = group(c) or c
        (head if seen[g] < cap else over).append(c)
        seen[g] += 1
    return head + over + ranked[HEAD:]


def hit_probabilities(rows: dict) -> dict:
    """Per question, the probability that each head slot is a hit: the learned reorder's logistic
    model (C = 0.1), fitted on the other courses' questions."""
    signals = sorted({s for v in rows.values() for s in v["ranks"]})
    feats = {q: head_features(v, signals) for q, v in rows.items()}
    labels = {q: np.array([c in v["gold"] for c in v["ranked"][:HEAD]], dtype=np.float64) for q, v in rows.items()}
    out = {}
    for held in sorted({v["course"] for v in rows.values()}):
        train = [q for q, v in rows.items() if v["course"] != held and len(labels[q])]
        score = fit_logistic(np.vstack([feats[q] for q in train]), np.concatenate([labels[q] for q in train]), 0.1)
        for q, v in rows.items():
            if v["course"] == held:
                out[q] = 1 / (1 + np.exp(-score(feats[q]))) if len(feats[q]) else np.zeros(0)
    return out


def part_count(rows: dict) -> None:
    courses = sorted({v["course"] for v in rows.values()})
    curve = {q: [f1(v["ranked"][:k], v["gold"]) for k in range(1, 21)] for q, v in rows.items()}
    rho = spearmanr([v["length"] for v in rows.values()], [len(v["gold"]) for v in rows.values()]).statistic
    print(f"\n## 4. The count by question length (bands and k picked on the other courses); Spearman of length and gold count {rho:.2f}\n")
    print("| length bands | F1 at the picked k |\n| --- | --- |")
    for bands in (1, 2, 4):
        total = 0.0
        for held in courses:
            train = [q for q, v in rows.items() if v["course"] != held]
            edges = np.quantile([rows[q]["length"] for q in train], np.linspace(0, 1, bands + 1)[1:-1])
            band = {q: int(np.searchsorted(edges, v["length"])) for q, v in rows.items()}
            best = {}
            for b in range(bands):
                members = [q for q in train if band[q] == b]
                best[b] = int(np.argmax(np.sum([curve[q] for q in members], axis=0))) if members else 2
            total += sum(curve[q][best[band[q]]] for q, v in rows.items() if v["course"] == held)
        print(f"| {bands}{' (one k)' if bands == 1 else ''} | {total / len(rows):.4f} |")
    probs = hit_probabilities(rows)
    print("\n| expected-F1 count (hit probabilities fitted on the other courses) | F1 | mean k |\n| --- | --- | --- |")
    for name in ("gold count = the summed probabilities", "gold count = the other courses' mean"):
        total = ks = 0.0
        counted = 0
        for held in courses:
            mean_gold = float(np.mean([len(v["gold"]) for v in rows.values() if v["course"] != held]))
            for q, v in rows.items():
                if v["course"] != held or not len(probs[q]):
                    continue
                p = probs[q]
                g = max(float(p.sum()), 1.0) if name.endswith("probabilities") else mean_gold
                k = int(np.argmax(2 * np.cumsum(p) / (np.arange(1, len(p) + 1) + g))) + 1
                total += f1(v["ranked"][:k], v["gold"])
                ks += k
                counted += 1
        print(f"| {name} | {total / len(rows):.4f} | {ks / max(counted, 1):.2f} |")  # F1 over all questions (no head: 0)


def main() -> int:
    args = experiment_args(__doc__)
    rows, sizes = held_out(Path(args.artifacts), Path(args.data) / "lexam_dev.csv")
    check = evaluate({q: sorted(v["gold"]) for q, v in rows.items()}, {q: v["ranked"][:3] for q, v in rows.items()})
    print(f"kaggle retrieval, lexam_dev grouped CV by course: {len(rows)} questions, Macro F1@3 {check['macro_f1']:.4f}")
    part_slots(rows)
    part_codes(rows, sizes)
    part_head(rows)
    part_count(rows)
    part_references(rows, law_references(Path(args.artifacts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
