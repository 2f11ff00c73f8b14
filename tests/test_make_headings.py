"""scripts/make_headings.py on a tiny ailegis-style JSON and legalize-ch-style Markdown."""

import csv
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "make_headings.py"
spec = importlib.util.spec_from_file_location("make_headings_under_test", SCRIPT)
mh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mh)

AILEGIS = [
    {"book": "XG", "title": "XG, 1. Kapitel: Allgemeine Bestimmungen, Zweck", "citation": "Art. 1 Abs. 1 XG", "content": "a"},
    {"book": "XG", "title": "XG, 1. Kapitel: Allgemeine Bestimmungen, Zweck", "citation": "Art. 1 Abs. 2 XG", "content": "b"},
    {"book": "XG", "title": "XG, 1. Kapitel: Allgemeine Bestimmungen, A. Begriffe", "citation": "Art. 2 XG", "content": "c"},
]

XG_MD = """---
title: "Bundesgesetz über X (XG)"
short_title: "XG"
sr_number: "999.1"
publication_date: "2020-01-01"
---
# Bundesgesetz über X (XG)

## 1. Kapitel: Allgemeine Bestimmungen

##### **Art. 1** Gegenstand

<sup>1</sup> Text.

##### **Art. 3**[^1] Geltungsbereich, Ausnahmen

Text.

## 2. Kapitel: Schluss

### 1. Abschnitt: Inkrafttreten

##### **Art. 4** Inkrafttreten

##### **Art. 6** Aufhebung

###### Fussnoten

[^1]: AS 2020 1
"""

SR_MD = """---
title: "Verordnung ohne Abkürzung"
sr_number: "999.2"
---
# Verordnung ohne Abkürzung

##### **Art.****1** 1. Zweck
"""

KEYS = """Art. 1 Abs. 1 XG
Art. 1 Abs. 2 XG
Art. 1 XG
Art. 2 XG
Art. 3 Abs. 1 XG
Art. 3 Abs. 2 XG
Art. 4 XG
Art. 5 XG
Art. 1 999.2
"""

PATH1 = "1. Kapitel: Allgemeine Bestimmungen"
EXPECTED = [
    ["citation", "article_heading", "path"],
    ["Art. 1 999.2", "Zweck", ""],
    ["Art. 1 Abs. 1 XG", "Zweck", PATH1],  # ailegis wins over legalize-ch's "Gegenstand"
    ["Art. 1 Abs. 2 XG", "Zweck", PATH1],
    ["Art. 1 XG", "Zweck", PATH1],
    ["Art. 2 XG", "Begriffe", PATH1],
    ["Art. 3 Abs. 1 XG", "Geltungsbereich, Ausnahmen", PATH1],
    ["Art. 3 Abs. 2 XG", "Geltungsbereich, Ausnahmen", PATH1],
    ["Art. 4 XG", "Inkrafttreten", "2. Kapitel: Schluss > 1. Abschnitt: Inkrafttreten"],
]


@pytest.fixture
def inputs(tmp_path):
    ail = tmp_path / "ailegis"
    (ail / "src" / "legislation").mkdir(parents=True)
    (ail / "src" / "legislation" / "XG_de.json").write_text(json.dumps(AILEGIS, ensure_ascii=False), encoding="utf-8")
    lch = tmp_path / "legalize"
    (lch / "ch").mkdir(parents=True)
    (lch / "ch" / "cc-2020-1.md").write_text(XG_MD, encoding="utf-8")
    (lch / "ch" / "cc-2021-2.md").write_text(SR_MD, encoding="utf-8")
    keys = tmp_path / "keys.txt"
    keys.write_text(KEYS, encoding="utf-8")
    return ail, lch, keys


def read_rows(path):
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh))


def test_rows_exact_ailegis_wins_and_only_valid_keys(inputs, tmp_path, caplog):
    ail, lch, keys = inputs
    out = tmp_path / "headings.csv"
    caplog.set_level("INFO", logger="make_headings")
    mh.main([str(ail), str(lch), "--keys", str(keys), "--out", str(out)])
    rows = read_rows(out)
    assert rows == EXPECTED
    written = {r[0] for r in rows}
    assert "Art. 6 XG" not in written  # in legalize-ch, not a key
    assert "Art. 5 XG" not in written  # a key in no source
    assert "ailegis: 4 of 9 keys" in caplog.text
    assert "legalize-ch: 4 of 9 keys" in caplog.text
    assert "no heading or path: 1 of 9 keys" in caplog.text


def test_split_title_keeps_commas_and_enumerated_levels():
    segs = ["Erste Abteilung:", "Die Erben", "I. Errichtung", "3. Eigenhändige Verfügung"]
    nxt = ["Erste Abteilung:", "Die Erben", "I. Errichtung", "4. Mündliche Verfügung", "a. Verfügung"]
    assert mh.split_title(segs, [], nxt) == ("Eigenhändige Verfügung", "Erste Abteilung: Die Erben > I. Errichtung")
    segs = ["2. Titel: Grundrechte", "Bürgerrechte und Sozialziele", "Bäckereien", "Konditoreien"]
    prev = ["2. Titel: Grundrechte", "Bürgerrechte und Sozialziele", "Zweck"]
    assert mh.split_title(segs, prev, []) == ("Bäckereien, Konditoreien", "2. Titel: Grundrechte, Bürgerrechte und Sozialziele")


def test_reads_bare_git_dirs(inputs, tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    ail, lch, keys = inputs
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for repo in (ail, lch):
        subprocess.run([*git, "init", "-q", str(repo)], check=True)
        subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
        subprocess.run([*git, "-C", str(repo), "commit", "-qm", "fixture"], check=True)
    out = tmp_path / "from_git.csv"
    mh.main([str(ail / ".git"), str(lch / ".git"), "--keys", str(keys), "--out", str(out),
             "--ailegis-rev", "HEAD", "--legalize-rev", "HEAD"])
    assert read_rows(out) == EXPECTED


def test_bad_input_is_one_line_naming_the_file(inputs, tmp_path):
    ail, lch, keys = inputs
    bad = ail / "src" / "legislation" / "XG_de.json"
    bad.write_text('[{"citation": "Art. 1 XG"', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"src/legislation/XG_de.json: not valid JSON"):
        mh.main([str(ail), str(lch), "--keys", str(keys), "--out", str(tmp_path / "o.csv")])
    keys.write_text("Art. 1 XG\nParagraph eins\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(SCRIPT), str(ail), str(lch), "--keys", str(keys),
                        "--out", str(tmp_path / "o.csv")], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.strip() == f"{keys}:2: not a law key 'Art. N [Abs. p] CODE': 'Paragraph eins'"
    assert not (tmp_path / "o.csv").exists()
