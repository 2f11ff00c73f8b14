"""Unified corpus: stream ``laws_de.csv`` and ``court_considerations.csv`` into one parquet file.

One row per document: ``doc_id`` (int64, dense from 0), ``citation`` (the corpus string as
written), ``text``, ``title`` (laws only), ``source`` (law | bge | docket), ``parent`` (article
without ``Abs.``, decision without ``E.``), ``lang`` (de | fr | it | ''; a stopword guess for
court text).  Input is read row by row with the csv module and written in row groups, so memory
stays bounded at 2.47M rows.  Nothing is lost silently: exact duplicate rows (same citation and
text) are dropped and counted; malformed rows (wrong field count, empty or unparseable citation,
csv errors) are dropped, counted and quoted with their line number; rows that are not valid
UTF-8 are decoded as cp1252 (or latin-1), kept, counted and quoted.

With a headings file (``citation,article_heading,path``: each law key's article heading, its
Marginalie, and the headings above it) the table gains two columns, ``heading`` and ``path``, that
BM25 can index beside the text (``lexical.fields``); without one the corpus is written exactly as
before.  The headings file, the list of law keys and the abbreviations file are read by
:mod:`lexrag.index.corpus_inputs`.
"""


from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from array import array
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lexrag import citations as cit
from lexrag.artifacts import write_params
from lexrag.io.hashcache import sha256_file
from lexrag.io.publish import publishes
from lexrag.config import CorpusConfig
from lexrag.io.csvio import CsvInputError as CorpusError
from lexrag.io.csvio import FileReport, read_csv_rows
from lexrag.index.corpus_inputs import MAX_ERROR_EXAMPLES, Headings, read_abbreviations, read_headings, read_key_rows

__all__ = ["build_corpus", "CorpusError", "guess_lang", "ARTIFACT", "CORPUS_FILE", "REPORT_FILE", "TEXTS_FILE", "OFFSETS_FILE",
           "KEYS_FILE", "ALIASES_FILE", "SCHEMA", "KEYS_SCHEMA", "HEADING_COLUMNS", "HEADINGS_SCHEMA"]

log = logging.getLogger(__name__)


ARTIFACT = "corpus"
CORPUS_FILE = "corpus.parquet"
REPORT_FILE = "build_report.json"
TEXTS_FILE = "texts.bin"
OFFSETS_FILE = "text_offsets.npy"
KEYS_FILE = "citation_keys.parquet"  # per document: the lookup key of its citation and its law code, as parsed at build
ALIASES_FILE = "code_aliases.json"  # other names of the corpus's law codes (French, Italian), when built with them

SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("citation", pa.string()),
        ("text", pa.string()),
        ("title", pa.string()),
        ("source", pa.string()),
        ("parent", pa.string()),
        ("lang", pa.string()),
    ]
)

KEYS_SCHEMA = pa.schema([("key", pa.string()), ("code", pa.string())])
HEADING_COLUMNS = ("heading", "path")  # written only by a build with a headings file
HEADINGS_SCHEMA = pa.schema([*SCHEMA, *((c, pa.string()) for c in HEADING_COLUMNS)])

_LANG_WORDS = {
    "de": {"der", "die", "das", "und", "nicht", "ist", "des", "dem", "mit", "eine", "zu", "auf", "wird"},
    "fr": {"le", "la", "les", "et", "des", "est", "une", "du", "que", "pas", "qui", "dans", "pour"},
    "it": {"il", "che", "della", "non", "per", "una", "del", "sono", "alla", "gli", "di", "nel", "è"},
}
_WORD = re.compile(r"[^\W\d_]+")


def guess_lang(text: str, max_words: int = 200) -> str:
    """de / fr / it by stopword hits over the first words; '' when there is no evidence."""
    counts = Counter(_WORD.findall(text[:1200].lower())[:max_words])
    hits = {lang: sum(counts[w] for w in ws & counts.keys()) for lang, ws in _LANG_WORDS.items()}
    best = max(hits, key=hits.get)  # type: ignore[arg-type]
    return best if hits[best] > 0 else ""


class _Writer:
    """Parquet in row groups of ``chunk_rows``, plus the texts as one UTF-8 blob with offsets
    (``texts.bin``, ``text_offsets.npy``) for random access by doc_id (the reranker reads the
    texts of a few hundred documents per query)."""

    def __init__(self, folder: Path, chunk_rows: int, schema: pa.Schema = SCHEMA):
        self.folder = folder
        self.schema = schema
        self.writer = pq.ParquetWriter(folder / (CORPUS_FILE + ".tmp"), schema, compression="zstd")
        self.blob = open(folder / (TEXTS_FILE + ".tmp"), "wb")
        self.keys = pq.ParquetWriter(folder / (KEYS_FILE + ".tmp"), KEYS_SCHEMA, compression="zstd")
        self.key_buf: dict[str, list] = {"key": [], "code": []}
        self.offsets = array("Q", [0])
        self.chunk_rows = chunk_rows
        self.buf: dict[str, list] = {n: [] for n in schema.names}
        self.n = 0

    def add(self, key: str, code: str, **row: object) -> None:
        row["doc_id"] = self.n
        self.key_buf["key"].append(key)
        self.key_buf["code"].append(code)
        for k in self.schema.names:
            self.buf[k].append(row[k])
        self.n += 1
        if len(self.buf["doc_id"]) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        if self.buf["doc_id"]:
            self.writer.write_table(pa.table(self.buf, schema=self.schema))
            self.keys.write_table(pa.table(self.key_buf, schema=KEYS_SCHEMA))
            self.key_buf = {"key": [], "code": []}
            pos = self.offsets[-1]
            for text in self.buf["text"]:
                b = text.encode("utf-8", "surrogatepass")
                self.blob.write(b)
                pos += len(b)
                self.offsets.append(pos)
            self.buf = {n: [] for n in self.schema.names}

    def close(self) -> None:
        self.flush()
        self.writer.close()
        self.keys.close()
        self.blob.close()
        np.save(self.folder / OFFSETS_FILE, np.frombuffer(self.offsets, dtype=np.uint64), allow_pickle=False)
        os.replace(self.folder / (TEXTS_FILE + ".tmp"), self.folder / TEXTS_FILE)
        os.replace(self.folder / (KEYS_FILE + ".tmp"), self.folder / KEYS_FILE)
        os.replace(self.folder / (CORPUS_FILE + ".tmp"), self.folder / CORPUS_FILE)



_INVISIBLE = re.compile("[\ufeff\u200b\u200c\u200d\u2060]")
_ODD_SPACE = re.compile("[\t\n\r\v\f\u00a0\u2007\u202f\u2000-\u200a\u3000]")  # any space but the plain one


def _ingest(
    path: Path, kind: str, w: _Writer, seen: set[int], cfg: CorpusConfig, progress: bool,
    laws_seen: dict[str, str], keys_only: bool = False, headings: Headings | None = None,
) -> FileReport:
    report = FileReport(file=path.name, max_examples=MAX_ERROR_EXAMPLES)
    rows = read_key_rows(path, report) if keys_only else read_csv_rows(path, ("citation", "text"), report, strict=cfg.strict_quotes)
    if progress:
        from tqdm.auto import tqdm

        rows = tqdm(rows, desc=f"corpus {path.name}", unit="rows", mininterval=5)
    for line, row in rows:
        citation = row["citation"].strip()
        plain = _ODD_SPACE.sub(" ", _INVISIBLE.sub("", citation))  # no key holds one (doubled plain spaces are kept: some do)
        if plain != citation:
            report.citation_repaired += 1
            report.note("repaired", line, f"citation {citation[:80]!r} written as {plain[:80]!r} (the competition's "
                        "citations hold plain spaces only)")
            citation = plain
        text = row["text"]
        if not citation:
            report.malformed += 1
            report.note("malformed", line, "empty citation")
            continue
        parsed = cit.try_parse(citation)
        if parsed is None or (kind == "law") != (parsed.kind == "law"):
            report.malformed += 1
            report.note("malformed", line, f"not a {'law' if kind == 'law' else 'court'} citation: {citation[:80]!r}")
            continue
        if keys_only and citation in laws_seen:
            report.duplicates += 1
            continue
        h = int.from_bytes(hashlib.blake2b(f"{citation}\x00{text}".encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
        if h in seen:
            report.duplicates += 1
            continue
        seen.add(h)
        if not text.strip():
            report.empty_text += 1
        if kind == "law":
            if citation in laws_seen and not keys_only:  # two texts for one key: which is right cannot be known here
                report.same_key += 1
                report.note("same_key", line, f"{citation!r} was given before with other text; both texts kept as "
                            "documents of that citation: remove the wrong row")
            laws_seen[citation] = parsed.code  # the codes the aliases are kept for, parsed once
        article = parsed.parent().format()
        extra = {}
        if headings is not None:
            extra = dict(zip(HEADING_COLUMNS, headings.of(citation, article) if kind == "law" else ("", "")))
        w.add(
            key=parsed.key(),
            code=parsed.code if kind == "law" else "",
            citation=citation,
            text=text,
            title=row.get("title", "") if kind == "law" else "",
            source=parsed.kind,
            parent=article,
            lang="de" if kind == "law" else guess_lang(text),
            **extra,
        )
        report.written += 1
    return report


@publishes("out_dir")
def build_corpus(
    out_dir: str | Path,
    laws: str | Path,
    courts: str | Path | None = None,
    cfg: CorpusConfig | None = None,
    progress: bool = False,
    law_keys: str | Path | None = None,
    abbreviations: str | Path | None = None,
    headings: str | Path | None = None,
) -> dict:
    """Build the corpus artifact in ``out_dir``; returns the build report (also written as JSON).

    ``law_keys`` (one citation per line, e.g. ``laws_de_citations.txt``) adds every law key
    missing from ``laws`` as a document with empty text: a valid output string that citation
    seeds and the citation field of BM25 can still reach (the local laws file lacks 35% of the
    competition's keys' text).  ``abbreviations`` (the competition's ``abbrev-translations.json``)
    writes ``code_aliases.json``: the French and Italian abbreviations of the corpus's law codes,
    so that "Art. 17 LAI" in a question finds "Art. 17 IVG" (:func:`lexrag.citations.code_aliases`).
    ``headings`` (a ``citation,article_heading,path`` file, :func:`read_headings`) adds the
    ``heading`` and ``path`` columns: each law document gets its own key's pair, else its
    article's; the report counts the documents with and without one, and the file's sha256 is
    among the corpus's sources."""
    cfg = cfg or CorpusConfig()
    out = Path(out_dir)
    pairs = read_abbreviations(abbreviations) if abbreviations else None  # a bad file fails before anything is written
    heads = read_headings(headings, cfg) if headings else None
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").unlink(missing_ok=True)
    (out / ALIASES_FILE).unlink(missing_ok=True)
    schema = HEADINGS_SCHEMA if heads is not None else SCHEMA
    w = _Writer(out, cfg.chunk_rows, schema)
    seen: set[int] = set()
    laws_seen: dict[str, str] = {}  # law citation -> its code
    reports = []
    try:
        reports.append(_ingest(Path(laws), "law", w, seen, cfg, progress, laws_seen, headings=heads))
        if law_keys:
            reports.append(_ingest(Path(law_keys), "law", w, seen, cfg, progress, laws_seen, keys_only=True, headings=heads))
        if courts:
            reports.append(_ingest(Path(courts), "court", w, seen, cfg, progress, laws_seen, headings=heads))
    finally:
        w.close()
    _refuse_unusable(reports, [("laws", Path(laws))] + ([("keys", Path(law_keys))] if law_keys else [])
                     + ([("courts", Path(courts))] if courts else []))
    report = {"files": [r.__dict__ for r in reports], "n_docs": w.n}
    if heads is not None:
        report["headings"] = heads.summary()
        got = heads.docs["heading"] + heads.docs["path only"]
        (log.info if got else log.warning)(
            "%s: %d of %d law documents got a heading or path (%d a heading, %d a path only), %d none; %d of its %d keys "
            "match no document%s", heads.path.name, got, sum(heads.docs.values()), heads.docs["heading"],
            heads.docs["path only"], heads.docs["none"], len(heads.by_key) - len(heads.used), len(heads.by_key),
            "" if got else ": is it the headings file of these laws?")
    if pairs is not None:
        aliases = cit.code_aliases(pairs, set(laws_seen.values()))
        (out / ALIASES_FILE).write_text(json.dumps(aliases, indent=1, ensure_ascii=False, sort_keys=True), encoding="utf-8")
        report["code_aliases"] = len(aliases)
        if aliases:
            log.info("%s: %d aliases of the corpus's law codes", Path(abbreviations).name, len(aliases))
        else:  # asked for, but nothing comes of it: questions citing "Art. 17 LAI" find nothing for it
            log.warning("%s: the --abbreviations file gives no alias of the corpus's law codes (%s): the corpus is built "
                        "without them (an empty file, or one for other codes?)", abbreviations,
                        "no entries" if not pairs else f"{len(pairs)} pairs, none for a code of the corpus")
    for r in report["files"]:  # what a reader of the report needs: counts and examples, not the reader's settings
        r.pop("max_examples", None)
        r.pop("columns", None)
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    sources = {Path(laws).name: sha256_file(laws)}
    if law_keys:
        sources[Path(law_keys).name] = sha256_file(law_keys)
    if courts:
        sources[Path(courts).name] = sha256_file(courts)
    if heads is not None:  # the headings change what BM25 indexes: another corpus
        sources[heads.path.name] = heads.sha256
    # the aliases are recorded beside the sources, not among them: they change no document, so the
    # corpus keeps its identity (corpus_id) and the indexes built over it stay valid
    extra = {"aliases": {Path(abbreviations).name: sha256_file(abbreviations), "count": report["code_aliases"]}} if abbreviations else {}
    write_params(out, ARTIFACT, "lexrag.index.corpus.build_corpus", {"schema": schema.names}, n_docs=w.n, sources=sources, **extra)
    for r in reports:  # a file with dropped or repaired rows is a warning (with -q too), with its first lines
        lossy = r.malformed or r.lines_lost or r.encoding_repaired or r.same_key or r.citation_repaired
        (log.warning if lossy else log.info)("%s%s", r.summary(), f"; every one is listed in {REPORT_FILE}" if lossy else "")
        for ex in r.examples[:5]:
            (log.warning if lossy else log.info)("  line %s: %s: %s", ex["line"], ex["kind"], ex["reason"])
    for r, textual in zip(reports, [True] + ([False] if law_keys else []) + ([True] if courts else [])):
        if textual and r.written and r.empty_text >= r.written:  # a keys file has no text by design
            log.warning("%s: every one of its %d documents has empty text, so only their citations can be found (BM25 "
                        "and the encoder find nothing by content): check the file's text column", r.file, r.written)
    return report


def _examples(r: FileReport, n: int = 3) -> str:
    return "; ".join(f"line {ex['line']}: {ex['reason']}" for ex in r.examples[:n])


def _refuse_unusable(reports: list[FileReport], inputs: list[tuple[str, Path]]) -> None:
    """A build that gives no document, or an input file none of whose rows is a citation of its
    kind, is the wrong file (or a broken one): an error naming it and its first rejected rows,
    before anything is published.  A laws file with a header alone is allowed beside a court or
    keys file (a court-only corpus).  ``inputs``: (kind, path) per report: laws | keys | courts."""
    expected = {"keys": "a law citation key such as 'Art. 1 Abs. 1 OR' (one per line)",
                "courts": "a court citation such as 'BGE 145 II 32 E. 3.1' or '5A_800/2019 E. 2.'"}
    if not any(r.written for r in reports):  # nothing to index at all
        raise CorpusError(f"no document in {', '.join(str(p) for _, p in inputs)}: "
                          + "; ".join(f"{p.name}: {r.rows_read} rows read, {r.malformed} malformed, {r.duplicates} duplicates"
                                      + (f" ({_examples(r)})" if r.examples else "") for r, (_, p) in zip(reports, inputs))
                          + "; a laws file needs columns citation,text,title with law citations such as 'Art. 1 Abs. 1 OR'")
    for r, (kind, path) in zip(reports, inputs):
        if kind == "laws" and r.rows_read and r.malformed == r.rows_read:  # a header alone is allowed beside courts or keys
            raise CorpusError(f"{path}: no usable law row: all {r.rows_read} rows rejected ({_examples(r)}); expected "
                              "columns citation,text,title with law citations such as 'Art. 1 Abs. 1 OR'")
        if kind != "laws" and r.rows_read and r.malformed == r.rows_read:
            raise CorpusError(f"{path}: none of its {r.rows_read} rows is {expected[kind]} ({_examples(r)})")
        if kind != "laws" and not r.rows_read:  # given but empty: the build goes on without what it was given for
            log.warning("%s: the --%s file holds no rows: the corpus is built without it (an empty or truncated file?)",
                        path, "law-keys" if kind == "keys" else "courts")
