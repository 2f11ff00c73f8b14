"""A citation prior learned from training gold (never from validation gold).

Two signals: ``prior_cocited`` — citations that training gold sets cite together with the seed
candidates' citations, ``score(c) = sum_a w_a * n(a, c) / n(a)``; and ``prior_frequent`` —
citations that appear in many training gold sets (procedural boilerplate such as
``Art. 100 Abs. 1 BGG``), ranked by that count.  Counts below ``min_count`` are ignored.

When a query of the training file itself is scored, its own gold set is subtracted from every
count first (leave-one-query-out), so the prior never sees the answer it is scored on.
The training questions (``questions.parquet``) also feed a statute model (:meth:`TrainingPrior.codes_for`):
tf-idf centroids of the questions citing each law code, which predicts the codes an unseen
question is about (used by the statute stage with ``statutes.learned``).

Artifact: ``gold.parquet`` (query_id, citation), ``questions.parquet`` (query_id, query) and
``params.json`` with the source file hash.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lexrag.artifacts import read_params, reading, write_params
from lexrag.io.hashcache import sha256_file
from lexrag.io.publish import publishes
from lexrag.registry import ArtifactSpec, declare

log = logging.getLogger(__name__)
from lexrag.citations import scoring_form as norm

__all__ = ["TrainingPrior", "build_prior"]

ARTIFACT = "prior"


class TrainingPrior:
    def __init__(self, gold: dict[str, Sequence[str]], source: str = "", questions: dict[str, str] | None = None):
        self.gold = {q: sorted({norm(c) for c in cs if norm(c)}) for q, cs in gold.items()}
        self.source = source
        self.questions = {q: t for q, t in (questions or {}).items() if q in self.gold}
        self._model = None
        self.freq: Counter = Counter()
        self.pair: dict[str, Counter] = {}
        for cs in self.gold.values():
            self.freq.update(cs)
            for a in cs:
                p = self.pair.setdefault(a, Counter())
                for b in cs:
                    if a != b:
                        p[b] += 1

    def __len__(self) -> int:
        return len(self.gold)

    def _held_out(self, query_id: str | None) -> set[str]:
        return set(self.gold.get(query_id, ())) if query_id is not None else set()

    def cocited(self, seeds: Sequence[tuple[str, float]], query_id: str | None = None, min_count: int = 2,
                top_k: int = 100) -> list[tuple[str, float]]:
        """Citations co-cited in training gold with the weighted seed citations (leave-one-out)."""
        own = self._held_out(query_id)
        seed_set = {norm(s) for s, _ in seeds}
        acc: dict[str, float] = {}
        for s, w in seeds:
            a = norm(s)
            n_a = self.freq.get(a, 0) - (a in own)
            if n_a < min_count:
                continue
            for b, n_ab in self.pair.get(a, {}).items():
                n_ab -= a in own and b in own
                if n_ab <= 0 or b in seed_set:
                    continue
                acc[b] = acc.get(b, 0.0) + w * n_ab / n_a
        return sorted(acc.items(), key=lambda t: (-t[1], t[0]))[:top_k]

    def frequent(self, query_id: str | None = None, min_count: int = 2, top_k: int = 100) -> list[tuple[str, float]]:
        """The most often cited training gold citations, as a share of training queries (leave-one-out)."""
        own = self._held_out(query_id)
        n = len(self.gold) - (1 if own or (query_id in self.gold) else 0)
        out = []
        for c, k in self.freq.items():
            k -= c in own
            if k >= min_count:
                out.append((c, k / max(n, 1)))
        return sorted(out, key=lambda t: (-t[1], t[0]))[:top_k]

    def codes_for(self, text: str, k: int = 2, query_id: str | None = None) -> list[str]:
        """The ``k`` law codes whose training questions are most like ``text``
        (:meth:`scored_codes` without the similarities)."""
        return [c for c, _ in self.scored_codes(text, k, query_id)]

    def _tfidf(self):
        """The tf-idf model of the training questions, built once: (analyzer, idf, code centroids,
        their norms, code members, per-question term counts, per-question tf-idf norms)."""
        import math

        from lexrag.citations import law_codes
        from lexrag.index.analyzer import Analyzer

        if self._model is None:
            an = Analyzer()
            toks = {q: Counter(an(t)) for q, t in self.questions.items()}
            df = Counter(t for c in toks.values() for t in c)
            n = len(toks)
            idf = {t: math.log((n + 1) / (c + 1)) + 1 for t, c in df.items()}
            cent: dict[str, Counter] = {}
            members: dict[str, list[str]] = {}
            for q, c in toks.items():
                codes = law_codes(self.gold.get(q, ()))
                for code in codes:
                    cent.setdefault(code, Counter()).update({t: f * idf[t] for t, f in c.items()})
                    members.setdefault(code, []).append(q)
            norms = {q: math.sqrt(sum((f * idf[t]) ** 2 for t, f in c.items())) or 1.0 for q, c in toks.items()}
            cent_norms = {code: math.sqrt(sum(x * x for x in vec.values())) or 1.0 for code, vec in cent.items()}
            self._model = (an, idf, cent, cent_norms, members, toks, norms)
        return self._model

    def _query_vector(self, text: str) -> tuple[dict[str, float], float]:
        import math

        an, idf = self._tfidf()[:2]
        vq = {t: f * idf.get(t, 0.0) for t, f in Counter(an(text)).items()}
        return vq, math.sqrt(sum(v * v for v in vq.values())) or 1.0

    def scored_codes(self, text: str, k: int = 2, query_id: str | None = None) -> list[tuple[str, float]]:
        """The ``k`` law codes whose training questions are most like ``text``, with the cosine of
        the tf-idf vectors against each code's centroid (positive, best first); the query's own
        training question, when it is one, is left out.  Empty without training questions."""
        import math

        if not self.questions:
            return []
        _, idf, cent, cent_norms, members, toks, _ = self._tfidf()
        vq, nq = self._query_vector(text)
        own = toks.get(query_id) if query_id in self.questions else None
        sims = []
        for code, vec in cent.items():
            if own is not None and members[code] == [query_id]:
                continue  # a code only this question cites: it would be its own answer
            if own is None or query_id not in members[code]:
                v, norm_c = vec, cent_norms[code]
            else:
                v = vec - Counter({t: f * idf[t] for t, f in own.items()})
                norm_c = math.sqrt(sum(x * x for x in v.values())) or 1.0
            sims.append((sum(vq[t] * v.get(t, 0.0) for t in vq) / (norm_c * nq), code))
        sims.sort(key=lambda t: (-t[0], t[1]))
        return [(c, sim) for sim, c in sims[:k] if sim > 0]

    def similar(self, text: str, query_id: str | None = None, neighbours: int = 20, top_k: int = 100) -> list[tuple[str, float]]:
        """Citations of the training questions most like ``text``: the ``neighbours`` questions of
        highest tf-idf cosine (the query's own left out) each add their similarity to every
        citation of their gold; the ``top_k`` best, best first.  Empty without training questions."""
        if not self.questions or neighbours <= 0:
            return []
        an, idf, _, _, _, toks, norms = self._tfidf()
        vq, nq = self._query_vector(text)
        sims = []
        for q, c in toks.items():
            if q == query_id:
                continue
            dot = sum(w * c[t] * idf[t] for t, w in vq.items() if t in c)
            if dot > 0:
                sims.append((dot / (nq * norms[q]), q))
        sims.sort(key=lambda t: (-t[0], t[1]))
        acc: dict[str, float] = {}
        for sim, q in sims[:neighbours]:
            for cit in self.gold[q]:
                acc[cit] = acc.get(cit, 0.0) + sim
        return sorted(acc.items(), key=lambda t: (-t[1], t[0]))[:top_k]

    @classmethod
    def load(cls, folder: str | Path) -> "TrainingPrior":
        params = read_params(folder, ARTIFACT)
        with reading(ARTIFACT, folder):  # a file of another shape (no such column) too
            t = pq.read_table(Path(folder) / "gold.parquet")
            rows = list(zip(t.column("query_id").to_pylist(), t.column("citation").to_pylist()))
        gold: dict[str, list[str]] = {}
        for q, c in rows:
            gold.setdefault(q, [])
            if c:
                gold[q].append(c)
        questions = {}
        if (Path(folder) / "questions.parquet").is_file():  # absent in priors built before the statute model
            with reading(ARTIFACT, folder):
                qt = pq.read_table(Path(folder) / "questions.parquet")
                questions = dict(zip(qt.column("query_id").to_pylist(), qt.column("query").to_pylist()))
        return cls(gold, source=str(params.get("sources")), questions=questions)


@publishes("out_dir")
def build_prior(train_file: str | Path, out_dir: str | Path) -> TrainingPrior:
    """Build the prior artifact from a training CSV (query_id, query, gold_citations)."""
    from lexrag.queries import load_gold, load_queries

    gold = load_gold(train_file)
    if not gold:
        from lexrag.errors import CsvInputError

        raise CsvInputError(f"{train_file}: no question has gold citations (every gold_citations cell is empty), so the "
                            "prior would learn from nothing; give a training CSV with gold")
    questions = {q.query_id: q.text for q in load_queries(train_file) if q.query_id in gold}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").unlink(missing_ok=True)
    rows = [(q, c) for q, cs in gold.items() for c in (cs or [""])]
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "citation": [r[1] for r in rows]}), out / "gold.parquet")
    pq.write_table(pa.table({"query_id": list(questions), "query": list(questions.values())}), out / "questions.parquet")
    write_params(out, ARTIFACT, "lexrag.index.prior.build_prior", {}, n_queries=len(gold),
                 sources={Path(train_file).name: sha256_file(train_file)})
    return TrainingPrior(gold, source=Path(train_file).name, questions=questions)


def build_prior_step(cfg, dest: Path, inputs) -> None:
    p = build_prior(inputs.train, dest)
    log.info("prior: %d training queries from %s", len(p), inputs.train)


def load_prior_step(folder: Path, cfg, art) -> TrainingPrior:
    return TrainingPrior.load(folder)


SPEC = declare(ArtifactSpec(
    "prior", switch="prior", needs_input="train", reads=("train",), dataset="lexrag-prior",
    title="lexrag training-gold prior",
    description="gold citation sets of the training queries (co-citation and frequency prior)",
    builder="python build_datasets.py --only prior --train TRAIN --out OUT", attr="prior",
    build=build_prior_step, load=load_prior_step,
    rebuild="python -m lexrag build ... --train TRAIN.csv --out ARTIFACTS (or build_datasets.py --only prior)"))
