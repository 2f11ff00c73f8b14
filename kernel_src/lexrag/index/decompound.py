"""German compound splitting for the BM25 analyzer, learned from the corpus' own word counts.

German law writes one concept as one word: a question about a "Vertrag" must find the
paragraph on the "Mietvertrag", the "Arbeitsvertrag", the "Kaufvertrag"; a question about the
"Kündigungsfrist" must find "Frist" and "Kündigung".  Snowball stemming does not split words, so
BM25 sees no match.  :class:`Decompounder` splits a word into parts that are themselves words of
the corpus (the frequency method of Koehn & Knight 2003): every cut into a modifier and a head of
``min_part`` letters or more, allowing a linking element (Fugen-s, -es, -n, -en, -e, -er) after the
modifier and a modifier that drops its final -e/-en ("Miet-vertrag" from "Miete"), each part seen
``min_count`` times or more; the cut with the largest geometric mean of the part counts wins, and
only if that mean is larger than the count of the word itself (a word used more often whole than
its parts stays whole).  The head is split again, so a word gives at most four parts.  A word of
more than ``MAX_WORD`` letters is never split, so the time per word is bounded.

The analyzer indexes a compound as itself *and* its parts, so exact matches keep their weight.
The counts (every word of letters only, ``min_part`` letters or longer, seen ``min_count`` times or more) are saved beside the BM25 index as
``decompound.json``, so a query is split with the counts its index was built with.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

__all__ = ["FILE", "LINKS", "Decompounder"]

FILE = "decompound.json"
LINKS = ("", "s", "es", "n", "en", "e", "er")  # linking elements (Fugenelemente) after the modifier
_MAX_CUTS = 3  # the head is cut at most twice more: four parts at most
# Words longer than this are left whole: trying every cut costs time quadratic in the length, and
# German's longest words in law ("Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz")
# have 63 letters; a longer "word" is a run of letters without spaces (a URL, an LLM answer gone wrong).
MAX_WORD = 80


class Decompounder:
    def __init__(self, counts: Mapping[str, int], min_part: int = 4, min_count: int = 5):
        if min_part < 2 or min_count < 1:
            raise ValueError(f"decompounding needs min_part >= 2 and min_count >= 1, got {min_part} and {min_count}")
        self.min_part = min_part
        self.min_count = min_count
        # only words that can be a part or a compound are kept: letters only, min_part or longer
        self.counts = {w: int(c) for w, c in counts.items() if c >= min_count and len(w) >= min_part and w.isalpha()}
        self._cuts: dict[str, tuple[str, str] | None] = {}  # heads recur across compounds

    def params(self) -> dict:
        return {"min_part": self.min_part, "min_count": self.min_count}

    def _modifier(self, w: str) -> int:
        c = self.counts
        return max(c.get(w, 0), c.get(w + "e", 0), c.get(w + "en", 0))

    def _cut(self, word: str) -> tuple[str, str] | None:
        """The best (modifier, head) cut of ``word``, or None when no cut beats the word itself."""
        if word in self._cuts:
            return self._cuts[word]
        best = None
        n, m = len(word), self.min_part
        if 2 * m <= n <= MAX_WORD and word.isalpha():
            best_score = float(self.counts.get(word, 0))
            for i in range(m, n - m + 1):
                fm = self._modifier(word[:i])
                if not fm:
                    continue
                for link in LINKS:
                    if not word.startswith(link, i):
                        continue
                    head = word[i + len(link):]
                    if len(head) < m:
                        continue
                    fh = self.counts.get(head, 0)
                    if fh and math.sqrt(fm * fh) > best_score:
                        best, best_score = (word[:i], head), math.sqrt(fm * fh)
        if len(self._cuts) > 2_000_000:
            self._cuts.clear()
        self._cuts[word] = best
        return best

    def split(self, word: str) -> tuple[str, ...]:
        """The parts of ``word`` (lowercase, as the analyzer sees it), or () when it is no compound.
        The same word always gives the same parts, whatever was split before (only the best cut of
        each word is cached; the analyzer caches each word's expansion)."""
        parts: list[str] = []
        rest = word
        for _ in range(_MAX_CUTS):
            cut = self._cut(rest)
            if cut is None:
                break
            parts.append(cut[0])
            rest = cut[1]
        if parts:
            parts.append(rest)
        return tuple(parts)

    def clear_cache(self) -> None:
        self._cuts.clear()

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / FILE
        doc = {**self.params(), "counts": dict(sorted(self.counts.items()))}
        path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> "Decompounder":
        """The splitter saved in ``folder``; a missing or unreadable file is an ``ArtifactError``."""
        from lexrag.artifacts import ArtifactError

        path = Path(folder) / FILE
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            return cls(doc["counts"], int(doc["min_part"]), int(doc["min_count"]))
        except FileNotFoundError as e:
            raise ArtifactError(f"{path}: missing; the BM25 index was built with decompounding and needs it "
                                "(rebuild the bm25 artifact)") from e
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, RecursionError) as e:
            raise ArtifactError(f"{path}: not a decompounding lexicon ({type(e).__name__}: {e}); rebuild the bm25 artifact") from e
