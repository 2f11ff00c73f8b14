"""Citation shapes for scripts/experiment_head.py (a law citation's code, article and position) and
its part 5: the articles the statutes' own text cites, against the ranking's slots."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from lexrag.citations import try_parse
from lexrag.index.corpus import Corpus

_ARTICLE_NUMBER = re.compile(r"\d+")


def law(c: str):
    """The parsed law citation of ``c`` (None for a court citation or a string that does not parse)."""
    p = try_parse(c)
    return p if p is not None and p.kind == "law" else None


def code_of(c: str) -> str | None:
    p = law(c)
    return p.code if p else None


def article_of(c: str) -> str:
    p = law(c)
    return p.parent().format() if p else c


def position(c: str) -> tuple[str, int] | None:
    """(code, article number) of a law citation, for nearness ("Art. 641a ZGB" -> ("ZGB", 641))."""
    p = law(c)
    m = _ARTICLE_NUMBER.match(p.article) if p else None
    return (p.code, int(m.group())) if m else None


_REFERENCE = re.compile(r"\bArt(?:ikel|\.)\s*(\d+[a-z]?)\b(?:\s*(?:Abs\.|Absatz|Bst\.|Buchstabe|lit\.|Ziff\.|Ziffer)\s*\d*[a-z]?)*"
                        r"(?:\s+(?:des\s+|der\s+)?([A-Za-zÄÖÜäöü][\w\-/]*))?")


def law_references(art_dir: Path) -> dict[str, set[str]]:
    """Article -> the articles its paragraphs' text cites (same statute unless a corpus code follows)."""
    corpus = Corpus(art_dir / "corpus")
    cits = corpus.column("citation")
    articles = {article_of(c) for c in cits if law(c)}
    codes = {code_of(c) for c in cits} - {None}
    refs: dict[str, set[str]] = {}
    d = 0
    for texts in corpus.iter_texts():
        for text in texts:
            a = article_of(cits[d]) if corpus.sources[d] == "law" and text else None
            d += 1
            if a is None:
                continue
            own = code_of(a)
            for m in _REFERENCE.finditer(text):
                t = f"Art. {m.group(1)} {m.group(2) if m.group(2) in codes else own}"
                if t in articles and t != a:
                    refs.setdefault(a, set()).add(t)
    return refs


def part_references(rows: dict, refs: dict[str, set[str]]) -> None:
    slots, cited = Counter(), Counter()
    for v in rows.values():
        g_articles = {article_of(x) for x in v["gold"] if law(x)}
        arts = list(dict.fromkeys(article_of(c) for c in v["ranked"] if law(c)))
        for i, a in enumerate(arts[:20]):
            slots[(i // 5, "n")] += 1
            slots[(i // 5, "hit")] += a in g_articles
        top3 = set(arts[:3])
        for t in set().union(*(refs.get(a, set()) for a in arts[:5])) - top3:
            cited["n"] += 1
            cited["hit"] += t in g_articles
            cited["ranked"] += t in arts[:100]
    print(f"\n## 5. Cross-references in the statutes' text ({sum(map(len, refs.values()))} article-to-article links "
          f"from {len(refs)} articles)\n")
    print("| articles | count | share that the gold cites |\n| --- | --- | --- |")
    for b in range(4):
        n = slots[(b, "n")]
        print(f"| the ranking's articles {5 * b + 1}-{5 * b + 5} | {n} | {slots[(b, 'hit')] / max(n, 1):.3f} |")
    print(f"| cited by the first five, not among the first three | {cited['n']} | {cited['hit'] / max(cited['n'], 1):.3f} "
          f"({cited['ranked']} of them already in the first 100) |")
