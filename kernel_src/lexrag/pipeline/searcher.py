"""One-call search from Python: :class:`Searcher` loads the artifacts and the config once and
answers question after question through the same pipeline ``lexrag run`` walks, keeping its
models and context between calls (``close`` frees them).

    >>> s = Searcher.load("out/demo/artifacts")                  # the defaults; or config="exam"
    >>> s.search("Haftung des Arbeitgebers", k=3)                # [Hit(rank=1, citation=..., score=...), ...]
    >>> s.answer("Haftung des Arbeitgebers")                     # the citations a run would emit

``search`` returns the retrieval ranking: the distinct corpus citations of the order the count
cuts (the fused order, or the reranked one where a reranker ran), each with the score of that
order, its corpus document and its text.  The scores rank within one question only: for the fused
order they are weighted reciprocal-rank sums, not probabilities and not comparable between questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from lexrag.config import Config, load_config

__all__ = ["Hit", "Searcher"]


@dataclass(frozen=True)
class Hit:
    """One citation of a ranking: its rank (1 = best), the citation string, the score of the
    order it comes from, its first corpus document (``doc_id``) and that document's text."""

    rank: int
    citation: str
    score: float
    doc_id: int
    text: str


class Searcher:
    """The pipeline over loaded artifacts, asked one question (``search``, ``answer``) or many
    (``batch_search``, ``batch_answer``) at a time; usable as a context manager."""

    def __init__(self, artifacts, cfg: Config, paths=None):
        from lexrag.pipeline.context import make_context

        self.artifacts, self.cfg, self.paths = artifacts, cfg, paths
        self._ctx = make_context(cfg, artifacts, paths)
        self._closed = False

    @classmethod
    def load(cls, artifacts: str | Path, config: str | Path | Config | None = None,
             overrides: Mapping[str, Any] | None = None) -> "Searcher":
        """Load the artifacts folder under ``config``: None for the defaults, a preset name
        (``"lexical"``, ``"exam"``, ``"kaggle"``), a YAML file or a :class:`Config`;
        ``overrides`` as ``--set`` gives them (``{"count.k": 5}``).  The artifacts are checked
        against the config as a run checks them (a missing part is one error naming its fix)."""
        from lexrag.config import with_overrides
        from lexrag.pipeline.artifacts import Artifacts

        if not isinstance(artifacts, (str, Path)):
            raise TypeError(f"Searcher.load: artifacts must be the artifacts folder (a str or Path), not "
                            f"{type(artifacts).__name__}; for a Paths use Searcher(Artifacts.load(paths, cfg), cfg)")
        if isinstance(config, Config):
            cfg = with_overrides(config, dict(overrides)) if overrides else config
        else:
            cfg = load_config(config, overrides)
        return cls(Artifacts.from_folder(artifacts, cfg), cfg)

    def _run(self, texts: Sequence[str]):
        from lexrag.pipeline.run import run_pipeline
        from lexrag.queries import Query

        if self._closed:
            raise RuntimeError("this Searcher was closed; load a new one")
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):
            raise TypeError(f"texts must be a list of questions (str), not {type(texts).__name__}; search and answer "
                            "take one question")
        texts = list(texts)  # a pandas column or a generator as well as a list
        for i, t in enumerate(texts):  # str(b"..."), str(None) or str(12345) would be searched as if asked
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, not str: give each question as text"
                                + (" (decode bytes first)" if isinstance(t, bytes) else ""))
        queries = [Query(f"q{i}", t) for i, t in enumerate(texts, start=1)]
        return queries, run_pipeline(queries, self.artifacts, self.cfg, self.paths, ctx=self._ctx)

    def batch_search(self, texts: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """For each question, its first ``k`` hits (fewer where the ranking is shorter)."""
        from lexrag.stages.count import unique_citations

        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k={k!r}: give the number of hits to return (1 or more)")
        queries, res = self._run(texts)
        corpus = self.artifacts.corpus
        out = []
        for q in queries:
            docs, cits, scores = unique_citations(res.current.hits.get(q.query_id, []), corpus)
            docs, cits, scores = docs[:k], cits[:k], scores[:k]
            texts_ = corpus.texts(docs)
            out.append([Hit(i, c, float(s), int(d), t) for i, (c, s, d, t) in enumerate(zip(cits, scores, docs, texts_), start=1)])
        return out

    def search(self, text: str, k: int = 10) -> list[Hit]:
        """The first ``k`` hits of one question."""
        _one_question("search", text)
        return self.batch_search([text], k)[0]

    def batch_answer(self, texts: Sequence[str]) -> list[list[str]]:
        """For each question, the citations a run would emit: cut by the config's count, in the
        form it asks for (whole articles beside their paragraphs)."""
        queries, res = self._run(texts)
        return [list(res.predictions.get(q.query_id, [])) for q in queries]

    def answer(self, text: str) -> list[str]:
        """The citations a run would emit for one question."""
        _one_question("answer", text)
        return self.batch_answer([text])[0]

    def close(self) -> None:
        """Free the models the runs loaded (the artifacts stay readable until the object goes)."""
        if not self._closed:
            self._closed = True
            self._ctx.models.release()
            if self._ctx.llm is not None:
                self._ctx.llm.cache.close()

    def __enter__(self) -> "Searcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _one_question(method: str, text: object) -> None:
    """``text`` is one question (a str), else one TypeError line naming the argument."""
    if not isinstance(text, str):
        many = " (batch_search and batch_answer take a list)" if isinstance(text, (list, tuple)) else ""
        decode = " (decode bytes first)" if isinstance(text, bytes) else ""
        raise TypeError(f"{method}: text is {type(text).__name__}, not str: give the question as text{decode}{many}")
