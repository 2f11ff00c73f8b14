"""The BM25 index as a run reads it: loaded (checked against its config and corpus), queried.

The index is a bm25s ``BM25`` folder (CSC arrays as ``.npy``, vocab JSON, ``params.index.json``,
as ``BM25.save`` lays them out, so ``BM25.load`` reads it) plus our ``params.json`` (analyzer and
BM25 params, doc count, corpus hash), built by :mod:`lexrag.index.bm25_build` with the analyzer
of :mod:`lexrag.index.analyzer`; the scoring kernel is :mod:`lexrag.index.bm25_kernel`.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import bm25s
import numpy as np

from lexrag.artifacts import PARAMS, ArtifactError, check_corpus_id, check_params, corpus_id, reading, rebuild_hint
from lexrag.config import LexicalConfig
from lexrag.errors import short
from lexrag.index.decompound import Decompounder
from lexrag.index import bm25_kernel
from lexrag.index.analyzer import Analyzer
from lexrag.registry import ArtifactSpec, declare

__all__ = ["BM25Index", "QUERY_DEDUP"]

ARTIFACT = "bm25"
QUERY_DEDUP = True  # a question's terms each count once (a term it repeats weighs no more)
# bytes of question score vectors a loaded index keeps (one float32 per document each: 50 vectors
# at 2.65M documents, the competition's 40 test questions; every question of a run at 176K)
SCORE_CACHE_BYTES = 512 * 2**20
WORD_TERM_CACHE = 100_000  # words whose word_term a loaded index keeps (a few hundred bytes each)

# A word with a weight: "Haft^0.33" (Lucene's query boost syntax)
_BOOST = re.compile(r"(\S+)\^(\d+(?:\.\d+)?)(?=\s|$)")
# A sentence that asks: it runs back to the previous line break, "?" or "!", or the previous "."
# that ends a sentence (followed by a capital); "Art. 41 Abs. 1 OR", "Art. 41 ff. OR" and "z.B. der"
# stay inside.
_QUESTION = re.compile(r"(?:[^.?!\n]|\.(?!\s+[A-ZÄÖÜ])|(?<=\bff)\.)*\?")


# values of a postings array read at a time by the load check (16 MiB of float32 or int32): each
# block's min and max are taken while it sits in the CPU cache, so an array is read from memory (or
# disk) once, with no temporary larger than a block
CHECK_BLOCK = 1 << 22
DATA, INDICES, INDPTR = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"


def _dtype_words(dt: np.dtype) -> str:
    order = {">": "big-endian ", "<": "little-endian "}.get(dt.str[0], "")
    return f"{order}{dt.name} ({dt.str})"


def _check_layout(folder: str | Path, sc: dict) -> None:
    """What the kernel compiles for, before any value is read (the headers only): one-dimensional
    arrays of native float32 ``data`` and native int32 or int64 ``indices`` and ``indptr``.  numba
    refuses other byte orders with a traceback at the first query, and a narrower or unsigned id
    type is not what the build writes."""
    for name, key, kinds, sizes, want in ((DATA, "data", "f", (4,), "native little-endian float32 (<f4)"),
                                          (INDICES, "indices", "i", (4, 8), "native little-endian int32 or int64"),
                                          (INDPTR, "indptr", "i", (4, 8), "native little-endian int32 or int64")):
        a = sc[key]
        if not isinstance(a, np.ndarray) or a.ndim != 1:
            shape = f"a {a.ndim}-D array of shape {a.shape}" if isinstance(a, np.ndarray) else f"a {type(a).__name__}"
            raise ArtifactError(f"{Path(folder) / name}: {shape}, not the one-dimensional array the BM25 kernel reads "
                                f"(damaged, or written by another program); {rebuild_hint(ARTIFACT)}")
        if a.dtype.kind not in kinds or a.dtype.itemsize not in sizes or not a.dtype.isnative:
            raise ArtifactError(f"{Path(folder) / name}: values of type {_dtype_words(a.dtype)}, the BM25 kernel reads {want} "
                                f"(saved by another program or on another machine); {rebuild_hint(ARTIFACT)}")


def _first_bad(a: np.ndarray, start: int, ok) -> tuple[int, object]:
    """Position and value of the first value of the block of ``a`` at ``start`` that ``ok`` refuses."""
    block = np.asarray(a[start:start + CHECK_BLOCK])
    at = int(np.flatnonzero(~ok(block))[0])
    return start + at, block[at].item()


def _check_values(folder: str | Path, sc: dict, n_docs: int, n_vocab: int) -> None:
    """Every posting must be one the kernel can follow without a check of its own (it reads
    ``scores[indices[p]]`` for each ``p`` of ``indptr[t]:indptr[t + 1]`` unchecked, so a bad id or
    span is a segmentation fault) and score: ``indptr`` rises from 0 to the number of postings with
    one span per vocabulary term, every document id lies in [0, n_docs), every BM25 contribution is
    finite and not negative (a NaN scores nothing, and a run would say the questions found nothing).

    Cost: one read of each array, run once per load, never per query: ``indptr`` (4-8 bytes a term)
    whole, ``data`` and ``indices`` (4 bytes a posting each) block by block (:data:`CHECK_BLOCK`),
    each block's min and max while it is in the cache.  Memory-mapped, the read goes through the page
    cache, which the queries then find warm.  Measured (2 loaded cores): the 176K-document legal
    corpus (6.2M postings, 50 MB) 8 ms in the page cache, 40-55 ms with its pages evicted; 100M
    synthetic postings (800 MB) 0.10 s in memory: about 1 ms per million postings, plus the disk's
    time for pages not yet cached (which the sha256 check of a new file version reads anyway)."""
    folder = Path(folder)
    data, indices, indptr = sc["data"], sc["indices"], sc["indptr"]
    nnz = len(indices)
    if len(data) != nnz:
        raise ArtifactError(f"{folder / DATA}: {len(data)} values, but {folder / INDICES} holds {nnz} document ids: "
                            f"one of them is damaged or of another build; {rebuild_hint(ARTIFACT)}")
    if len(indptr) != max(n_vocab, 1) + 1:
        raise ArtifactError(f"{folder / INDPTR}: {len(indptr) - 1} term spans, but vocab.index.json has {n_vocab} terms: "
                            f"one of them is of another build; {rebuild_hint(ARTIFACT)}")
    first, last = int(indptr[0]), int(indptr[-1])
    if first != 0 or last != nnz or bool((indptr[1:] < indptr[:-1]).any()):
        what = (f"starts at {first}, not 0" if first != 0 else f"ends at {last}, not at the {nnz} postings of {INDICES}"
                if last != nnz else f"falls at term {int(np.flatnonzero(indptr[1:] < indptr[:-1])[0]) + 1}")
        raise ArtifactError(f"{folder / INDPTR}: its term spans are not the postings in order (it {what}; damaged or of "
                            f"another build); {rebuild_hint(ARTIFACT)}")
    for start in range(0, nnz, CHECK_BLOCK):
        block = indices[start:start + CHECK_BLOCK]
        if int(block.min()) < 0 or int(block.max()) >= n_docs:
            at, d = _first_bad(indices, start, lambda b: (b >= 0) & (b < n_docs))
            raise ArtifactError(f"{folder / INDICES}: document id {d} at posting {at} is outside the index's {n_docs} "
                                f"documents (0..{n_docs - 1}; damaged or of another build); {rebuild_hint(ARTIFACT)}")
    for start in range(0, nnz, CHECK_BLOCK):
        block = data[start:start + CHECK_BLOCK]
        lo, hi = block.min(), block.max()  # a NaN anywhere makes both NaN
        if not (lo >= 0 and np.isfinite(hi)):
            at, x = _first_bad(data, start, lambda b: np.isfinite(b) & (b >= 0))
            raise ArtifactError(f"{folder / DATA}: BM25 value {x} at posting {at} (every value must be finite and not "
                                f"negative; damaged or written by a broken build); {rebuild_hint(ARTIFACT)}")


def _check_scored_with(folder: str | Path, retriever: "bm25s.BM25", params: dict) -> None:
    """The BM25 settings params.json records must be the ones the scores were computed with, which
    bm25s records in params.index.json (a file whose sha256 params.json lists): a k1 edited in a
    params.json without a digest would otherwise load, and rank with the other k1 while saying this one."""
    recorded = params.get("params") or {}
    for key in ("k1", "b", "method"):
        have = getattr(retriever, key, None)
        if key in recorded and have != recorded[key]:
            raise ArtifactError(f"{Path(folder) / PARAMS}: records {key} {short(recorded[key])}, but the scores in "
                                f"{Path(folder) / 'params.index.json'} were computed with {short(have)} (params.json "
                                f"edited after the build); {rebuild_hint(ARTIFACT)}")


def _check_vocab(folder: str | Path, vocab: dict, n_terms: int) -> None:
    """The vocabulary must give each term its own column of the postings: ids that repeat or fall
    outside the columns would score every query against the wrong documents without a word."""
    ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab)) if vocab else np.zeros(0, np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= n_terms or np.bincount(ids, minlength=n_terms).max() > 1):
        raise ArtifactError(f"BM25 index at {folder}: its vocabulary's {len(ids)} term ids are not distinct columns "
                            f"0..{n_terms - 1} of its postings; {rebuild_hint(ARTIFACT)}")


class BM25Index:
    """A loaded index: ``search(text, k)`` -> (doc_ids, scores), best first."""

    def __init__(self, retriever: "bm25s.BM25", analyzer: Analyzer, params: dict):
        self.retriever = retriever
        self.analyzer = analyzer
        self.params = params
        self.n_docs = int(retriever.scores["num_docs"])
        # query -> (score vector, the documents it touched, None without numba) or None
        self._cache: "OrderedDict[tuple, tuple[np.ndarray, np.ndarray | None] | None]" = OrderedDict()
        self.cache_size = max(1, SCORE_CACHE_BYTES // (4 * max(self.n_docs, 1)))
        # word -> word_term(word), the most recent kept: a dictionary's senses recur within and across questions
        self._kept_word_term = functools.lru_cache(maxsize=WORD_TERM_CACHE)(self._find_word_term)

    @staticmethod
    def expected_params(cfg: LexicalConfig) -> dict:
        analyzer = Analyzer(cfg.stemmer, cfg.min_token_len)
        decompound = {"min_part": cfg.decompound_min_part, "min_count": cfg.decompound_min_count} if cfg.decompound else None
        return {"k1": cfg.k1, "b": cfg.b, "method": cfg.method, "fields": list(cfg.fields), **analyzer.params(),
                "decompound": decompound}

    @classmethod
    def load(cls, folder: str | Path, cfg: LexicalConfig | None = None, corpus_id: str | None = None, mmap: bool = True,
             n_docs: int | None = None) -> "BM25Index":
        """Load and refuse when the index was built with other analyzer/BM25 params or another corpus
        (its recorded corpus id, and with ``n_docs`` the corpus's size against the index's own).
        With ``mmap`` (the default) the postings stay in the files, read through the page cache as
        queries touch them, so the process holds no private copy of them."""
        cfg = cfg or LexicalConfig()
        params = check_params(folder, ARTIFACT, cls.expected_params(cfg))
        check_corpus_id(folder, ARTIFACT, params.get("corpus_id"), corpus_id)
        with reading(ARTIFACT, folder):
            retriever = bm25s.BM25.load(folder, mmap=mmap, show_progress=False, verbosity=0)
            sc = retriever.scores
            _check_layout(folder, sc)
            _check_scored_with(folder, retriever, params)
            nnz, vocab = params.get("nnz"), params.get("vocab_size")
            if (nnz is not None and (len(sc["data"]) != nnz or len(sc["indices"]) != nnz)) or \
                    (vocab is not None and len(sc["indptr"]) != vocab + 1):
                raise ArtifactError(f"BM25 index at {folder}: its arrays do not have the sizes recorded at build "
                                    f"(nnz {nnz}, vocabulary {vocab}); {rebuild_hint(ARTIFACT)}")
            _check_vocab(folder, retriever.vocab_dict, len(sc["indptr"]) - 1)
            decompounder = Decompounder.load(folder) if cfg.decompound else None
            indexed = sc["num_docs"]
            if isinstance(indexed, bool) or not isinstance(indexed, int) or indexed != params.get("n_docs", indexed):
                raise ArtifactError(f"BM25 index at {folder}: num_docs {short(indexed)} in params.index.json is not the "
                                    f"{params.get('n_docs')} documents recorded at build; {rebuild_hint(ARTIFACT)}")
            _check_values(folder, sc, indexed, len(retriever.vocab_dict))  # once per load: never per query
        if n_docs is not None and indexed != n_docs:  # a copy over another corpus, whatever its params say
            raise ArtifactError(f"BM25 index at {folder} covers {indexed} documents, the loaded corpus has {n_docs}; "
                                f"{rebuild_hint(ARTIFACT)}")
        return cls(retriever, Analyzer(cfg.stemmer, cfg.min_token_len, decompounder=decompounder), params)

    def scores(self, text: str, dedup: bool = True, question_weight: int = 1, cache: bool = True) -> np.ndarray | None:
        """BM25 score of every document for ``text`` (None when no query term is indexed).
        ``dedup`` counts each query term once, so a long query that repeats a word does not
        drown its other terms; ``question_weight`` counts the terms of the question sentences (those ending in "?")
        that many times, so the question asked outweighs the story told before it.  A word
        written ``word^0.5`` (Lucene's boost syntax) counts its terms with that weight: the
        dictionary variant weights each of a word's German senses by one over their number.  A
        word written ``=word^0.5`` counts its own stem only, not its compound parts (the
        dictionary's compounds, whose parts are searched at their own weights).

        With ``cache`` the result is kept (read-only) among the last ``cache_size`` (what
        :data:`SCORE_CACHE_BYTES` holds): each stage runs over all the questions before the next,
        and four of them (BM25, statutes, articles, graph) ask for the same question's scores;
        a query asked once (feedback's expanded question) passes ``cache=False``."""
        hit = self._scored(text, dedup, question_weight, cache)
        return None if hit is None else hit[0]

    def _scored(self, text: str, dedup: bool, question_weight: int, cache: bool) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(scores, touched documents) of a query, through the cache (see :meth:`scores`)."""
        key = (text, dedup, question_weight)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        weights = self.query_terms(text, dedup, question_weight)
        hit = self._accumulate(weights) if weights else None
        if cache:
            if hit is not None:
                for a in hit:
                    if a is not None:
                        a.flags.writeable = False  # shared by every stage that asks
            self._cache[key] = hit
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return hit

    def check_corpus(self, corpus, folder: str | Path = "", samples: int = 8) -> None:
        """Spot-check that the index was built over ``corpus``'s texts (a copy over another corpus of
        the same size, its corpus id edited, passes every recorded check): a few documents spread
        over the corpus must be in the postings of their own terms."""
        n = min(len(corpus), self.n_docs)
        if n == 0:
            return
        sc = self.retriever.scores
        indices, indptr, vocab = sc["indices"], sc["indptr"], self.retriever.vocab_dict
        picks = [int(d) for d in np.linspace(0, n - 1, num=min(samples, n), dtype=np.int64)]
        fields = self.params.get("params", {}).get("fields") or ["text"]
        fields = ["text"] if "text" in fields else fields  # the text's words are indexed; read from the blob, not parquet
        for d, text in zip(picks, corpus.field_texts(picks, fields)):  # (some of) the texts the index was built over
            terms = [vocab[t] for t in dict.fromkeys(self.analyzer(text or "")) if t in vocab][:3]
            for j in terms:
                col = indices[int(indptr[j]):int(indptr[j + 1])]
                k = int(np.searchsorted(col, d))
                if k >= len(col) or int(col[k]) != int(d):
                    raise ArtifactError(f"BM25 index {folder}: document {int(d)} is not in the postings of its own words: "
                                        f"the index was built over other texts than this corpus; {rebuild_hint(ARTIFACT)}")

    def query_terms(self, text: str, dedup: bool = True, question_weight: int = 1) -> dict[int, float]:
        """Indexed term id -> weight of a query (see :meth:`scores`), in the order of first use."""
        vocab = self.retriever.vocab_dict
        weights: dict[int, float] = {}
        last = 0
        pieces: list[tuple[str, float, bool]] = []  # (text, weight, a boosted word taken whole)
        for m in _BOOST.finditer(text):
            word = m.group(1)
            pieces += [(text[last:m.start()], 1.0, False), (word.removeprefix("="), float(m.group(2)), word.startswith("="))]
            last = m.end()
        pieces.append((text[last:], 1.0, False))
        for part, w, whole in pieces:
            for t in (self.analyzer.whole(part) if whole else self.analyzer(part)):
                j = vocab.get(t)
                if j is not None and w > 0:
                    weights[j] = max(weights.get(j, 0.0), w) if dedup else weights.get(j, 0.0) + w
        if question_weight > 1 and weights:
            asked = {j for t in self.analyzer(_BOOST.sub(r"\1", " ".join(_QUESTION.findall(text)))) if (j := vocab.get(t)) in weights}
            weights = {j: w * question_weight if j in asked else w for j, w in weights.items()}
        return weights

    def word_term(self, word: str) -> tuple[str, int] | None:
        """The indexed term that stands for ``word`` and how many documents hold it: the word's own
        stem where the index holds it, else its rarest indexed term (a compound's part, a word of a
        hyphenated one); None when the index holds none of them."""
        return self._kept_word_term(word)

    def _find_word_term(self, word: str) -> tuple[str, int] | None:
        vocab, indptr = self.retriever.vocab_dict, self.retriever.scores["indptr"]
        surface = self.analyzer.surface(word)
        if len(surface) == 1 and surface[0] not in self.analyzer.stopwords:  # one word whose own stem is held: no
            stem = self.analyzer.stems(surface)[0]                          # need to split it into its parts
            if (j := vocab.get(stem)) is not None:
                return stem, int(indptr[j + 1] - indptr[j])
        stems = [s for t in surface for s in self.analyzer.expand(t)]
        held = [(t, int(indptr[j + 1] - indptr[j])) for t in stems if (j := vocab.get(t)) is not None]
        if not held:
            return None
        return held[0] if held[0][0] == stems[0] else min(held, key=lambda h: (h[1], h[0]))

    def whole_word_terms(self, words: list[str]) -> list[tuple[str, int]]:
        """Each word's own stem, the word taken whole (a compound is not stood for by its parts, as
        :meth:`word_term` does), and how many documents hold it (0: none)."""
        vocab, indptr = self.retriever.vocab_dict, self.retriever.scores["indptr"]
        return [(t, int(indptr[j + 1] - indptr[j]) if (j := vocab.get(t)) is not None else 0)
                for t in self.analyzer.stems([w.lower() for w in words])]

    def doc_freq(self, word: str) -> int | None:
        """How many documents hold :meth:`word_term`'s term of ``word`` (None when none is indexed)."""
        held = self.word_term(word)
        return None if held is None else held[1]

    def idf(self, df: float) -> float:
        """The index's BM25 idf of a document frequency (its own method's formula)."""
        return float(bm25_kernel.idf_of(np.asarray([df], dtype=np.float64), self.n_docs, self.params["params"]["method"])[0])

    def _accumulate(self, weights: dict[int, float]) -> tuple[np.ndarray, np.ndarray | None]:
        """Σ weight × BM25 column over the query's terms, accumulated in float32 over their postings
        in term order as bm25s' ``get_scores_from_ids`` does (a term there n times is weight n here),
        and the documents it touched (see :func:`lexrag.index.bm25_kernel.accumulate`)."""
        sc = self.retriever.scores
        return bm25_kernel.accumulate(sc["data"], sc["indices"], sc["indptr"], weights, self.n_docs)

    def query_scores(self, text: str, lc: LexicalConfig, cache: bool = True) -> np.ndarray | None:
        """:meth:`scores` of a question with the query settings of ``lc`` (every stage that
        searches the question asks through here, so they all see the same query)."""
        return self.scores(text, QUERY_DEDUP, lc.question_weight, cache)

    def query_search(self, text: str, lc: LexicalConfig, k: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` of a question with the query settings of ``lc`` (the score vector it
        makes is the one :meth:`query_scores` gives the other stages)."""
        return self.search(text, k, QUERY_DEDUP, lc.question_weight)

    def search(self, text: str, k: int, dedup: bool = True, question_weight: int = 1,
               cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents with a positive score, best first (ties as :meth:`top`)."""
        hit = self._scored(text, dedup, question_weight, cache)
        if hit is None or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return bm25_kernel.top_k(hit[0], k, hit[1])

    def search_terms(self, weights: dict[int, float], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents of an analyzed query (term id -> weight, :meth:`query_terms`), uncached."""
        if not weights or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        scores, touched = self._accumulate(weights)
        return bm25_kernel.top_k(scores, k, touched)

    def search_many(self, texts: Sequence[str], k: int, dedup: bool = True, question_weight: int = 1,
                    threads: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search` of many queries, in their order, the same documents and scores; the
        scoring runs on ``threads`` threads (0: every core) with numba.  Nothing is cached
        (validation and tuning ask each query once)."""
        weights = [self.query_terms(t, dedup, question_weight) for t in texts]
        sc = self.retriever.scores
        return bm25_kernel.top_k_many(sc["data"], sc["indices"], sc["indptr"], weights, self.n_docs, k, threads)

    @staticmethod
    def top(scores: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best documents of a score vector with a positive score, best first; ties by
        doc_id, at the k-th place too (the lowest ids of the tied scores are kept)."""
        if scores is None or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return bm25_kernel.top_k(scores, k)


def load_bm25_step(folder: Path, cfg, art) -> BM25Index:
    index = BM25Index.load(folder, cfg.lexical, corpus_id=corpus_id(art.corpus_dir), n_docs=len(art.corpus))
    index.check_corpus(art.corpus, folder)
    return index


SPEC = declare(ArtifactSpec(
    "bm25", ("corpus",), switch="lexical.enabled", dataset="lexrag-bm25", title="lexrag BM25 index (German analyzer)",
    description="bm25s index over the corpus, paper analyzer (86 stopwords, Snowball German) plus compound parts split by "
                "the corpus word counts (decompound.json)",
    builder="python build_datasets.py --only bm25 --out OUT", notebook="02_build_bm25", attr="bm25",
    build_in="lexrag.index.bm25_build", load=load_bm25_step,
    rebuild="python -m lexrag build ... --out ARTIFACTS (or build_datasets.py --only bm25)"))
