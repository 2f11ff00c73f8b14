"""Make the law headings file ``citation,article_heading,path`` from two public snapshots.

For every valid law key (``--keys``, e.g. ``laws_de_citations.txt``) the script writes the heading
(Marginalie) of the key's article and the headings above that article, top down, joined with
" > ". Every key of an article (``Art. N Abs. p CODE`` and ``Art. N CODE``) gets the same
values; keys whose article is in neither source, or has neither heading nor path, are left out.
Rows are sorted by citation, written UTF-8 with the csv module's quoting.

Sources (both are read from a checked-out folder or from a bare git dir at the pinned commit):

1. ailegis/research-swiss-legal-reasoning-dataset @ 72edf8fe, ``src/legislation/<CODE>_de.json``:
   one record per paragraph, already keyed in the competition's scheme; ``title`` is
   "CODE, heading, ..., article heading" joined with ", ". Heuristic split: the segments an
   article shares with the previous or the next article (longest common prefix) are path; of the
   rest, the last heading is the article heading and the others are path. Within path and rest,
   a segment that starts with an enumeration ("A.", "II.", "3.", "b.", "Abis.", "12 ") or a
   structural word ("Zweiter Titel", "3. Kapitel", "Einleitung", "Schlusstitel", ...) starts a
   new heading, a segment after one ending in ":" or after a bare enumeration ("C.") continues it
   with a space, and any other segment was a comma inside the previous heading. A structural
   rest is path, not an article heading (its last comma segment is the heading when it has
   several). ailegis wins where both sources have an article.
2. legalize-dev/legalize-ch @ 8ab8bcf9, ``ch/*.md``: article lines ``##### **Art. N** Heading``;
   the other ``#``-headings above an article (all levels but 1, the act's title; a heading
   closes those of its level and below) form the path; ``###### Fussnoten`` ends the act.
   Act -> code: the front matter's ``short_title`` (the abbreviation), and its ``sr_number`` for
   the acts the keys name by SR number. Where several files give one code, the file holding most
   of that code's key articles wins (then the newer ``publication_date``). Only the first
   occurrence of an article number counts. Only the files at that commit are read (not older
   consolidations), and PDF hyphen loss ("Glaubensund") is not repaired.

Both sources: footnote marks and ``**`` are dropped and whitespace collapsed; an article heading
loses its leading enumeration ("3. Eigenhändige Verfügung" -> "Eigenhändige Verfügung") and a final
period, and "..." (a repealed article) counts as no heading; path headings lose a final period.

    python scripts/make_headings.py AILEGIS_DIR LEGALIZE_DIR --keys laws_de_citations.txt \\
        --out laws_de_headings.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("make_headings")

AILEGIS_COMMIT = "72edf8fe223f39752c172dfc12d22c98fe64d2db"
LEGALIZE_COMMIT = "8ab8bcf94b3249571f040dd57f37660ac7bcdc12"

KEY_RE = re.compile(r"^Art\.\s*(\S+)(?:\s+Abs\.\s+\S+)?\s+(\S.*?)\s*$")
LATIN = r"(?:bis|ter|quater|quinquies|sexies|septies|octies|novies|decies)?"
ENUM = rf"(?:[A-Z]|[IVXLC]+|[a-z]{{1,3}}|\d+[a-z]*){LATIN}\."
ENUM_RE = re.compile(rf"^{ENUM}\s+")
BARE_RE = re.compile(rf"^(?:{ENUM}|\d+)$")  # a segment "C." or "14" before its heading text
STRUCT_RE = re.compile(
    rf"^(?:(?:\d+[a-z]*\.|[A-ZÄÖÜ]\w*te[rs]?)\s+"
    rf"(?:Teil|Buch|Titel|Abteilung|Kapitel|Abschnitt|Unterabschnitt){LATIN}\b"
    r"|(?:Teil|Buch|Titel|Abteilung|Kapitel|Abschnitt)\s+\w+:"
    r"|Einleitung|Schlusstitel|Schlussbestimmung|Übergangsbestimmung|Schluss- und)"
)
NUMBERED_RE = re.compile(r"^\d+\s")  # "12 Führerprüfung" (LFV, VZV)
FOOTNOTE_RE = re.compile(r"\[\^[^\]]*\]|<sup>[^<]*</sup>")
ARTICLE_LINE_RE = re.compile(r"^#####\s+Art\.\s*(\S+)\s*(.*)$")
HEADING_LINE_RE = re.compile(r"^(#{1,6})\s+(.*)$")
FRONT_RE = re.compile(r'^(short_title|sr_number|publication_date):\s*"(.*)"\s*$', re.M)

Article = tuple[str, str]  # (code, article number)
Entry = tuple[str, str]  # (article heading, path)


def read_files(root: Path, sub: str, suffix: str, commit: str) -> Iterator[tuple[str, str]]:
    """Yield (name, text) of ``sub/*suffix`` from a folder, or from a bare git dir at ``commit``."""
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        git = ["git", f"--git-dir={root}"]
        if shutil.which("git") is None:
            raise SystemExit(f"{root}: is a git dir, and reading it needs git on PATH")
        listed = subprocess.run(git + ["ls-tree", "--name-only", commit, f"{sub}/"],
                                capture_output=True, text=True)
        if listed.returncode:
            raise SystemExit(f"{root}: cannot list {sub}/ at {commit}: {listed.stderr.strip()}")
        names = [n for n in listed.stdout.splitlines() if n.endswith(suffix)]
        batch = subprocess.run(git + ["cat-file", "--batch"], capture_output=True,
                               input="".join(f"{commit}:{n}\n" for n in names).encode())
        if batch.returncode:
            raise SystemExit(f"{root}: git cat-file failed: {batch.stderr.decode().strip()}")
        out, pos = batch.stdout, 0
        for name in names:
            end = out.index(b"\n", pos)
            size = int(out[pos:end].split()[2])
            yield name, decode(name, out[end + 1:end + 1 + size])
            pos = end + 2 + size
        return
    folder = root / sub
    if not folder.is_dir():
        raise SystemExit(f"{root}: has no {sub}/ folder (not a checkout or git dir of the snapshot)")
    for path in sorted(folder.glob(f"*{suffix}")):
        yield f"{sub}/{path.name}", decode(path, path.read_bytes())


def decode(name: str | Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SystemExit(f"{name}: not UTF-8 ({err.reason} at byte {err.start})") from None


def clean(text: str) -> str:
    return " ".join(FOOTNOTE_RE.sub("", text).replace("**", "").split())


def strip_heading(text: str) -> str:
    """Article heading without enumeration and final period; "..." (repealed) is no heading."""
    text = ENUM_RE.sub("", clean(text)).removesuffix(".").strip()
    return "" if set(text) <= set(". …") else text


def starts_heading(segment: str) -> bool:
    return any(rx.match(segment) for rx in (ENUM_RE, BARE_RE, STRUCT_RE, NUMBERED_RE))


def group(segments: list[str]) -> list[str]:
    """Join segments into headings: a segment that does not start a heading was a comma.

    A segment ending in ":" ("Zehnter Titel:") or a bare enumeration ("C.", "14") is glued to the
    next one with a space."""
    heads: list[str] = []
    glue = False
    for seg in segments:
        if glue:
            heads[-1] += " " + seg
        elif heads and not starts_heading(seg):
            heads[-1] += ", " + seg
        else:
            heads.append(seg)
        glue = seg.endswith(":") or bool(BARE_RE.match(seg))
    return heads


def common(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def split_title(segs: list[str], prev: list[str], nxt: list[str]) -> Entry:
    """(article heading, path) of one ailegis title; see the module docstring."""
    k = max(common(segs, prev), common(segs, nxt))
    path, rest = group(segs[:k]), group(segs[k:])
    heading = rest.pop() if rest else ""
    if heading and STRUCT_RE.match(heading):
        parts = heading.split(", ")
        heading = parts.pop() if len(parts) > 1 else ""
        rest.append(", ".join(parts))
    return strip_heading(heading), " > ".join(re.sub(r"(?<!\.)\.$", "", clean(h)) for h in path + rest)


def ailegis_articles(root: Path, commit: str) -> dict[Article, Entry]:
    titles: dict[Article, list[str]] = {}
    for name, text in read_files(root, "src/legislation", "_de.json", commit):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as err:
            raise SystemExit(f"{name}: not valid JSON ({err})") from None
        if not isinstance(records, list):
            raise SystemExit(f"{name}: expected a JSON list of paragraph records")
        for i, rec in enumerate(records):
            if not isinstance(rec, dict) or not {"citation", "title"} <= rec.keys():
                raise SystemExit(f"{name}: record {i} lacks 'citation' or 'title'")
            m = KEY_RE.match(rec["citation"])
            if not m:
                log.warning("%s: record %d skipped, no law key: %r", name, i, rec["citation"])
                continue
            art = (m.group(2), m.group(1))
            titles.setdefault(art, rec["title"].split(", ")[1:])
    if not titles:
        raise SystemExit(f"{root}: no src/legislation/*_de.json records")
    arts = list(titles)
    out = {}
    for i, art in enumerate(arts):
        prev = titles[arts[i - 1]] if i and arts[i - 1][0] == art[0] else []
        nxt = titles[arts[i + 1]] if i + 1 < len(arts) and arts[i + 1][0] == art[0] else []
        out[art] = split_title(titles[art], prev, nxt)
    return out


def parse_act(name: str, text: str) -> tuple[dict[str, str], dict[str, Entry]]:
    """Front matter fields and {article number: (heading, path)} of one legalize-ch file."""
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        raise SystemExit(f"{name}: no '---' front matter at the top")
    head, body = text[4:].split("\n---\n", 1)
    meta = dict(FRONT_RE.findall(head))
    stack: list[tuple[int, str]] = []
    arts: dict[str, Entry] = {}
    for line in body.splitlines():
        if not line.startswith("#"):
            continue
        line = clean(line)
        m = ARTICLE_LINE_RE.match(line)
        if m:
            arts.setdefault(m.group(1), (strip_heading(m.group(2)),
                                         " > ".join(h for _, h in stack)))
            continue
        m = HEADING_LINE_RE.match(line)
        if not m or len(m.group(1)) == 1:
            continue
        if m.group(2) == "Fussnoten":
            break
        level = len(m.group(1))
        stack = [(lv, h) for lv, h in stack if lv < level] + [(level, m.group(2))]
    return meta, arts


def legalize_articles(root: Path, commit: str, keyed: dict[str, set[str]]) -> dict[Article, Entry]:
    best: dict[str, tuple[tuple[int, str], dict[str, Entry]]] = {}
    for name, text in read_files(root, "ch", ".md", commit):
        meta, arts = parse_act(name, text)
        for code in {meta.get("short_title"), meta.get("sr_number")} & keyed.keys():
            score = (len(keyed[code] & arts.keys()), meta.get("publication_date", ""))
            if code not in best or score > best[code][0]:
                best[code] = (score, arts)
    if not best:
        raise SystemExit(f"{root}: no ch/*.md act matches a code of the keys")
    return {(code, n): e for code, (_, arts) in best.items() for n, e in arts.items()}


def read_keys(path: Path) -> dict[str, Article]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise SystemExit(f"{path}: cannot read ({err.strerror})") from None
    keys = {}
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        m = KEY_RE.match(line)
        if not m:
            raise SystemExit(f"{path}:{no}: not a law key 'Art. N [Abs. p] CODE': {line!r}")
        keys[line] = (m.group(2), m.group(1))
    if not keys:
        raise SystemExit(f"{path}: no keys")
    return keys


def make_rows(keys: dict[str, Article], sources: dict[str, dict[Article, Entry]]) -> list[tuple]:
    """Rows for the valid keys, the first source that has the article winning; logs counts."""
    counts = dict.fromkeys([*sources, "none"], 0)
    rows = []
    for key in sorted(keys):
        for source, arts in sources.items():
            entry = arts.get(keys[key])
            if entry and any(entry):
                counts[source] += 1
                rows.append((key, *entry))
                break
        else:
            counts["none"] += 1
    for source, n in counts.items():
        log.info("%s: %d of %d keys", source if source != "none" else "no heading or path", n,
                 len(keys))
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ailegis", type=Path, help="checkout or git dir of ailegis/research-swiss-legal-reasoning-dataset")
    ap.add_argument("legalize", type=Path, help="checkout or git dir of legalize-dev/legalize-ch")
    ap.add_argument("--keys", type=Path, required=True, help="valid keys, one a line (laws_de_citations.txt)")
    ap.add_argument("--out", type=Path, required=True, help="CSV to write")
    ap.add_argument("--ailegis-rev", default=AILEGIS_COMMIT, help="commit read from a git dir")
    ap.add_argument("--legalize-rev", default=LEGALIZE_COMMIT, help="commit read from a git dir")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    keys = read_keys(args.keys)
    keyed: dict[str, set[str]] = {}
    for code, art in keys.values():
        keyed.setdefault(code, set()).add(art)
    sources = {"ailegis": ailegis_articles(args.ailegis, args.ailegis_rev),
               "legalize-ch": legalize_articles(args.legalize, args.legalize_rev, keyed)}
    rows = make_rows(keys, sources)
    try:
        with args.out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["citation", "article_heading", "path"])
            writer.writerows(rows)
    except OSError as err:
        raise SystemExit(f"{args.out}: cannot write ({err.strerror})") from None
    log.info("wrote %d rows to %s", len(rows), args.out)


if __name__ == "__main__":
    main()
