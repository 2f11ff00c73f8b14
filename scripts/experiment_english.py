#!/usr/bin/env python
"""Experiment (not a test): how the dictionary variant should weight an English word's German
senses (``dictionary.weighting``) and whether it should add the German compounds of adjacent
English words (``dictionary.compounds``), chosen on English questions grouped by legal area,
nested, and then scored on the locked areas and on val.csv's 10 real English questions.

  python scripts/experiment_english.py --data ../shared/data --artifacts ARTIFACTS --dictionary /usr/share/trans/de-en \
      --work WORK

There are no English questions with gold grouped by area, so lexam_dev's German questions are put
into pseudo-English with the same Ding dictionary, German -> English (``english_proxy.py``; the
English is written to WORK/lexam_dev_en.csv to be read).  Each is ranked by the `lexical` preset
with the dictionary variant under each weighting, with and without compounds (:data:`OPTIONS`).
The choice is made on Recall@100 (what a translation is for): for each development area, the
option with the best mean Recall@100 on the other development areas is scored on it (nested).  The
default changes to the option chosen on all development areas only when the nested pick's gain
over the shipped one has a 95% bootstrap interval above 0.  With ``--final`` the locked areas are
scored under the shipped and the chosen option; val and the ``--english`` files (LEXam's English questions,
``lexam_english.py``) are scored under those two and without the dictionary, after the choice and
never for it.  The German questions themselves, ranked the same way, show what the translation
loses.  (The project's harness, ``lexrag.eval.experiment``, picks on Macro F1 over k; this
choice is on recall, so it is made here.)
"""

import argparse
import csv
import functools
import logging
import time
import warnings
from pathlib import Path

import numpy as np

from lexrag.citations import try_parse
from lexrag.config import load_config
from lexrag.eval.cv import fold_groups, read_groups, read_locked_split
from lexrag.eval.metrics import prf, recall_at_k
from lexrag.eval.stats import bootstrap_ci
from lexrag.config.sections import WEIGHTINGS
from lexrag.index.language import is_english
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.io.csvio import FileReport, read_csv_rows
from lexrag.errors import CsvInputError
from lexrag.queries import load_gold, load_queries

import benchkit  # beside this script
from english_proxy import GermanToEnglish  # beside this script

OPTIONS = [*WEIGHTINGS, *(f"{w} + compounds" for w in WEIGHTINGS)]  # dictionary.weighting, and dictionary.compounds on


def option(cfg) -> str:
    """The entry of :data:`OPTIONS` that a config's dictionary section is."""
    return cfg.dictionary.weighting + (" + compounds" if cfg.dictionary.compounds else "")


SHIPPED = option(load_config("lexical"))  # what the `lexical` preset ships


def write_proxy(src: str, dest: Path, g2e: GermanToEnglish) -> tuple[int, int, int]:
    """``src``'s rows with their questions in pseudo-English; (questions, words translated, German words dropped)."""
    rows = [row for _, row in read_csv_rows(src, ("query_id", "query"), FileReport(src))]  # as the kit reads it
    done = dropped = 0
    for row in rows:
        row["query"], d, x = g2e.translate(row["query"])
        done, dropped = done + d, dropped + x
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return len(rows), done, dropped


@functools.cache
def read(path: str) -> tuple[list, dict]:
    """(the questions with gold, query id -> gold) of a query file, read once however often it is scored."""
    gold = {q: g for q, g in load_gold(path).items() if g}
    return [q for q in load_queries(path) if q.query_id in gold], gold


def scores(path: str | Path, art: Artifacts, option: str | None, k: int,
           extra: dict | None = None) -> dict[str, tuple[float, float | None, float]]:
    """query id -> (Recall@100, law Recall@100 or None, F1@k) of the `lexical` preset's ranking
    under one of :data:`OPTIONS` (None: the dictionary off)."""
    over = {"runtime.progress": False, "count.method": "fixed", "count.k": 300, "dictionary.enabled": option is not None}
    if option is not None:
        over["dictionary.weighting"], _, compounds = option.partition(" + ")
        over["dictionary.compounds"] = bool(compounds)
    over.update(extra or {})
    cfg = load_config("lexical", over)
    queries, gold = read(str(path))
    ranked = run_pipeline(queries, art, cfg).ranked
    out = {}
    for q, g in gold.items():
        law = [c for c in g if (p := try_parse(c)) is not None and p.kind == "law"]
        r = ranked.get(q, [])
        out[q] = (recall_at_k(g, r, 100), recall_at_k(law, r, 100) if law else None, prf(g, r[:k])[2])
    return out


def mean(rows: dict, qids, i: int) -> float:
    xs = [rows[q][i] for q in qids if rows[q][i] is not None]
    return float(np.mean(xs)) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True, help="built with the dictionary (see docs/experiments.md)")
    ap.add_argument("--dictionary", required=True, help="the Ding file the artifact was built from (/usr/share/trans/de-en)")
    ap.add_argument("--work", required=True, help="where the pseudo-English questions are written")
    ap.add_argument("--english", nargs="+", default=[], metavar="FILE",
                    help="more English query files with gold, scored beside val.csv (scripts/lexam_english.py writes one)")
    ap.add_argument("--final", action="store_true", help="also score the locked areas (the final report only)")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, files=("dictionary",), within=[("artifacts", "dictionary")])
    dev_file = f"{args.data}/lexam_dev.csv"
    if Path(args.work).exists() and not Path(args.work).is_dir():
        ap.error(f"--work {args.work}: a file, not a folder")
    for f in (dev_file, f"{args.data}/val.csv", *args.english):  # read whole now: a bad file is one line before any run
        read(f)  # with its warnings (rows left out, text re-decoded); the runs below are quiet
    warnings.simplefilter("ignore")
    course = read_groups(dev_file)  # query id -> course, for every row
    if not course or not all(course.values()):  # the nested choice holds legal areas out
        raise CsvInputError(f"{dev_file}: a course is missing (column 'course'); give lexam_dev.csv as shared, whose every "
                            "question names its course")
    logging.basicConfig(level=logging.ERROR)
    k = load_config("lexical").count.k
    t0 = time.perf_counter()
    art = Artifacts.from_folder(args.artifacts, load_config("lexical", {"dictionary.enabled": True}))
    g2e = GermanToEnglish(args.dictionary, art.bm25)
    proxy = Path(args.work) / "lexam_dev_en.csv"
    n, done, dropped = write_proxy(dev_file, proxy, g2e)
    english = sum(is_english(q.text) for q in load_queries(str(proxy)))
    print(f"{n} questions into pseudo-English ({proxy}): {done:,} words or phrases translated, {dropped:,} German words "
          f"without English dropped; {english} read as English; {time.perf_counter() - t0:.0f} s")

    areas = fold_groups(dev_file, "area")
    locked_courses = {c for a in read_locked_split().get("areas", []) for c in a["courses"]}
    runs = {w: scores(proxy, art, w, k) for w in OPTIONS}
    runs["German questions (no translation)"] = scores(dev_file, art, None, k)
    dev = [q for q in runs[SHIPPED] if course.get(q) not in locked_courses]
    locked = [q for q in runs[SHIPPED] if course.get(q) in locked_courses]
    names = sorted({areas[q] for q in dev})

    def pick(qids) -> str:  # the best mean Recall@100; ties to the shipped option, then the order of OPTIONS
        return max(OPTIONS, key=lambda w: (mean(runs[w], qids, 0), w == SHIPPED, -OPTIONS.index(w)))

    picks = {a: pick([q for q in dev if areas[q] != a]) for a in names}
    nested = {q: runs[picks[areas[q]]][q] for q in dev}
    final = pick(dev)
    print(f"{len(dev)} development questions in {len(names)} areas; F1 at the preset's k = {k}")
    print("\n| pseudo-English lexam_dev, development areas | R@100 | law R@100 | F1@k |\n| --- | --- | --- | --- |")
    for name, rows in [*runs.items(), ("nested pick", nested)]:
        print(f"| {name} | {mean(rows, dev, 0):.3f} | {mean(rows, dev, 1):.3f} | {mean(rows, dev, 2):.3f} |")
    gain = [nested[q][0] - runs[SHIPPED][q][0] for q in dev]
    lo, hi = bootstrap_ci(gain)
    ship = final if lo > 0 else SHIPPED
    print(f"\nnested picks: {', '.join(f'{a}: {w}' for a, w in picks.items())}")
    print(f"chosen on all development areas: {final}; the nested pick's Recall@100 gain over {SHIPPED}: {np.mean(gain):+.4f} "
          f"[95% CI {lo:+.4f}, {hi:+.4f}] -> the rule {'changes the default to ' + final if ship != SHIPPED else 'keeps ' + SHIPPED} "
          "(it changes only when the interval lies above 0)")
    shown = list(dict.fromkeys([SHIPPED, final]))
    if args.final:
        print(f"\n| locked areas ({len(locked)} questions), pseudo-English | R@100 | law R@100 | F1@k |\n| --- | --- | --- | --- |")
        for w in [*shown, "German questions (no translation)"]:
            print(f"| {w} | {mean(runs[w], locked, 0):.3f} | {mean(runs[w], locked, 1):.3f} | {mean(runs[w], locked, 2):.3f} |")
    for path in [f"{args.data}/val.csv", *args.english]:
        print(f"\n| {Path(path).name} (English) | R@100 | law R@100 | F1@k |\n| --- | --- | --- | --- |")
        for w in (None, *shown):
            rows = scores(path, art, w, k)
            name = "no dictionary" if w is None else w + (" (shipped)" if w == SHIPPED else "") + (" (chosen)" if w == final else "")
            print(f"| {name} | {mean(rows, rows, 0):.3f} | {mean(rows, rows, 1):.3f} | {mean(rows, rows, 2):.3f} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
