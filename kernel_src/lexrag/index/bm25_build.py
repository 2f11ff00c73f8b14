"""The BM25 build: a bm25s index folder computed in a streaming pass, for corpora whose token lists
do not fit in memory.

``bm25s.BM25.index`` holds every token list of the corpus in Python lists, which does not fit
2.47M documents in memory; :func:`build_bm25` computes the same score matrix (bm25s' eager scoring,
same idf and tf formulas) from per-chunk postings on disk, sorted by term into run files, and
writes the CSC files a block of term columns at a time.  A test checks equality with
``bm25s.BM25.index`` on a small corpus.
"""

from __future__ import annotations

import json
import logging
import tempfile
from array import array
from pathlib import Path
from typing import Iterable, Sequence

import bm25s
import numpy as np

from lexrag.artifacts import ArtifactError, read_params, write_params
from lexrag.io.publish import publishes
from lexrag.config import LexicalConfig
from lexrag.index import bm25_kernel
from lexrag.index.analyzer import Analyzer
from lexrag.index.decompound import FILE as DECOMPOUND_FILE
from lexrag.index.decompound import Decompounder
from lexrag.index.lexical import ARTIFACT, BM25Index
from lexrag.registry import bind_build

log = logging.getLogger(__name__)

__all__ = ["build_bm25"]


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs (``np.unique`` without its
    hash path, which numpy >= 2.3 takes for plain ``unique`` and which is several times slower here)."""
    if len(keys) == 0:
        return keys, np.empty(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], np.diff(np.r_[first, len(keys)])


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
        idf = bm25_kernel.idf_of(df, n_docs, cfg.method).astype(np.float32)
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
        "lexrag.index.bm25_build.build_bm25",
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


def build_bm25_step(cfg, dest: Path, inputs):
    from lexrag.artifacts import corpus_id
    from lexrag.index.corpus import Corpus

    corpus = inputs.corpus or Corpus(inputs.corpus_dir, lookups=False)
    absent = corpus.missing_fields(cfg.lexical.fields)
    if absent:  # said, not silent: the index is built, without what those fields would add
        log.warning("bm25: lexical.fields names %s, which the corpus lacks (it was built without --headings): indexed as "
                    "empty; build the corpus with --headings HEADINGS.csv (scripts/make_headings.py makes one) for the "
                    "statute headings", " and ".join(absent))
    return build_bm25(corpus.iter_texts(fields=cfg.lexical.fields), dest, cfg.lexical, corpus_id=corpus_id(inputs.corpus_dir),
                      progress=cfg.runtime.progress, n_docs_hint=len(corpus))


SPEC = bind_build("bm25", build_bm25_step)
