"""Lexical stage: the paper's German analyzer and a bm25s index built in a streaming pass.

Analyzer (paper): lowercase, split on non-alphanumerics, drop 86 German stopwords, drop
1-character tokens, Snowball German stemming (PyStemmer).

The index is a bm25s ``BM25`` folder (CSC arrays as ``.npy``, vocab JSON, ``params.index.json``,
as ``BM25.save`` lays them out, so ``BM25.load`` reads it) plus our ``params.json`` (analyzer and
BM25 params, doc count, corpus hash).  ``bm25s.BM25.index`` holds every token list of the corpus in
Python lists, which does not fit 2.47M documents in memory; :func:`build_bm25` therefore computes
the same score matrix (bm25s' eager scoring, same idf and tf formulas) from per-chunk postings on
disk and writes the CSC files a block of term columns at a time.  A test checks equality with
``bm25s.BM25.index`` on a small corpus.
"""

from __future__ import annotations

import json
import re
import tempfile
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Sequence

import bm25s
import numpy as np

from lexrag.artifacts import ArtifactError, check_params, publishes, read_params, reading, rebuild_hint, write_params
from lexrag.citations import normalize_text
from lexrag.config import LexicalConfig
from lexrag.errors import short
from lexrag.index.decompound import FILE as DECOMPOUND_FILE
from lexrag.index.decompound import Decompounder
from lexrag.index import bm25_kernel

__all__ = ["GERMAN_STOPWORDS", "Analyzer", "BM25Index", "build_bm25"]

ARTIFACT = "bm25"
# bytes of question score vectors a loaded index keeps (one float32 per document each: 50 vectors
# at 2.65M documents, the competition's 40 test questions; every question of a run at 176K)
SCORE_CACHE_BYTES = 512 * 2**20

# 86 German stopwords: the 86 words of the Snowball German stopword list that occur most often
# in laws_de.csv (counted once over the 114,886 paragraphs in ../shared/data), so the list
# removes what is frequent in this corpus rather than what is frequent in general German.
GERMAN_STOPWORDS = frozenset(
    """
    die der und oder des den in für von nach das werden zu mit im ist dem auf eine sind sie nicht
    über kann einer zur bei wird ein an so vom wenn als sich aus durch hat einem es können eines
    dass diese zum er einen muss dieser vor bis nur unter am haben um auch ihre ihrer keine dieses
    anderen alle wie gegen ohne sein während andere welche diesem dies zwischen ihr noch ob seiner
    ihren ihm ihnen dessen seine jede waren diesen jeder
    """.split()
)

_TOKEN = re.compile(r"[^\W_]+")
# A sentence that asks: it runs back to the previous line break, "?" or "!", or the previous "."
# that ends a sentence (followed by a capital); "Art. 41 Abs. 1 OR", "Art. 41 ff. OR" and "z.B. der"
# stay inside.
# A word with a weight: "Haft^0.33" (Lucene's query boost syntax)
_BOOST = re.compile(r"(\S+)\^(\d+(?:\.\d+)?)(?=\s|$)")
_QUESTION = re.compile(r"(?:[^.?!\n]|\.(?!\s+[A-ZÄÖÜ])|(?<=\bff)\.)*\?")


class Analyzer:
    """Text -> list of stemmed tokens.  With a :class:`~lexrag.index.decompound.Decompounder`, a
    compound is followed by the stems of its parts.  Expansions are cached per surface form (the
    hot path)."""

    def __init__(self, stemmer: str = "german", min_token_len: int = 2, stopwords: Iterable[str] = GERMAN_STOPWORDS,
                 decompounder: Decompounder | None = None):
        self.language = stemmer
        self.min_token_len = min_token_len
        self.stopwords = frozenset(stopwords)
        self.decompounder = decompounder
        self._cache: dict[str, tuple[str, ...]] = {}
        if stemmer:
            import Stemmer  # PyStemmer; a hard dependency of the lexical stage

            self._stemmer = Stemmer.Stemmer(stemmer)
        else:
            self._stemmer = None

    def params(self) -> dict:
        return {
            "stemmer": self.language,
            "min_token_len": self.min_token_len,
            "stopwords": len(self.stopwords),
            "token_pattern": _TOKEN.pattern,
            "unicode": "NFKC, zero-width removed",
        }

    def surface(self, text: str) -> list[str]:
        """The lowercase words of ``text`` long enough to keep, stopwords included."""
        return [t for t in _TOKEN.findall(normalize_text(text).lower()) if len(t) >= self.min_token_len]

    def expand(self, word: str) -> tuple[str, ...]:
        """What one surface word puts in the index: nothing for a stopword, else its stem, then the
        stems of its compound parts (stopwords among them dropped)."""
        got = self._cache.get(word)
        if got is None:
            if word in self.stopwords:
                got = ()
            else:
                words = [word]
                if self.decompounder is not None:
                    words += [p for p in self.decompounder.split(word) if p not in self.stopwords and len(p) >= self.min_token_len]
                got = tuple(self._stemmer.stemWords(words)) if self._stemmer is not None else tuple(words)
            if len(self._cache) > 2_000_000:
                self._cache.clear()
            self._cache[word] = got
        return got

    def __call__(self, text: str) -> list[str]:
        return [s for t in self.surface(text) for s in self.expand(t)]

    def clear_cache(self) -> None:
        self._cache.clear()
        if self.decompounder is not None:
            self.decompounder.clear_cache()


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs (``np.unique`` without its
    hash path, which numpy >= 2.3 takes for plain ``unique`` and which is several times slower here)."""
    if len(keys) == 0:
        return keys, np.empty(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], np.diff(np.r_[first, len(keys)])


def _idf(df: np.ndarray, n_docs: int, method: str) -> np.ndarray:
    # Same formulas as bm25s.scoring (Kamphuis et al. 2020 variants).
    df = df.astype(np.float64)
    if method == "lucene":
        return np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    if method == "robertson":
        return np.log(np.maximum((n_docs - df + 0.5) / (df + 0.5), 1.0))
    if method == "atire":
        return np.log(n_docs / df)
    raise ValueError(f"unsupported BM25 method {method!r}")


def _tfc(tf: np.ndarray, dl: np.ndarray, avgdl: float, k1: float, b: float, method: str) -> np.ndarray:
    if method in ("lucene", "robertson"):
        return tf / (k1 * ((1 - b) + b * dl / avgdl) + tf)
    if method == "atire":
        return tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    raise ValueError(f"unsupported BM25 method {method!r}")


@publishes("out_dir")
def build_bm25(
    texts: Iterable[Sequence[str]],
    out_dir: str | Path,
    cfg: LexicalConfig | None = None,
    corpus_id: str = "",
    progress: bool = False,
    n_docs_hint: int | None = None,
) -> "BM25Index":
    """Build and save the index over ``texts`` (an iterable of batches of document texts).

    Two passes over the text and one over the postings, so that the index is never whole in
    memory: the first splits every document into its surface words once, writing their ids to a
    temporary file and counting each word; then every surface word is analyzed once (stopword,
    stem, compound parts split with the counts of the whole corpus); the second pass reads the ids
    back chunk by chunk, expands them to index terms and appends each chunk's (term, document, tf)
    postings, sorted by term, to run files while counting document lengths and frequencies; the
    last writes the CSC files (term columns, docs in increasing order inside a column, exactly as
    bm25s and scipy's counting sort lay them out) one block of columns at a time from the runs.
    """
    cfg = cfg or LexicalConfig()
    words = Analyzer(cfg.stemmer, cfg.min_token_len)  # surface words only (pass 1)
    surface: dict[str, int] = {}
    seen = np.zeros(1 << 16, dtype=np.int64)  # occurrences of each surface word
    chunks: list[np.ndarray] = []  # surface words per document, one array per chunk
    n_docs = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_docs_hint, desc="bm25 index", unit="docs", mininterval=5)
    sub = 10_000  # documents per counting step: bounds the per-step temporaries
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".tokens-") as tmp:
        tokens = Path(tmp) / "tokens.i32"
        with open(tokens, "wb") as f:
            for big in texts:
                for start in range(0, len(big), sub):
                    batch = big[start : start + sub]
                    ids_buf = array("i")
                    lens = np.empty(len(batch), dtype=np.int32)
                    for j, text in enumerate(batch):
                        toks = words.surface(text or "")
                        lens[j] = len(toks)
                        ids_buf.extend([surface.setdefault(t, len(surface)) for t in toks])
                    f.write(ids_buf.tobytes())
                    if len(surface) > len(seen):
                        seen = np.concatenate([seen, np.zeros(max(len(surface), 2 * len(seen)) - len(seen), dtype=np.int64)])
                    seen[: len(surface)] += np.bincount(np.frombuffer(ids_buf, dtype=np.int32), minlength=len(surface))
                    chunks.append(lens)
                    n_docs += len(batch)
                    if bar is not None:
                        bar.update(len(batch))
        if bar is not None:
            bar.close()
        if n_docs == 0:
            raise ArtifactError("cannot build a BM25 index over an empty corpus")

        # every surface word -> its index terms, as CSR arrays (offsets into targets)
        forms = list(surface)
        decompounder = None
        if cfg.decompound:
            frequent = np.flatnonzero(seen[: len(forms)] >= cfg.decompound_min_count)
            decompounder = Decompounder({forms[i]: int(seen[i]) for i in frequent}, cfg.decompound_min_part, cfg.decompound_min_count)
        analyzer = Analyzer(cfg.stemmer, cfg.min_token_len, decompounder=decompounder)
        del seen, surface
        vocab: dict[str, int] = {}
        offsets = np.zeros(len(forms) + 1, dtype=np.int64)
        targets = array("i")
        for i, w in enumerate(forms):
            targets.extend([vocab.setdefault(t, len(vocab)) for t in analyzer.expand(w)])
            offsets[i + 1] = len(targets)
        del forms
        analyzer.clear_cache()  # each surface word was expanded once: the cache would only hold memory
        term_of = np.frombuffer(targets, dtype=np.int32).astype(np.int64) if len(targets) else np.empty(0, np.int64)

        def expanded():
            """(index terms, their documents inside the chunk, document lengths) chunk by chunk; the
            token file is read, not mapped, so its pages do not stay in the process's memory."""
            with open(tokens, "rb") as f:
                for lens in chunks:
                    n_tok = int(lens.sum())
                    ids = np.fromfile(f, dtype=np.int32, count=n_tok).astype(np.int64)
                    yield _expand(ids, lens)

        def _expand(ids, lens):
            per = offsets[ids + 1] - offsets[ids]
            first = np.repeat(offsets[ids] - (np.cumsum(per) - per), per)
            terms = term_of[first + np.arange(int(per.sum()), dtype=np.int64)]
            docs = np.repeat(np.repeat(np.arange(len(lens), dtype=np.int64), lens), per)
            return terms, docs, np.bincount(docs, minlength=len(lens)).astype(np.int32)

        n_vocab = max(len(vocab), 1)
        df = np.zeros(n_vocab, dtype=np.int64)
        lengths = []
        # pass 2: each chunk's (term, document, tf) postings, sorted by term then document, appended
        # to three run files; the token file is done with afterwards
        runs = [Path(tmp) / f"{name}.run" for name in ("terms", "docs", "tf")]
        bounds = [0]  # where each chunk's postings start in the run files
        doc0 = 0
        with open(runs[0], "wb") as ft, open(runs[1], "wb") as fd, open(runs[2], "wb") as ff:
            for terms, docs, lens in expanded():
                key, tf = _runs(np.sort((terms << 32) | (docs + doc0)))
                doc0 += len(lens)
                t = key >> 32
                df += np.bincount(t, minlength=n_vocab)
                t.astype(np.int32).tofile(ft)
                (key & 0xFFFFFFFF).astype(np.int64 if doc0 >= 2**31 else np.int32).tofile(fd)
                tf.astype(np.int32).tofile(ff)
                bounds.append(bounds[-1] + len(key))
                lengths.append(lens)
        tokens.unlink()
        dl = np.concatenate(lengths).astype(np.float32)
        avgdl = float(dl.mean()) if dl.mean() > 0 else 1.0
        idf = _idf(df, n_docs, cfg.method).astype(np.float32)
        nnz = int(df.sum())
        index_dtype = np.int32 if max(nnz, n_docs) < 2**31 else np.int64
        indptr = np.zeros(n_vocab + 1, dtype=index_dtype)
        np.cumsum(df, out=indptr[1:])
        del df
        (out / "params.json").unlink(missing_ok=True)
        _write_csc(out, runs, bounds, indptr, index_dtype, dl, avgdl, idf, cfg)

    _write_bm25s_files(out, cfg, indptr, vocab, n_docs)
    (out / DECOMPOUND_FILE).unlink(missing_ok=True)
    if decompounder is not None:
        decompounder.save(out)
    write_params(
        out,
        ARTIFACT,
        "lexrag.index.lexical.build_bm25",
        BM25Index.expected_params(cfg),
        n_docs=n_docs,
        vocab_size=len(vocab),
        nnz=nnz,
        corpus_id=corpus_id,
        bm25s_version=bm25s.__version__,
    )
    retriever = bm25s.BM25.load(out, mmap=True, show_progress=False, verbosity=0)
    return BM25Index(retriever, analyzer, read_params(out, ARTIFACT))


POSTINGS_PER_BLOCK = 1 << 22  # postings gathered and written at a time: bounds the final write's memory


def _write_csc(out: Path, runs: list[Path], bounds: list[int], indptr: np.ndarray, index_dtype, dl: np.ndarray,
               avgdl: float, idf: np.ndarray, cfg: LexicalConfig) -> None:
    """The CSC ``data`` and ``indices`` files, written front to back one block of term columns at a
    time: each chunk's postings of those terms are read from the run files (sorted by term, and
    the chunks in document order, so each column's documents rise) and placed into the block, so
    neither array is ever whole in memory."""
    n_vocab, nnz = len(indptr) - 1, int(indptr[-1])
    doc_dtype = np.int64 if len(dl) >= 2**31 else np.int32
    # block edges: term ids where the running posting count crosses a multiple of the block size
    edges = np.unique(np.r_[0, np.searchsorted(indptr, np.arange(POSTINGS_PER_BLOCK, nnz, POSTINGS_PER_BLOCK), "right") - 1,
                            n_vocab])
    # where each block starts in each chunk's postings: one sequential read of the term run
    cuts = np.empty((len(bounds) - 1, len(edges)), dtype=np.int64)
    with open(runs[0], "rb") as fterm:
        for c, (lo_c, hi_c) in enumerate(zip(bounds[:-1], bounds[1:])):
            cuts[c] = lo_c + np.searchsorted(_read_run(fterm, np.int32, lo_c, hi_c - lo_c), edges)
    with open(out / "data.csc.index.npy", "wb") as fdata, open(out / "indices.csc.index.npy", "wb") as findex, \
            open(runs[0], "rb") as fterm, open(runs[1], "rb") as fdoc, open(runs[2], "rb") as ftf:
        np.lib.format.write_array_header_1_0(fdata, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                                     "fortran_order": False, "shape": (nnz,)})
        np.lib.format.write_array_header_1_0(findex, {"descr": np.lib.format.dtype_to_descr(np.dtype(index_dtype)),
                                                      "fortran_order": False, "shape": (nnz,)})
        for e, (ta, tb) in enumerate(zip(edges[:-1], edges[1:])):
            base = int(indptr[ta])
            size = int(indptr[tb]) - base
            if size == 0:
                continue
            data = np.empty(size, dtype=np.float32)
            indices = np.empty(size, dtype=index_dtype)
            pos = indptr[ta:tb].astype(np.int64) - base
            for lo, hi in cuts[:, e : e + 2]:
                if hi == lo:
                    continue
                terms = _read_run(fterm, np.int32, lo, hi - lo).astype(np.int64)
                d = _read_run(fdoc, doc_dtype, lo, hi - lo)
                tf = _read_run(ftf, np.int32, lo, hi - lo)
                first = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]])
                run = np.diff(np.r_[first, len(terms)])
                dest = pos[terms - ta] + (np.arange(len(terms)) - np.repeat(first, run))
                data[dest] = _tfc(tf.astype(np.float32), dl[d], avgdl, cfg.k1, cfg.b, cfg.method) * idf[terms]
                indices[dest] = d
                pos[terms[first] - ta] += run
            data.tofile(fdata)
            indices.tofile(findex)


def _read_run(f, dtype, start: int, count: int) -> np.ndarray:
    """``count`` values of a run file from value ``start`` (read, not mapped: nothing stays resident)."""
    f.seek(start * np.dtype(dtype).itemsize)
    return np.fromfile(f, dtype=dtype, count=count)


def _write_bm25s_files(out: Path, cfg: LexicalConfig, indptr: np.ndarray, vocab: dict[str, int], n_docs: int) -> None:
    """The rest of bm25s's index layout beside the CSC files: ``indptr``, the vocabulary and its
    parameters, as ``bm25s.BM25.save`` writes them, so ``bm25s.BM25.load`` reads the folder."""
    np.save(out / "indptr.csc.index.npy", indptr)
    (out / "nonoccurrence_array.index.npy").unlink(missing_ok=True)
    from bm25s.utils import json_functions  # what BM25.save writes the vocabulary with

    with open(out / "vocab.index.json", "w", encoding="utf-8") as f:
        f.write(json_functions.dumps(vocab, ensure_ascii=False))
    r = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=cfg.method)
    with open(out / "params.index.json", "w") as f:
        json.dump(dict(k1=r.k1, b=r.b, delta=r.delta, method=r.method, idf_method=r.idf_method, dtype=r.dtype,
                       int_dtype=r.int_dtype, num_docs=n_docs, version=bm25s.__version__, backend=r.backend), f, indent=4)


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
        if corpus_id is not None and params.get("corpus_id") != corpus_id:
            raise ArtifactError(
                f"BM25 index at {folder} was built over corpus {params.get('corpus_id')!r}, "
                f"but the loaded corpus is {corpus_id!r}; rebuild the index"
            )
        with reading(ARTIFACT, folder):
            retriever = bm25s.BM25.load(folder, mmap=mmap, show_progress=False, verbosity=0)
            sc = retriever.scores
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
        if n_docs is not None and indexed != n_docs:  # a copy over another corpus, whatever its params say
            raise ArtifactError(f"BM25 index at {folder} covers {indexed} documents, the loaded corpus has {n_docs}; "
                                f"{rebuild_hint(ARTIFACT)}")
        return cls(retriever, Analyzer(cfg.stemmer, cfg.min_token_len, decompounder=decompounder), params)

    def scores(self, text: str, dedup: bool = True, max_terms: int = 0, question_weight: int = 1,
               cache: bool = True) -> np.ndarray | None:
        """BM25 score of every document for ``text`` (None when no query term is indexed).
        ``dedup`` counts each query term once, so a long query that repeats a word does not
        drown its other terms; ``max_terms`` (0: all) keeps only that many distinct terms, the
        rarest in the corpus (a long case story keeps its legal vocabulary, not its narrative);
        ``question_weight`` counts the terms of the question sentences (those ending in "?")
        that many times, so the question asked outweighs the story told before it.  A word
        written ``word^0.5`` (Lucene's boost syntax) counts its terms with that weight: the
        dictionary variant weights each of a word's German senses by one over their number.

        With ``cache`` the result is kept (read-only) among the last ``cache_size`` (what
        :data:`SCORE_CACHE_BYTES` holds): each stage runs over all the questions before the next,
        and four of them (BM25, statutes, articles, graph) ask for the same question's scores;
        a query asked once (feedback's expanded question) passes ``cache=False``."""
        hit = self._scored(text, dedup, max_terms, question_weight, cache)
        return None if hit is None else hit[0]

    def _scored(self, text: str, dedup: bool, max_terms: int, question_weight: int,
                cache: bool) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(scores, touched documents) of a query, through the cache (see :meth:`scores`)."""
        key = (text, dedup, max_terms, question_weight)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        weights = self.query_terms(text, dedup, max_terms, question_weight)
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
        for d in np.linspace(0, n - 1, num=min(samples, n), dtype=np.int64):
            text = corpus.texts([int(d)])[0]
            terms = [vocab[t] for t in dict.fromkeys(self.analyzer(text or "")) if t in vocab][:3]
            for j in terms:
                col = indices[int(indptr[j]):int(indptr[j + 1])]
                k = int(np.searchsorted(col, d))
                if k >= len(col) or int(col[k]) != int(d):
                    raise ArtifactError(f"BM25 index {folder}: document {int(d)} is not in the postings of its own words: "
                                        f"the index was built over other texts than this corpus; {rebuild_hint(ARTIFACT)}")

    def query_terms(self, text: str, dedup: bool = True, max_terms: int = 0, question_weight: int = 1) -> dict[int, float]:
        """Indexed term id -> weight of a query (see :meth:`scores`), in the order of first use."""
        vocab = self.retriever.vocab_dict
        weights: dict[int, float] = {}
        last = 0
        pieces: list[tuple[str, float]] = []
        for m in _BOOST.finditer(text):
            pieces += [(text[last:m.start()], 1.0), (m.group(1), float(m.group(2)))]
            last = m.end()
        pieces.append((text[last:], 1.0))
        for part, w in pieces:
            for t in self.analyzer(part):
                j = vocab.get(t)
                if j is not None and w > 0:
                    weights[j] = max(weights.get(j, 0.0), w) if dedup else weights.get(j, 0.0) + w
        if max_terms and len(weights) > max_terms:
            indptr = self.retriever.scores["indptr"]
            keep = set(sorted(weights, key=lambda j: (int(indptr[j + 1] - indptr[j]), j))[:max_terms])
            weights = {j: w for j, w in weights.items() if j in keep}
        if question_weight > 1 and weights:
            asked = {j for t in self.analyzer(_BOOST.sub(r"\1", " ".join(_QUESTION.findall(text)))) if (j := vocab.get(t)) in weights}
            weights = {j: w * question_weight if j in asked else w for j, w in weights.items()}
        return weights

    def _accumulate(self, weights: dict[int, float]) -> tuple[np.ndarray, np.ndarray | None]:
        """Σ weight × BM25 column over the query's terms, accumulated in float32 over their postings
        in term order as bm25s' ``get_scores_from_ids`` does (a term there n times is weight n here),
        and the documents it touched (see :func:`lexrag.index.bm25_kernel.accumulate`)."""
        sc = self.retriever.scores
        return bm25_kernel.accumulate(sc["data"], sc["indices"], sc["indptr"], weights, self.n_docs)

    def query_scores(self, text: str, lc: LexicalConfig, cache: bool = True) -> np.ndarray | None:
        """:meth:`scores` of a question with the query settings of ``lc`` (every stage that
        searches the question asks through here, so they all see the same query)."""
        return self.scores(text, lc.query_dedup, 0, lc.question_weight, cache)

    def query_search(self, text: str, lc: LexicalConfig, k: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` of a question with the query settings of ``lc`` (the score vector it
        makes is the one :meth:`query_scores` gives the other stages)."""
        return self.search(text, k, lc.query_dedup, 0, lc.question_weight)

    def search(self, text: str, k: int, dedup: bool = True, max_terms: int = 0, question_weight: int = 1,
               cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents with a positive score, best first (ties as :meth:`top`)."""
        hit = self._scored(text, dedup, max_terms, question_weight, cache)
        if hit is None or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return bm25_kernel.top_k(hit[0], k, hit[1])

    def search_terms(self, weights: dict[int, float], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents of an analyzed query (term id -> weight, :meth:`query_terms`), uncached."""
        if not weights or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        scores, touched = self._accumulate(weights)
        return bm25_kernel.top_k(scores, k, touched)

    def search_many(self, texts: Sequence[str], k: int, dedup: bool = True, max_terms: int = 0, question_weight: int = 1,
                    threads: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search` of many queries, in their order, the same documents and scores; the
        scoring runs on ``threads`` threads (0: every core) with numba.  Nothing is cached
        (validation and tuning ask each query once)."""
        weights = [self.query_terms(t, dedup, max_terms, question_weight) for t in texts]
        sc = self.retriever.scores
        return bm25_kernel.top_k_many(sc["data"], sc["indices"], sc["indptr"], weights, self.n_docs, k, threads)

    @staticmethod
    def top(scores: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best documents of a score vector with a positive score, best first; ties by
        doc_id, at the k-th place too (the lowest ids of the tied scores are kept)."""
        if scores is None or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return bm25_kernel.top_k(scores, k)
