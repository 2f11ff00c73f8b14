"""A citation prior learned from training gold (never from validation gold).

Two signals: ``prior_cocited`` — citations that training gold sets cite together with the seed
candidates' citations, ``score(c) = sum_a w_a * n(a, c) / n(a)``; and ``prior_frequent`` —
citations that appear in many training gold sets (procedural boilerplate such as
``Art. 100 Abs. 1 BGG``), ranked by that count.  Counts below ``min_count`` are ignored.

When a query of the training file itself is scored, its own gold set is subtracted from every
count first (leave-one-query-out), so the prior never sees the answer it is scored on.
Artifact: ``gold.parquet`` (query_id, citation) plus ``params.json`` with the source file hash.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lexrag.artifacts import publishes, read_params, reading, sha256_file, write_params
from lexrag.citations import scoring_form as norm

__all__ = ["TrainingPrior", "build_prior"]

ARTIFACT = "prior"


class TrainingPrior:
    def __init__(self, gold: dict[str, Sequence[str]], source: str = ""):
        self.gold = {q: sorted({norm(c) for c in cs if norm(c)}) for q, cs in gold.items()}
        self.source = source
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

    def cocited(self, seeds: Sequence[tuple[str, float]], query_id: str | None = None, min_count: int = 2, top_k: int = 100) -> list[tuple[str, float]]:
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

    @classmethod
    def load(cls, folder: str | Path) -> "TrainingPrior":
        params = read_params(folder, ARTIFACT)
        with reading(ARTIFACT, folder):
            t = pq.read_table(Path(folder) / "gold.parquet")
        gold: dict[str, list[str]] = {}
        for q, c in zip(t.column("query_id").to_pylist(), t.column("citation").to_pylist()):
            gold.setdefault(q, [])
            if c:
                gold[q].append(c)
        return cls(gold, source=str(params.get("sources")))


@publishes("out_dir")
def build_prior(train_file: str | Path, out_dir: str | Path) -> TrainingPrior:
    """Build the prior artifact from a training CSV (query_id, query, gold_citations)."""
    from lexrag.queries import load_gold

    gold = load_gold(train_file)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").unlink(missing_ok=True)
    rows = [(q, c) for q, cs in gold.items() for c in (cs or [""])]
    pq.write_table(pa.table({"query_id": [r[0] for r in rows], "citation": [r[1] for r in rows]}), out / "gold.parquet")
    write_params(out, ARTIFACT, "lexrag.index.prior.build_prior", {}, n_queries=len(gold),
                 sources={Path(train_file).name: sha256_file(train_file)})
    return TrainingPrior(gold, source=Path(train_file).name)
