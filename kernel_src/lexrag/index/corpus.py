"""The corpus artifact as a run reads it: :class:`Corpus` (columns, texts, the citation lookups).
It is built by :func:`lexrag.index.corpus_build.build_corpus` (re-exported here)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lexrag import citations as cit
from lexrag.artifacts import ArtifactError, check_params, read_params, reading, rebuild_hint
from lexrag.errors import short
from lexrag.registry import ArtifactSpec, declare
from lexrag.citations.index import CitationIndex
from lexrag.index.corpus_build import (  # noqa: F401  (the build's names are part of this module's interface)
    ALIASES_FILE,
    ARTIFACT,
    CORPUS_FILE,
    HEADING_COLUMNS,
    HEADINGS_SCHEMA,
    KEYS_FILE,
    KEYS_SCHEMA,
    OFFSETS_FILE,
    REPORT_FILE,
    SCHEMA,
    TEXTS_FILE,
    CorpusError,
    build_corpus,
    guess_lang,
    read_abbreviations,
)

__all__ = ["build_corpus", "Corpus", "CorpusError", "guess_lang", "read_abbreviations"]

log = logging.getLogger(__name__)


class Corpus:
    """The corpus artifact's metadata columns in memory (citations, sources, parents; no text).

    ``lookups``: build the citation lookups (:attr:`index`, :meth:`docs_of`) at load, from the
    keys the build parsed (``citation_keys.parquet``; a corpus built without it parses its
    citations here), so the first question does not pay for them; otherwise on first use."""

    def __init__(self, folder: str | Path, lookups: bool = True):
        self.folder = Path(folder)
        schema = read_params(self.folder, ARTIFACT).get("params", {}).get("schema")
        # built with a headings file, the table has two columns more (build_corpus)
        self.params = check_params(self.folder, ARTIFACT, {"schema": HEADINGS_SCHEMA.names if schema == HEADINGS_SCHEMA.names
                                                           else SCHEMA.names})
        self.has_headings = schema == HEADINGS_SCHEMA.names
        with reading(ARTIFACT, self.folder):
            table = pq.read_table(self.folder / CORPUS_FILE, columns=["doc_id", "citation", "source", "parent"])
        n = table.num_rows
        recorded = self.params.get("n_docs")
        if not isinstance(recorded, int) or isinstance(recorded, bool):
            raise ArtifactError(f"{self.folder / 'params.json'}: n_docs {short(recorded)} is not a whole number (damaged "
                                f"or edited); {rebuild_hint(ARTIFACT)}")
        if n != recorded:
            raise ArtifactError(f"{self.folder}: params.json says {recorded} docs, {CORPUS_FILE} has {n}; {rebuild_hint(ARTIFACT)}")
        self.citations: list[str] = table.column("citation").to_pylist()
        self.sources: list[str] = table.column("source").to_pylist()
        self.parents: list[str] = table.column("parent").to_pylist()
        self.aliases: dict[str, str] = {**cit.ENGLISH_ABBREVIATIONS, **self._read_aliases()}
        self._index: CitationIndex | None = None
        self._known: set[str] | None = None  # the citations with their spacing normalised, for lacks()
        self._first_doc: dict[str, int] | None = None  # citation -> its first document
        self._more_docs: dict[str, list[int]] = {}  # citation -> all its documents, for the few that repeat
        self._blob: np.ndarray | None = None
        self._offsets: np.ndarray | None = None
        if lookups:
            self.index  # noqa: B018 (built now)
            self.docs_of("")

    def __len__(self) -> int:
        return len(self.citations)

    def lacks(self, citations: Iterable[str]) -> list[str]:
        """Those of ``citations`` (in their order) that are no citation of this corpus, spacing
        aside: gold no run can find, trained or scored against as a miss."""
        if self._known is None:
            self._known = {" ".join(c.split()) for c in self.citations}
        return [c for c in citations if " ".join(c.split()) not in self._known]

    @property
    def aliases_digest(self) -> str:
        """Identity of :attr:`aliases`: the graph build reads court citations through them, so a
        graph records it and is refused over a corpus with other aliases."""
        return hashlib.sha256(json.dumps(self.aliases, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]

    def _read_aliases(self) -> dict[str, str]:
        """``code_aliases.json`` when the corpus was built with abbreviations (else nothing)."""
        path = self.folder / ALIASES_FILE
        if not path.is_file():
            return {}
        try:
            aliases = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ArtifactError(f"{path}: not a JSON object of alias -> law code ({e}); {rebuild_hint(ARTIFACT)}") from None
        if not isinstance(aliases, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()):
            raise ArtifactError(f"{path}: not a JSON object of alias -> law code; {rebuild_hint(ARTIFACT)}")
        return aliases

    @property
    def index(self) -> CitationIndex:
        """Citation lookup over the corpus's strings, with the other names of its law codes
        (English ones always, French and Italian ones when built with ``--abbreviations``)."""
        if self._index is None:
            path = self.folder / KEYS_FILE
            if path.is_file():  # the keys the build parsed: no citation is parsed again
                with reading(ARTIFACT, self.folder):
                    keys = pq.read_table(path)
                if keys.num_rows != len(self):
                    raise ArtifactError(f"{path}: {keys.num_rows} rows, the corpus has {len(self)}; {rebuild_hint(ARTIFACT)}")
                self._index = CitationIndex.from_parsed(self.citations, keys.column("key").to_pylist(), self.parents,
                                                            keys.column("code").to_pylist(), self.aliases)
            else:  # built before the keys were kept
                self._index = CitationIndex(self.citations, self.aliases)
        return self._index

    def docs_of(self, citation: str) -> list[int]:
        """doc_ids carrying exactly this corpus citation string (court citations can repeat)."""
        if self._first_doc is None:
            n = len(self.citations)
            # the first document of each citation (the last write of a key wins, so write backwards)
            first = dict(zip(reversed(self.citations), range(n - 1, -1, -1)))
            more: dict[str, list[int]] = {}
            if len(first) < n:
                for i, c in enumerate(self.citations):
                    j = first[c]
                    if j != i:
                        more.setdefault(c, [j]).append(i)
            self._first_doc, self._more_docs = first, more
        more = self._more_docs.get(citation)
        if more is not None:
            return list(more)
        d = self._first_doc.get(citation)
        return [] if d is None else [d]

    def column(self, name: str) -> list:
        """One column of the corpus table for every document (e.g. ``title``), read on demand."""
        with reading(ARTIFACT, self.folder):
            return pq.read_table(self.folder / CORPUS_FILE, columns=[name]).column(name).to_pylist()

    def texts(self, doc_ids) -> list[str]:
        """Texts of the given documents, read from the memory-mapped text blob."""
        if self._blob is None:
            with reading(ARTIFACT, self.folder):
                self._offsets = np.load(self.folder / OFFSETS_FILE, mmap_mode="r", allow_pickle=False)
                self._blob = (np.memmap(self.folder / TEXTS_FILE, dtype=np.uint8, mode="r") if self._offsets[-1]
                              else np.zeros(0, np.uint8))
            if int(self._offsets[-1]) != len(self._blob):
                raise ArtifactError(f"{self.folder / TEXTS_FILE}: {len(self._blob)} bytes, the offsets say {int(self._offsets[-1])}; "
                                    f"{rebuild_hint(ARTIFACT)}")
            if len(self._offsets) != len(self) + 1:
                raise ArtifactError(f"{self.folder}: {OFFSETS_FILE} has {len(self._offsets) - 1} entries, the corpus {len(self)}")
            if len(self._offsets) and (int(self._offsets[0]) != 0 or bool(np.any(np.diff(self._offsets) < 0))):
                raise ArtifactError(f"{self.folder / OFFSETS_FILE}: the offsets do not start at 0 and rise, so texts would be "
                                    f"read from the wrong places (damaged or edited); {rebuild_hint(ARTIFACT)}")
        out = []
        with reading(ARTIFACT, self.folder):  # bytes that are not UTF-8 (a damaged or edited texts.bin): one line
            for d in doc_ids:
                a, b = int(self._offsets[d]), int(self._offsets[d + 1])
                out.append(bytes(self._blob[a:b]).decode("utf-8", "surrogatepass"))
        return out

    def field_texts(self, doc_ids: Sequence[int], fields: Sequence[str] = ("text",)) -> list[str]:
        """What :meth:`iter_texts` yields for the given documents (``fields`` joined with a space),
        read from only the row groups that hold them."""
        if list(fields) == ["text"]:
            return self.texts(doc_ids)
        pf = pq.ParquetFile(self.folder / CORPUS_FILE)
        starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
        out = {}
        for g in sorted({int(np.searchsorted(starts, d, side="right")) - 1 for d in doc_ids}):
            cols = self._field_columns(lambda names: pf.read_row_group(g, columns=names), fields)
            for d in doc_ids:
                if starts[g] <= d < starts[g + 1]:
                    out[d] = " ".join(v for v in (c[int(d - starts[g])] for c in cols) if v)
        return [out[d] for d in doc_ids]

    def missing_fields(self, fields: Sequence[str]) -> list[str]:
        """Those of ``fields`` this corpus has no column for: the heading columns of a corpus built
        without a headings file (they read as empty); any other unknown name is an error."""
        absent = [f for f in dict.fromkeys(fields) if f in HEADING_COLUMNS and not self.has_headings]
        unknown = [f for f in dict.fromkeys(fields) if f not in HEADINGS_SCHEMA.names]
        if unknown:
            raise ArtifactError(f"lexical/semantic fields {', '.join(unknown)}: no column of the corpus (columns: "
                                f"{', '.join(HEADINGS_SCHEMA.names[1:])})")
        return absent

    def _field_columns(self, table_of, fields: Sequence[str]) -> list[list]:
        """Each of ``fields`` as a column of values, a field named twice read once (a field named
        n times counts n times in what is joined: a weight), an absent heading column as empty."""
        absent = set(self.missing_fields(fields))
        names = [f for f in dict.fromkeys(fields) if f not in absent]
        table = table_of(names)
        cols = {f: table.column(i).to_pylist() for i, f in enumerate(names)}
        n = table.num_rows
        del table
        return [cols[f] if f in cols else [""] * n for f in fields]

    def iter_texts(self, batch_rows: int = 50_000, fields: Sequence[str] = ("text",)) -> Iterator[list[str]]:
        """Document texts in doc_id order, a batch at a time (bounded memory); several
        ``fields`` are joined with a space, empty ones skipped; a field named twice is joined
        twice (its words weigh twice in BM25)."""
        pf = pq.ParquetFile(self.folder / CORPUS_FILE)
        pool = pa.default_memory_pool()
        for g in range(pf.num_row_groups):
            cols = self._field_columns(lambda names: pf.read_row_group(g, columns=names), fields)
            pool.release_unused()  # arrow's allocator keeps freed pages otherwise: GBs at 2.47M docs
            texts = cols[0] if len(cols) == 1 else [" ".join(v for v in vals if v) for vals in zip(*cols)]
            del cols
            for start in range(0, len(texts), batch_rows):
                yield texts[start : start + batch_rows]


def build_corpus_step(cfg, dest: Path, inputs) -> dict:
    return build_corpus(dest, inputs.laws, inputs.courts, cfg.corpus, progress=cfg.runtime.progress, law_keys=inputs.law_keys,
                        abbreviations=inputs.abbreviations, headings=inputs.headings)


def load_corpus_step(folder: Path, cfg, art) -> Corpus:
    return Corpus(folder)


SPEC = declare(ArtifactSpec(
    "corpus", needs_input="laws", reads=("laws", "courts", "law_keys", "abbreviations", "headings"),
    dataset="lexrag-corpus", title="lexrag unified corpus",
    description="laws_de.csv and court_considerations.csv as one parquet file (doc_id, citation, text, title, source, "
                "parent, lang)",
    builder="python build_datasets.py --only corpus --laws LAWS --courts COURTS --law-keys LAW_KEYS --abbreviations "
            "ABBREVIATIONS --headings HEADINGS --out OUT",
    notebook="01_build_corpus", attr="corpus", build=build_corpus_step, load=load_corpus_step,
    rebuild="python -m lexrag build --laws LAWS.csv [--courts COURTS.csv] [--abbreviations abbrev-translations.json] "
            "[--headings HEADINGS.csv] --out ARTIFACTS (or build_datasets.py --only corpus)"))
