"""The English route: a BM25 index of the laws' English texts, keyed by the German citations.

The Federal Chancellery publishes English translations of the major federal acts ("for
information purposes only"); a file of them keyed by the competition's German keys
(``citation,text,title``: ``Art. 11 Abs. 2 OR``, the English paragraph, the English article
heading) lets an English question be searched as it is written, beside the dictionary's word by
word German.  The index is its own artifact (``bm25_en``): the English rows in a BM25 index of
their own (English Snowball stems and stop words, no compound split), and per row the corpus
document of its citation (``doc_ids.npy``), so the hits are corpus documents and every emitted
string stays a corpus citation.  Whether the translations may be redistributed is not settled:
the artifact's dataset says so and stays private.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from lexrag.artifacts import (ArtifactError, check_corpus_id, corpus_id, read_params, reading, rebuild_hint,
                              write_params)
from lexrag.io.hashcache import sha256_file
from lexrag.config.sections import LexicalConfig
from lexrag.io.csvio import CsvInputError, FileReport, read_csv_rows
from lexrag.registry import ArtifactSpec, declare

__all__ = ["ARTIFACT", "EnglishIndex", "build_english", "build_english_step", "load_english_step", "english_config"]

log = logging.getLogger(__name__)

ARTIFACT = "bm25_en"
DOC_IDS = "doc_ids.npy"
INDEX = "index"  # the BM25 folder inside the artifact (bm25s's layout, as lexrag.index.lexical reads it)
LICENCE = ("unknown: English translations of Swiss federal acts published by the Federal Chancellery for information "
           "purposes only; whether Art. 5 URG covers them is not settled: keep the dataset private")


def english_config(top_k: int = 100) -> LexicalConfig:
    """The BM25 settings of the English index: English stems and stop words, no compound split,
    the English heading and text as one document."""
    return LexicalConfig(stemmer="english", decompound=False, fields=["title", "text"], top_k=top_k, code_vote=0.0,
                         numbered_code_weight=1.0)


def read_laws_en(path: str | Path, corpus) -> tuple[list[str], list[int], FileReport]:
    """The texts of ``path`` (``citation,text,title``) whose citation is a law document of
    ``corpus``, with that document's id; a row whose citation the corpus lacks, or given again,
    is counted and quoted (line and reason) in the report, never silently dropped."""
    path = Path(path)
    report = FileReport(file=path.name)
    texts: list[str] = []
    docs: list[int] = []
    seen: set[str] = set()
    try:  # read row by row: a row the CSV reader refuses is named with its line, the rows before it are counted
        for line, row in read_csv_rows(path, ("citation", "text"), report):
            key = " ".join(row["citation"].split())
            text = " ".join(v for v in (row.get("title", ""), row["text"]) if v and v.strip())
            hits = corpus.docs_of(key) if key else []
            if not hits or corpus.sources[hits[0]] != "law":
                report.malformed += 1
                report.note("malformed", line, f"no law citation of the corpus: {key[:80]!r}")
            elif key in seen:
                report.duplicates += 1
                report.note("duplicate", line, f"{key!r} given again; the first is kept")
            elif not text:
                report.empty_text += 1
            else:
                seen.add(key)
                texts.append(text)
                docs.append(hits[0])
                report.written += 1
    except CsvInputError as e:
        raise CsvInputError(f"--laws-en {e} (give a CSV with columns citation,text[,title], keyed by the German law "
                            "citations of the corpus)") from None
    return texts, docs, report


def build_english(laws_en: str | Path, corpus, out: str | Path, top_k: int = 100, progress: bool = False) -> "EnglishIndex":
    """Build the ``bm25_en`` artifact in ``out`` from the English law texts of ``laws_en`` over
    ``corpus`` (a :class:`lexrag.index.corpus.Corpus`).  A file none of whose rows is a law of
    the corpus is refused: it is of other keys (not the German competition keys?)."""
    from lexrag.index.bm25_build import build_bm25

    out = Path(out)
    texts, docs, report = read_laws_en(laws_en, corpus)
    if not texts:
        raise CsvInputError(f"--laws-en {laws_en}: none of its {report.rows_read} rows is a law paragraph of the corpus with "
                            f"text (e.g. {'; '.join(x['reason'] for x in report.examples[:2]) or 'no rows'}); give English "
                            "texts keyed by the German citations ('Art. 11 Abs. 2 OR')")
    if report.malformed or report.duplicates:
        log.warning("--laws-en %s: %d of %d rows left out (%d citations the corpus lacks, %d given again); first: %s", laws_en,
                    report.malformed + report.duplicates, report.rows_read, report.malformed, report.duplicates,
                    "; ".join(f"line {x['line']}: {x['reason']}" for x in report.examples[:3]))
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").unlink(missing_ok=True)
    cfg = english_config(top_k)
    build_bm25([texts], out / INDEX, cfg, corpus_id=corpus_id(corpus.folder), progress=progress, n_docs_hint=len(texts))
    np.save(out / DOC_IDS, np.asarray(docs, dtype=np.int64), allow_pickle=False)
    laws = sum(1 for s in corpus.sources if s == "law")
    write_params(out, ARTIFACT, "lexrag.index.english.build_english", {"stemmer": cfg.stemmer, "fields": cfg.fields},
                 n_docs=len(texts), corpus_id=corpus_id(corpus.folder), sources={Path(laws_en).name: sha256_file(laws_en)},
                 licence=LICENCE, license_id="unknown", coverage={"laws_with_english": len(texts), "laws": laws},
                 report={k: v for k, v in report.__dict__.items() if k not in ("max_examples", "columns")})
    log.info("bm25_en: %d English texts of %d law documents (%.1f%%) from %s", len(texts), laws, 100 * len(texts) / max(laws, 1),
             laws_en)
    return EnglishIndex.load(out, corpus)


def _as_english(e: ArtifactError) -> ArtifactError:
    """A refusal of the BM25 index inside ``bm25_en`` (loaded as a ``bm25`` index), with the command
    that rebuilds it: the ``bm25_en`` build, not the German index's."""
    from lexrag.index.lexical import ARTIFACT as BM25

    text = str(e).replace(rebuild_hint(BM25), rebuild_hint(ARTIFACT))
    text = text.replace(f"artifact {BM25!r}", f"artifact {ARTIFACT!r} (its {INDEX}/ folder)")
    try:
        return type(e)(text)
    except TypeError:  # a subclass that takes other arguments: the plain error
        return ArtifactError(text)


class EnglishIndex:
    """The English BM25 index and the corpus document of each of its rows."""

    def __init__(self, index, doc_ids: np.ndarray, params: dict):
        self.index, self.doc_ids, self.params = index, doc_ids, params

    @classmethod
    def load(cls, folder: str | Path, corpus) -> "EnglishIndex":
        """Load, refusing an index over another corpus and row ids outside it."""
        from lexrag.index.lexical import BM25Index

        folder = Path(folder)
        params = read_params(folder, ARTIFACT)
        check_corpus_id(folder, ARTIFACT, params.get("corpus_id"), corpus_id(corpus.folder))
        cfg = english_config()
        try:
            with reading(ARTIFACT, folder):
                index = BM25Index.load(folder / INDEX, cfg, n_docs=params.get("n_docs"))
                doc_ids = np.load(folder / DOC_IDS, allow_pickle=False)
        except ArtifactError as e:
            raise _as_english(e) from None
        if doc_ids.ndim != 1 or len(doc_ids) != index.n_docs or doc_ids.dtype.kind not in "iu" or \
                (len(doc_ids) and (int(doc_ids.min()) < 0 or int(doc_ids.max()) >= len(corpus))):
            raise ArtifactError(f"{folder / DOC_IDS}: not {index.n_docs} document ids of the corpus (damaged, or of another "
                                f"build); {rebuild_hint(ARTIFACT)}")
        return cls(index, doc_ids, params)

    def search(self, text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` corpus documents for an English ``text`` and their English BM25 scores.
        A query word counts as often as the question writes it (bm25s's plain query, unlike the
        German index's once per term): a long English question repeats its subject."""
        ids, scores = self.index.search(text, k, dedup=False)
        return self.doc_ids[np.asarray(ids, dtype=np.int64)], scores


def build_english_step(cfg, dest: Path, inputs) -> None:
    from lexrag.index.corpus import Corpus

    corpus = inputs.corpus or Corpus(inputs.corpus_dir)
    build_english(inputs.laws_en, corpus, dest, cfg.lexical.top_k, progress=cfg.runtime.progress)


def load_english_step(folder: Path, cfg, art) -> EnglishIndex:
    return EnglishIndex.load(folder, art.corpus)


SPEC = declare(ArtifactSpec(
    "bm25_en", ("corpus",), switch="english.enabled", needs_input="laws_en", reads=("laws_en",), build_with="laws_en",
    licence="own", dataset="lexrag-bm25-en", title="lexrag English law texts index (licence unknown, keep private)",
    description="a BM25 index of English translations of Swiss federal acts keyed by the German citations (--laws-en), "
                "searched with English questions (english.enabled); the translations are published by the Federal "
                "Chancellery for information purposes only and whether they may be redistributed is not settled, so this "
                "dataset's licence is unknown and it stays private; built from files the user has, never part of the MIT "
                "package",
    builder="python build_datasets.py --only bm25_en --laws-en laws_en.csv --out OUT", attr="bm25_en",
    build=build_english_step, load=load_english_step,
    rebuild="python -m lexrag build ... --laws-en laws_en.csv --out ARTIFACTS "
            "(or build_datasets.py --only corpus,bm25_en --laws-en laws_en.csv)"))
