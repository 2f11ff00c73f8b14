"""Pseudo-English questions for choosing how English questions are searched: German questions put
word by word into English with the same Ding dictionary (its German -> English direction), so that
the English -> German translation can be measured on many questions grouped by legal area, where
the only real English questions with gold (val.csv) are 10 and only scored.

A German word becomes the first English word Ding gives it (its own headword line first): the
longest German phrase of up to three words, then the word itself, then any word of the same stem.
A compound Ding lacks becomes its parts' English when the BM25 index's decompounder splits it.
A word still without English is dropped when the corpus knows it as German (more than
``GERMAN_DF`` documents hold it), so no German leaks into the English; names, numbers and
citations stay.  Citations named in a question stay as they are (the competition's English
questions name Swiss codes too).

The proxy errs both ways: it keeps Ding's own pairs (its English always leads back to the German
word among other senses, which real English does not), and its English is stilted (one sense per
word, German word order).  It serves to compare ways of weighting the senses, not to predict
val's scores.
"""

from __future__ import annotations

import re
from pathlib import Path

from lexrag.index.analyzer import GERMAN_STOPWORDS, Analyzer
from lexrag.errors import ArtifactError
from lexrag.index.dictionary import split_citations
from lexrag.index.dictionary_format import MAX_PHRASE
from lexrag.index.dictionary_sources import read_source

GERMAN_DF = 20  # a word more documents hold than this is German, not a name
# written as English questions write them ("Art. 41 para. 1 OR"): kept, as are abbreviations (ZGB, revOR)
KEEP = {"art": "Art", "abs": "para", "lit": "let", "ziff": "no"}
# German function words as English ones (the English a reader would write keeps its function words);
# the other German stopwords are dropped
FUNCTION = {**dict.fromkeys("der die das den dem des".split(), "the"), **dict.fromkeys("ein eine einer eines einem einen".split(), "a"),
            "und": "and", "oder": "or", "ist": "is", "sind": "are", "war": "was", "von": "of", "vom": "of", "zu": "to",
            "zum": "to the", "zur": "to the", "im": "in the", "in": "in", "mit": "with", "für": "for", "auf": "on",
            "nicht": "not", "wird": "will", "hat": "has", "haben": "have", "kann": "can", "wenn": "if", "ob": "whether",
            "dass": "that", "bei": "at", "nach": "after", "aus": "from", "als": "as", "wie": "how", "was": "what", "wer": "who"}
PHRASE = 3
_WORD = re.compile(r"[^\W\d_][\w\-]*|\d+[a-z]?")


class GermanToEnglish:
    """Ding's German -> English direction, word by word."""

    def __init__(self, ding: str | Path, index=None):
        self.exact: dict[str, str] = {}
        self.by_stem: dict[str, str] = {}
        self.stem = Analyzer("german", 1, stopwords=())
        *_, pairs = read_source(Path(ding), {})  # a file that is no dictionary is one line, as in a build
        for en, sense in pairs:
            de = sense.german.lower()
            if len(de.split()) > PHRASE or len(en.split()) > MAX_PHRASE:
                continue
            self.exact.setdefault(de, en)
            if " " not in de:
                for s in self.stem.expand(de):
                    self.by_stem.setdefault(s, en)
        if not self.exact:
            raise ArtifactError(f"--dictionary {ding}: no German-English pairs found; give Ding's de-en file or "
                                f"FreeDict's freedict-eng-deu.index")
        self.index = index

    def word(self, w: str) -> str | None:
        low = w.lower().replace("ß", "ss")
        if low in self.exact:
            return self.exact[low]
        stems = self.stem.expand(low)
        if stems and stems[0] in self.by_stem:
            return self.by_stem[stems[0]]
        dec = getattr(self.index.analyzer, "decompounder", None) if self.index is not None else None
        if dec is not None:
            parts = [p for p in dec.split(low) if p != low]
            got = [self.word(p) for p in parts]
            if parts and all(got):
                return " ".join(got)
        return None

    def translate(self, text: str) -> tuple[str, int, int]:
        """(the English text, words translated, German words dropped)."""
        kept, rest = split_citations(text)
        tokens = _WORD.findall(rest)
        out, done, dropped, i = [], 0, 0, 0
        while i < len(tokens):
            for n in range(min(PHRASE, len(tokens) - i), 1, -1):
                en = self.exact.get(" ".join(t.lower() for t in tokens[i:i + n]).replace("ß", "ss"))
                if en:
                    out.append(en)
                    done, i = done + 1, i + n
                    break
            else:
                tok = tokens[i]
                low = tok.lower()
                en = None if tok[0].isdigit() or low in KEEP or low in GERMAN_STOPWORDS or _abbreviation(tok) else self.word(tok)
                if low in KEEP or _abbreviation(tok):
                    out.append(KEEP.get(low, tok))
                elif low in FUNCTION:
                    out.append(FUNCTION[low])
                elif low in GERMAN_STOPWORDS:  # a function word without an English one above
                    dropped += 1
                elif en:
                    out.append(en)
                    done += 1
                elif tok[0].isdigit() or not self._german(tok):
                    out.append(tok)
                else:
                    dropped += 1
                i += 1
        return " ".join(out + kept), done, dropped

    def _german(self, w: str) -> bool:
        """Whether the corpus holds ``w`` in more than GERMAN_DF documents (a German word, not a name)."""
        if self.index is None:
            return True
        df = self.index.doc_freq(w)
        return df is not None and df > GERMAN_DF


def _abbreviation(w: str) -> bool:
    """ZGB, revOR, SchKG: a capital after the first letter."""
    return any(c.isupper() for c in w[1:])


if __name__ == "__main__":
    import sys

    print("english_proxy.py is a module: scripts/experiment_english.py writes the pseudo-English questions with it; "
          "run that", file=sys.stderr)
    raise SystemExit(2)
