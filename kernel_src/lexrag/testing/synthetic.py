"""Synthetic German legal-like text and court considerations, for tests and scale benchmarks.

Real court text is scarce here (110 considerations), so benchmarks at 2.47M documents and graph
tests use generated considerations that have the shape that matters: German-looking words with
a Zipf frequency curve, several considerations per decision, citation strings in the corpus's
own forms, and 3-5 references per consideration whose targets follow a power law (a few
authorities are cited very often, most rarely).  Deterministic for a given seed.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

__all__ = ["TextSampler", "Decision", "make_decisions", "court_considerations", "write_court_csv", "write_laws_csv"]

_PREFIX = ["", "", "", "be", "ver", "ent", "zu", "ge", "auf", "an", "ab", "vor", "nach", "über", "unter", "ein", "aus"]
_ROOTS = (
    "recht gericht klage schuld vertrag frist beweis urteil pflicht schaden miete arbeit steuer kauf erb ehe straf "
    "haft verfahren beschwerde anspruch leistung entscheid gesetz verordnung behörde kanton gemeinde bund antrag "
    "rente versicherung unfall kind unterhalt eigentum besitz grund buch pfand betreibung konkurs gläubiger "
    "schuldner zahlung lohn kündigung vermieter mieter käufer verkäufer mangel haftung täter opfer strafe busse "
    "willkür gehör verfassung freiheit gleichheit treu glaube irrtum täuschung form zustand wert bau planung "
    "umwelt wasser wald jagd zoll ausländer asyl aufenthalt bewilligung familie vormund beistand schutz"
).split()
_SUFFIX = ["", "", "ung", "en", "er", "es", "lich", "heit", "keit", "s", "e", "ungen", "ig", "isch"]
_FUNCTION = (
    "der die das und in zu den von mit ist im dem nicht ein eine als auch es an werden aus er hat dass sie "
    "nach wird bei einer um am sind noch wie einem über einen so zum war haben nur oder aber vor zur bis "
    "mehr durch man sein wurde sei gemäss"
).split()
_PARTS = ["I", "Ia", "II", "III", "IV", "V"]


class TextSampler:
    """Zipf-like German legal-looking words: function words first, then a 60K compound vocabulary."""

    def __init__(self, seed: int = 0, vocab_size: int = 60_000, exponent: float = 1.05):
        rng = np.random.default_rng(seed)
        words: set[str] = set()
        while len(words) < vocab_size:
            n = int(rng.integers(1, 4))
            words.add(str(rng.choice(_PREFIX)) + "".join(rng.choice(_ROOTS, size=n)) + str(rng.choice(_SUFFIX)))
        content = np.array(sorted(words), dtype=object)
        rng.shuffle(content)
        numbers = np.array([str(i) for i in range(1, 1000)], dtype=object)
        self.words = np.concatenate([np.array(_FUNCTION, dtype=object), content, numbers])
        p = 1.0 / np.arange(1, len(self.words) + 1, dtype=np.float64) ** exponent
        self.cdf = np.cumsum(p / p.sum())
        self.rng = np.random.default_rng(seed + 1)

    def words_(self, n: int) -> list[str]:
        ids = np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), len(self.words) - 1)
        return self.words[ids].tolist()

    def text(self, n_words: int) -> str:
        return " ".join(self.words_(n_words))


@dataclass(frozen=True)
class Decision:
    name: str  # "BGE 145 II 32" or "5A_800/2019"
    considerations: tuple[str, ...]  # "3.1", "2." ...

    def citation(self, cons: str) -> str:
        return f"{self.name} E. {cons}"


def make_decisions(n_considerations: int, seed: int = 0, mean_per_decision: int = 5, bge_share: float = 0.3) -> list[Decision]:
    """Decisions with 2..2*mean considerations each, totalling about ``n_considerations``."""
    rng = np.random.default_rng(seed + 2)
    out: list[Decision] = []
    total = 0
    pages: dict[tuple[int, str], int] = {}
    while total < n_considerations:
        k = int(rng.integers(2, 2 * mean_per_decision))
        k = min(k, n_considerations - total) or 1
        cons: list[str] = []
        top = 1
        while len(cons) < k:
            subs = int(rng.integers(0, 4))
            cons.append(f"{top}" if subs == 0 else f"{top}.{subs}")
            if subs == 0 or rng.random() < 0.4:
                top += 1
            elif subs and f"{top}.{subs + 1}" not in cons and len(cons) < k:
                cons.append(f"{top}.{subs + 1}")
                top += 1
        cons = list(dict.fromkeys(cons))[:k]
        if rng.random() < bge_share:
            vol = int(rng.integers(100, 151))
            part = _PARTS[int(rng.integers(0, len(_PARTS)))]
            page = pages.get((vol, part), 1) + int(rng.integers(1, 20))
            pages[(vol, part)] = page
            name = f"BGE {vol} {part} {page}"
        else:
            court = f"{int(rng.integers(1, 10))}{'ABCDEF'[int(rng.integers(0, 6))]}"
            name = f"{court}_{int(rng.integers(1, 1500))}/{int(rng.integers(2000, 2026))}"
        out.append(Decision(name, tuple(cons)))
        total += len(cons)
    seen: set[str] = set()
    unique = []
    for d in out:
        if d.name not in seen:
            seen.add(d.name)
            unique.append(d)
    return unique


def court_considerations(
    n: int,
    laws: Sequence[str] = ("Art. 8 ZGB", "Art. 2 Abs. 1 ZGB", "Art. 41 Abs. 1 OR", "Art. 100 Abs. 1 BGG"),
    seed: int = 0,
    words: tuple[int, int] = (200, 300),
    refs: tuple[int, int] = (3, 5),
    exponent: float = 1.1,
) -> Iterator[tuple[str, str]]:
    """Yield ``(citation, text)`` for about ``n`` considerations.

    Each has ``refs`` references (inclusive range) to other decisions' considerations or to law
    paragraphs, drawn with Zipf(``exponent``) popularity over a random order of authorities.
    """
    decisions = make_decisions(n, seed)
    sampler = TextSampler(seed)
    rng = np.random.default_rng(seed + 3)
    n_dec = len(decisions)
    dec_pop = rng.permutation(n_dec)
    p = 1.0 / np.arange(1, n_dec + 1, dtype=np.float64) ** exponent
    dec_cdf = np.cumsum(p / p.sum())
    law_order = rng.permutation(len(laws))
    pl = 1.0 / np.arange(1, len(laws) + 1, dtype=np.float64) ** exponent
    law_cdf = np.cumsum(pl / pl.sum())
    for d in decisions:
        for cons in d.considerations:
            body = sampler.words_(int(rng.integers(words[0], words[1] + 1)))
            n_refs = int(rng.integers(refs[0], refs[1] + 1))
            parts = []
            for _ in range(n_refs):
                if rng.random() < 0.35:
                    law = laws[law_order[min(int(np.searchsorted(law_cdf, rng.random())), len(laws) - 1)]]
                    parts.append(f"({law})")
                else:
                    t = decisions[dec_pop[min(int(np.searchsorted(dec_cdf, rng.random())), n_dec - 1)]]
                    if t.name == d.name:
                        continue
                    tc = t.considerations[int(rng.integers(0, len(t.considerations)))]
                    prefix = "" if t.name.startswith("BGE") else "Urteil "
                    parts.append(f"({prefix}{t.citation(tc)} mit Hinweisen)")
            step = max(len(body) // (len(parts) + 1), 1)
            for i, ref in enumerate(parts, start=1):
                body.insert(min(i * step + i - 1, len(body)), ref)
            yield d.citation(cons), " ".join(body) + "."


def write_court_csv(path: str | Path, n: int, laws: Sequence[str] | None = None, seed: int = 0, **kw) -> Path:
    path = Path(path)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["citation", "text"])
        args = {"laws": laws} if laws else {}
        for row in court_considerations(n, seed=seed, **args, **kw):
            w.writerow(row)
    return path


def write_laws_csv(path: str | Path, n_articles: int = 2000, seed: int = 0,
                   codes: Sequence[str] = ("OR", "ZGB", "StGB", "ZPO", "BGG")) -> list[str]:
    """A laws CSV of ``n_articles`` articles with 1-3 paragraphs each; returns the citations."""
    sampler = TextSampler(seed)
    rng = np.random.default_rng(seed + 4)
    cits: list[str] = []
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["citation", "text", "title"])
        for i in range(n_articles):
            code = codes[i % len(codes)]
            art = i // len(codes) + 1
            n_par = int(rng.integers(1, 4))
            for par in range(1, n_par + 1):
                c = f"Art. {art} Abs. {par} {code}" if n_par > 1 else f"Art. {art} {code}"
                w.writerow([c, sampler.text(int(rng.integers(20, 60))), f"Gesetz {code}"])
                cits.append(c)
    return cits
