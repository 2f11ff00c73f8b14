"""An English-German dictionary as an artifact, and the word-by-word translation of an English
question into a German search text (the ``dict_de`` query variant) for runs without an LLM.

The source is a dictionary file the user has, in one of two formats:

- Ding's text format (Debian's ``trans-de-en``, installed at ``/usr/share/trans/de-en``; GPL-2+):
  lines ``German | German :: English | English``, each side's ``|``-separated parts aligned,
  ``;`` between synonyms, ``{m}`` grammar, ``[jur.]`` a subject, ``[Schw.]`` Swiss usage;
- FreeDict's English-German dictionary in the dictd format (Debian's ``dict-freedict-eng-deu``,
  installed at ``/usr/share/dictd/freedict-eng-deu.index`` beside its ``.dict.dz``; made from Ding,
  GPL-3 and AGPL-3): an index of headwords and entries whose unindented lines after the headword
  list the German senses, ``,`` between them, ``<fem>`` grammar, ``[jur.]`` and ``[Schw.]`` tags.

Both are read by :mod:`lexrag.index.dictionary_sources`.  The artifact built from either is data
the user makes and ships as its own dataset under the source's licence, never part of the MIT
package.  Whether a question is English, and so translated, :func:`lexrag.index.language.is_english`
says.

The artifact (folder ``dictionary/``) holds ``entries.tsv.gz`` (English key, German sense, flags),
and the source's name, version, sha256 and licence in ``params.json``.  Translation
(:class:`Dictionary.translate`) looks up the longest phrase first (up to :data:`MAX_PHRASE`
words; a single word the dictionary lacks by its base, :func:`base_forms`), prefers legal senses
(``[jur.]``) and Swiss ones (``[Schw.]``) where an English key has them, shares a key's weight
among its senses in BM25's boost syntax (``Haft^0.5``: a word with many senses does not outweigh
one with a single sense; how, ``dictionary.weighting`` says, see
:func:`~lexrag.index.dictionary_weights.weighted`), adds the German compounds of adjacent words
the index holds (``dictionary.compounds``), writes ``ß`` as ``ss`` (Swiss spelling), and keeps
the question's citations, its abbreviations and numbers, and its English words beside their
German senses (English function words dropped).
"""

from __future__ import annotations

import functools
import gzip
import logging
import re
import zlib
from pathlib import Path

from lexrag.artifacts import ArtifactError, read_params, rebuild_hint, write_params
from lexrag.errors import short
from lexrag.index.analyzer import ENGLISH_STOPWORDS
from lexrag.index.decompound import LINKS
from lexrag.index.dictionary_format import LEGAL, MAX_PHRASE, OTHER_REGION, SWISS
from lexrag.index.dictionary_sources import read_source
from lexrag.index.dictionary_weights import boost, weighted
from lexrag.io.publish import publishes
from lexrag.registry import ArtifactSpec, declare

__all__ = ["build_dictionary", "glossary", "Dictionary", "split_citations", "english_words", "base_forms", "load_dictionary_step",
           "build_dictionary_step"]

log = logging.getLogger(__name__)

ENTRIES = "entries.tsv.gz"
COMPOUND_SENSES = 8  # of each word, the first (legal and Swiss senses first), that compounds are made of
SENSES_CACHE = 100_000  # English keys whose senses a loaded dictionary keeps (a few hundred bytes each)
COMPOUND_MIN_DOCS = 2  # documents that must hold a made compound whole: one alone may be a typo or a name
GLOSSARY = "data/glossary_en_de.tsv"  # in the package

_EN_WORD = re.compile(r"[^\W\d_][\w'\-]*|\d+[a-z]?|\S")  # words of any script (Zürich, Müller), numbers, punctuation
_EN_STOP = ENGLISH_STOPWORDS


@publishes("out")
def build_dictionary(source: str | Path, out: str | Path) -> "Dictionary":
    """Read a Ding file or a dictd dictionary (FreeDict) and write the artifact in ``out``."""
    source, out = Path(source), Path(out)
    skipped: dict[str, int] = {}
    fmt, version, sha, licence, kaggle_licence, pairs = read_source(source, skipped)
    entries: dict[str, dict[str, int]] = {}
    for key, sense in pairs:
        have = entries.setdefault(key, {})
        have[sense.german] = have.get(sense.german, 0) | sense.flags
    if skipped:
        log.warning("dictionary %s: %s left out", source, ", ".join(f"{n} {what}" for what, n in skipped.items()))
    index_lines = skipped.get("index lines outside the data", 0) + skipped.get("index lines that do not match their entry", 0)
    if index_lines and index_lines > len(entries):  # most of the index points past the data: not this data's index
        raise ArtifactError(f"--dictionary {source}: {index_lines} index lines point outside their entries in the .dict data; the index "
                            "and the data are of different dictionaries: give a matching pair")
    if not entries:
        raise ArtifactError(f"--dictionary {source}: no English-German entries found; give Ding's de-en file or "
                            f"FreeDict's freedict-eng-deu.index")
    out.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{k}\t{g}\t{f}\n" for k in sorted(entries) for g, f in entries[k].items())
    with gzip.GzipFile(out / ENTRIES, "wb", mtime=0) as f:  # mtime 0: the same bytes from the same source
        f.write(rows.encode("utf-8"))
    doc = write_params(out, "dictionary", "lexrag.index.dictionary", {"format": fmt, "max_phrase": MAX_PHRASE},
                       source=source.name, source_version=version, source_sha256=sha,
                       licence=f"{licence} (the source dictionary's; this artifact is data built from it, not part of lexrag)",
                       license_id=kaggle_licence,  # the name Kaggle knows the licence by
                       n_entries=len(entries), skipped=skipped)
    log.info("dictionary: %d English keys from %s", len(entries), source)
    return Dictionary({k: list(v.items()) for k, v in entries.items()}, doc)  # as load() reads it, without reading it


def glossary() -> dict[str, list[str]]:
    """The reviewed glossary shipped with lexrag (``data/glossary_en_de.tsv``): English legal terms
    and names of Swiss acts -> German search words; it wins over the dictionary."""
    from importlib.resources import files

    out: dict[str, list[str]] = {}
    for n, line in enumerate(files("lexrag").joinpath(GLOSSARY).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            en, tab, de = line.partition("\t")
            if not tab or "\t" in de or not en.split() or not de.split():
                raise ArtifactError(f"lexrag/{GLOSSARY}: line {n}: not 'English<TAB>German' ({line[:60]!r}); mend the line "
                                    "or reinstall lexrag")
            out[" ".join(en.lower().split())] = de.split()
    return out


class Dictionary:
    """English key -> German senses, and the translation of a question."""

    def __init__(self, entries: dict[str, list[tuple[str, int]]], doc: dict | None = None):
        self.entries = entries
        self.doc = doc or {}
        self.glossary = glossary()
        self.max_phrase = max([MAX_PHRASE, *(len(k.split()) for k in self.glossary)])
        # key -> its senses, the most recent kept: a question's words recur, and across questions
        self._kept_senses = functools.lru_cache(maxsize=SENSES_CACHE)(self._find_senses)

    @classmethod
    def load(cls, folder: str | Path) -> "Dictionary":
        folder = Path(folder)
        doc = read_params(folder, "dictionary")
        rebuild = rebuild_hint("dictionary")
        max_phrase = doc.get("params", {}).get("max_phrase")
        if not _whole(max_phrase):  # a string, a fraction, missing: no build writes it so
            raise ArtifactError(f"{folder / 'params.json'}: max_phrase {short(max_phrase)} is not a whole number (damaged or "
                                f"edited); {rebuild}")
        if max_phrase != MAX_PHRASE:  # its keys were cut at another phrase length
            raise ArtifactError(f"{folder}: built with phrases of up to {max_phrase} words, this lexrag looks up {MAX_PHRASE}; "
                                f"{rebuild}")
        recorded = doc.get("n_entries")
        if "n_entries" in doc and not _whole(recorded):
            raise ArtifactError(f"{folder / 'params.json'}: n_entries {short(recorded)} is not a whole number (damaged or "
                                f"edited); {rebuild}")
        entries: dict[str, list[tuple[str, int]]] = {}
        good = 0  # rows read whole
        try:
            with gzip.open(folder / ENTRIES, "rt", encoding="utf-8") as f:
                for line in f:
                    key, german, flags = line.rstrip("\n").split("\t")
                    entries.setdefault(key, []).append((german, int(flags)))
                    good += 1
        except (ValueError, UnicodeDecodeError) as e:  # a row that is no key, sense and flags
            raise ArtifactError(f"{folder / ENTRIES}: damaged at row {good + 1} ({type(e).__name__}); {rebuild}") from e
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # the compressed stream: cut short, a bad block or checksum
            raise ArtifactError(f"{folder / ENTRIES}: its compressed data is damaged (read {good:,} rows whole, then "
                                f"{type(e).__name__}); {rebuild}") from e
        except OSError as e:  # missing, a folder, no permission
            raise ArtifactError(f"{folder / ENTRIES}: unreadable ({e.strerror or e}); {rebuild}") from e
        if not entries:  # a build refuses a source without entries: this file was written wrong or replaced
            raise ArtifactError(f"{folder / ENTRIES}: holds no entries, so the dictionary could translate nothing (damaged "
                                f"or edited); {rebuild}")
        if recorded is not None and recorded != len(entries):
            raise ArtifactError(f"{folder / ENTRIES}: holds {len(entries):,} English keys, params.json records {recorded:,} "
                                f"(damaged or edited); {rebuild}")
        return cls(entries, doc)

    def senses(self, key: str) -> list[str]:
        """The German senses of an English key: legal ones if it has any, Swiss before other
        regions, in the dictionary's order; the glossary's words (one sense) where it has the key.
        A word neither has is looked up without its English ending (:func:`base_forms`)."""
        return list(self._kept_senses(key))  # the caller's own list

    def _find_senses(self, key: str) -> tuple[str, ...]:
        have = self.own_senses(key)
        if have or " " in key:
            return tuple(have)
        for base in base_forms(key):
            if have := self.own_senses(base):
                return tuple(have)
        return ()

    def own_senses(self, key: str) -> list[str]:
        """The senses of ``key`` as written (the glossary's, else the dictionary's), no base looked up."""
        if key in self.glossary:
            return [" ".join(self.glossary[key])]
        have = self.entries.get(key, [])
        if any(f & LEGAL for _, f in have):
            have = [x for x in have if x[1] & LEGAL]
        ranked = sorted(enumerate(have), key=lambda t: (-(t[1][1] & SWISS), bool(t[1][1] & OTHER_REGION), t[0]))
        return [g for _, (g, _) in ranked]

    def translate(self, text: str, weighting: str = "uniform", index=None, top_stems: dict[str, int] | None = None,
                  compounds: bool = False) -> str:
        """The German search text of an English question (see the module's docstring), its senses
        weighted as :func:`~lexrag.index.dictionary_weights.weighted` says (``index``: the BM25 index,
        for every weighting but ``uniform`` and for ``compounds``; ``top_stems``: for ``first_pass``,
        the terms of the first search's top documents); with ``compounds``, :meth:`compounds` of
        adjacent words added."""
        if (weighting != "uniform" or compounds) and index is None:
            raise ValueError(f"dictionary {'compounds read' if compounds else f'weighting {weighting!r} reads'} the BM25 index: give it")
        kept, rest = split_citations(text)
        tokens = _EN_WORD.findall(rest)
        out: list[str] = []
        joined: set[int] = set()  # i: tokens i and i + 1 were looked up as one phrase
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if not tok[0].isalnum():
                i += 1
                continue
            for n in range(min(self.max_phrase, len(tokens) - i), 0, -1):
                words = tokens[i:i + n]
                if not all(w[0].isalnum() for w in words):
                    continue
                key = " ".join(w.lower() for w in words)
                if n == 1 and key in _EN_STOP:
                    break
                senses = self.senses(key)
                if senses:  # the German senses, and the English words beside them (names, loanwords, codes)
                    out += weighted(senses, weighting, index, top_stems) + [w for w in words if w.lower() not in _EN_STOP]
                    joined.update(range(i, i + n - 1))
                    i += n
                    break
            else:
                out.append(tok)  # no entry: the English word stays (names, abbreviations, numbers)
                i += 1
                continue
            if n == 1 and key in _EN_STOP:
                i += 1
        if compounds:
            out += self.compounds(tokens, index, joined)
        return " ".join(kept + out).replace("ß", "ss")

    def compounds(self, tokens: list[str], index, joined: set[int] = frozenset()) -> list[str]:
        """German compounds of two adjacent English words of three letters or more (no punctuation
        or function word between, not looked up together as a phrase: indices in ``joined``), made
        of their senses as German makes them, modifier first ("month period" -> Monat + s + Frist):
        each pair of the first :data:`COMPOUND_SENSES` noun senses of each word, the modifier also
        without a final -e or -en ("Miete" -> Miet-), joined by each linking element
        :data:`~lexrag.index.decompound.LINKS`.  Kept are those the index holds as a word of their
        own in :data:`COMPOUND_MIN_DOCS` documents or more; a pair's compounds share one word's
        weight.  Each is written ``=Word^w``, which BM25 reads as the word's own stem only: the
        parts' senses keep their weights (the index splits its compounds into parts, so those
        already find them), and a compound found whole adds the rarer, sharper match."""
        # once a token: its senses lowercase, their modifier forms, their stems
        nouns = [[g.lower() for g in self._compound_senses(t.lower())] if _content(t) and len(t) >= 3 else [] for t in tokens]
        forms = [[m for g in senses for m in _modifier_forms(g)] for senses in nouns]
        stems = [set(index.analyzer.stems(senses)) for senses in nouns]
        out: dict[str, float] = {}
        for i, (mods, heads) in enumerate(zip(forms, nouns[1:])):
            if i in joined or not mods or not heads:
                continue
            made = list(dict.fromkeys([m + link + h for m in mods for h in heads for link in LINKS]))
            parts = stems[i] | stems[i + 1]
            held = {st: c for c, (st, df) in zip(made, index.whole_word_terms(made)) if df >= COMPOUND_MIN_DOCS and st not in parts}
            for c in dict.fromkeys(held.values()):
                c = c[0].upper() + c[1:]  # a German noun, as the senses are written
                out[c] = max(out.get(c, 0.0), 1.0 / len(held))
        return [boost(f"={c}", w) for c, w in out.items()]

    def _compound_senses(self, word: str) -> list[str]:
        """The senses of ``word`` a compound is made of: single words written as German nouns."""
        return [g for g in self.senses(word) if g.isalpha() and g[0].isupper() and not g.isupper()][:COMPOUND_SENSES]


def _whole(value) -> bool:
    """A whole number as params.json holds one (not a bool, a float or a string)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _modifier_forms(noun: str) -> list[str]:
    """A lowercase noun as a compound's modifier: itself, and without a final -en or -e ("miete" -> miet)."""
    return [noun, *(noun[:-len(e)] for e in ("en", "e") if noun.endswith(e))]


def english_words(text: str) -> list[str]:
    """The words of an English text that :meth:`Dictionary.translate` looks up, lowercase: no
    citation, number, punctuation or English function word."""
    return [t.lower() for t in _EN_WORD.findall(split_citations(text)[1]) if _content(t)]


def _content(token: str) -> bool:
    """A token that is an English word and no function word."""
    return token[0].isalpha() and token.lower() not in _EN_STOP


def base_forms(word: str) -> list[str]:
    """The forms a dictionary lists for an inflected English word it lacks, most likely first: the
    possessive's owner ("tenant's", "tenants'"), a third person's or plural's base ("contains",
    "taxes", "parties" -> "contain", "tax", "party").  Ding lists many plurals and verb forms,
    not all; bases of two letters or fewer are left out."""
    out = []
    for end in ("'s", "’s", "'", "’"):
        if word.endswith(end):
            out.append(word[:-len(end)])
            break
    else:
        if word.endswith("ies"):
            out += [word[:-3] + "y", word[:-1]]
        elif word.endswith("es"):
            out += [word[:-2], word[:-1]]
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            out.append(word[:-1])
    return [b for b in out if len(b) > 2]


def split_citations(text: str) -> tuple[list[str], str]:
    """(the citations a text names, in the competition's form; the text without them), so a
    translation keeps the citations as they are and translates the words around them.  Where a
    citation was, the text has a semicolon: the words on either side are no phrase and no compound."""
    from lexrag.citations import extract, normalize_text

    norm = normalize_text(text)
    found = extract(norm)
    pieces, last = [], 0
    for x in found:
        pieces.append(norm[last:x.start])
        last = max(last, x.end)
    return [x.citation.format() for x in found], " ; ".join(pieces + [norm[last:]])


def build_dictionary_step(cfg, dest: Path, inputs) -> None:
    build_dictionary(inputs.dictionary, dest)


def load_dictionary_step(folder: Path, cfg, art) -> Dictionary:
    return Dictionary.load(folder)


SPEC = declare(ArtifactSpec(
    "dictionary", switch="dictionary.enabled", needs_input="dictionary", reads=("dictionary",), licence="own",
    dataset="lexrag-dictionary", title="lexrag English-German dictionary (from Ding, GPL-2+)",
    description="English keys and their German senses with legal and Swiss-usage flags, built from Ding's de-en file "
                "(Debian trans-de-en, GPL-2+); data the user builds from a dictionary they have, licensed as its source, "
                "never part of the MIT package",
    builder="python build_datasets.py --only dictionary --dictionary /usr/share/trans/de-en --out OUT", attr="dictionary",
    build=build_dictionary_step, load=load_dictionary_step,
    rebuild="python -m lexrag build ... --dictionary /usr/share/trans/de-en --out ARTIFACTS "
            "(or build_datasets.py --only dictionary --dictionary FILE)"))
