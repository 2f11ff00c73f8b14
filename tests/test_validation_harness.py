"""The validation harness: grouped folds, signals computed once, stages that are off contribute
nothing, the tuning command, the expected-score checker and the report."""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lexrag.config import load_config
from lexrag.eval.cv import grouped_folds
from lexrag.pipeline import Artifacts, SignalCache, run_pipeline
from lexrag.queries import load_queries

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo"


def test_folds_never_split_a_course():
    qids = [f"q{i}" for i in range(100)]
    groups = {q: f"course{i % 7}" for i, q in enumerate(qids)}
    folds = grouped_folds(qids, groups)
    assert len(folds) == 7 and sorted(q for f in folds for q in f) == sorted(qids)
    for f in folds:
        assert len({groups[q] for q in f}) == 1  # leave-one-course-out
    many = {q: f"c{i % 50}" for i, q in enumerate(qids)}
    folds = grouped_folds(qids, many, max_folds=10)
    assert len(folds) == 10
    seen = {}
    for i, f in enumerate(folds):
        for q in f:
            assert seen.setdefault(many[q], i) == i  # a course sits in one fold only


def test_courses_that_cite_the_same_law_codes_form_one_legal_area():
    from lexrag.eval.cv import area_groups, code_overlap, format_area_map, legal_areas, locked_areas

    gold = {"t1": ["Art. 1 DBG", "Art. 2 DBG", "Art. 3 OR"], "t2": ["Art. 5 DBG"],  # tax
            "u1": ["Art. 9 DBG", "Art. 4 VStG"], "u2": ["Art. 7 DBG", "Art. 1 OR"],  # company tax
            "m1": ["Art. 1 AIG", "Art. 8 BV"], "m2": ["Art. 3 AsylG"],  # migration
            "w1": ["Art. 1 OR", "Art. 2 ZGB"], "w2": ["BGE 140 III 1 E. 2"]}  # one OR citation in common with tax
    courses = {"t1": "Steuer", "t2": "Steuer", "u1": "UStR", "u2": "UStR", "m1": "Migration", "m2": "Migration",
               "w1": "Wertpapier", "w2": "Wertpapier"}
    areas = legal_areas(gold, courses)
    assert areas["Steuer"] == areas["UStR"] == "Steuer + UStR"  # DBG: 0.75 and 0.5 of their law citations
    assert areas["Migration"] == "Migration" and areas["Wertpapier"] == "Wertpapier"
    assert legal_areas(gold, courses, threshold=0.9)["UStR"] == "UStR"  # the threshold decides
    assert legal_areas(dict(reversed(gold.items())), dict(reversed(courses.items()))) == areas  # order does not matter
    assert code_overlap({"OR": 0.5, "DBG": 0.5}, {"OR": 0.2, "ZGB": 0.8}) == pytest.approx(0.2)
    q_area = area_groups(courses, areas)
    folds = grouped_folds(list(gold), q_area)
    assert len(folds) == 3 and sorted(len(f) for f in folds) == [2, 2, 4]
    text = format_area_map(gold, courses, areas)
    assert text.splitlines()[0].startswith("area  1 (4 questions; DBG 0.62, OR 0.25") and text.count("area ") == 3
    locked = locked_areas(areas, {"Steuer + UStR": 4, "Migration": 2, "Wertpapier": 2}, seed=0)
    assert len(locked) == 1 and locked == locked_areas(areas, {"Steuer + UStR": 4, "Migration": 2, "Wertpapier": 2}, seed=0)


def test_without_a_course_column_folds_are_by_query_with_a_warning(caplog):
    with caplog.at_level("WARNING"):
        folds = grouped_folds([f"q{i}" for i in range(12)], {})
    assert len(folds) == 5 and "overstates" in caplog.text


def _with_courses(tmp_path, demo_queries) -> Path:
    rows = demo_queries.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "dev.csv"
    path.write_text("\n".join([rows[0] + ",course"] + [f"{r},{'c%d' % (i % 3)}" for i, r in enumerate(rows[1:])]) + "\n",
                    encoding="utf-8")
    return path


def test_no_signal_is_computed_twice_across_ablation_rows_and_grid_points(tmp_path, demo_artifacts, demo_queries, monkeypatch):
    from lexrag.eval.tune import tune
    from lexrag.eval.validation import ablation_table, incremental_ablation
    from lexrag.stages.lexical import BM25Variants

    searched = collections.Counter()
    real = BM25Variants.search
    monkeypatch.setattr(BM25Variants, "search", staticmethod(lambda art, lc, text: searched.update([text]) or real(art, lc, text)))
    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    cache = SignalCache()
    incremental_ablation(cfg, art, demo_queries, tmp_path / "inc", cache=cache)
    ablation_table(cfg, art, demo_queries, tmp_path / "abl")
    assert searched and max(searched.values()) == 2  # once for the incremental rows, once for the leave-one-out rows
    searched.clear()
    res = tune(cfg, art, _with_courses(tmp_path, demo_queries), {"count.k": [1, 3, 5], "fusion.weights.bm25_query": [1.0, 2.0]})
    assert res["points"] == 6 and max(searched.values()) == 1  # six grid points, each text searched once
    graph_calls = [k for k, v in cache.computed.items() if k[0] == "graph" and v > 1]
    assert not graph_calls


def test_a_stage_switched_off_contributes_nothing(demo_artifacts, demo_queries):
    import dataclasses

    queries = load_queries(demo_queries)
    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    off = load_config(DEMO / "config.yaml", {"runtime.progress": False, "graph.enabled": False})
    a = run_pipeline(queries, art, off)
    b = run_pipeline(queries, dataclasses.replace(art, graph=None), off)
    assert not [s for s in a.signals if s.family == "graph"] and a.fused.hits == b.fused.hits
    # lexical off: the graph stage may not pick documents by BM25 either (the leak): the same as without the index
    nolex = load_config(DEMO / "config.yaml", {"runtime.progress": False, "lexical.enabled": False})
    c = run_pipeline(queries, art, nolex)
    d = run_pipeline(queries, dataclasses.replace(art, bm25=None), nolex)
    assert not [s for s in c.signals if s.family == "lexical"] and c.fused.hits == d.fused.hits


def test_tune_reports_in_sample_and_grouped_cv_and_writes_a_config_that_loads(tmp_path, demo_artifacts, demo_queries, capsys):
    from lexrag.cli import main

    dev = _with_courses(tmp_path, demo_queries)
    out = tmp_path / "tuned.yaml"
    rc = main(["tune", "--queries", str(dev), "--artifacts", str(demo_artifacts), "--config", str(DEMO / "config.yaml"),
               "--grid", "count.k=1,2,5", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "in-sample" in text and "grouped by course, 3 folds" in text  # the demo's courses share one area
    assert text.strip().splitlines()[-1].startswith("nested Macro F1")  # the headline comes last
    picks = text.split("picked on the other folds: ")[1].splitlines()[0]
    assert sum(int(n) for n in re.findall(r"in (\d+) of 3 folds", picks)) == 3 and "count.k" in picks
    tuned = load_config(out)
    assert tuned.count.k in (1, 2, 5) and "nested by course (3 folds)" in out.read_text().splitlines()[1]
    assert main(["tune", "--queries", str(dev), "--artifacts", str(demo_artifacts), "--grid", "count.k=0,5"]) == 2  # k=0 refused


def test_nested_choices_never_read_the_outer_fold(monkeypatch):
    # A fake pipeline stands in: a query ranked with a prior that has seen its own fold puts its gold
    # first (k = 1 scores 1), one ranked without it puts the gold fifth (k = 5 is best).  The inner
    # rankings of fold i must come from priors fitted without fold i and without their own fold, so
    # each outer fold picks k = 5 on them, whatever the outer rankings would favour.
    import types

    import numpy as np

    import lexrag.eval.experiment as ex

    fitted_without = []

    def fake_artifacts(art, cfg, gold, texts, exclude):
        fitted_without.append(frozenset(exclude))
        return types.SimpleNamespace(exclude=frozenset(exclude))

    def fake_run(queries, art, cfg, cache=None, paths=None):
        ranked = {}
        for q in queries:
            seen = q.query_id not in art.exclude
            ranked[q.query_id] = ["Art. 1 X"] + ["Art. 9 Y"] * 0 + [f"Art. {i} Z" for i in range(2, 6)] if seen else \
                [f"Art. {i} Z" for i in range(2, 6)] + ["Art. 1 X"]
        return types.SimpleNamespace(ranked=ranked, predictions=ranked)

    monkeypatch.setattr(ex, "held_out_artifacts", fake_artifacts)
    monkeypatch.setattr(ex, "run_pipeline", fake_run)
    monkeypatch.setattr(ex, "refits_prior", lambda art, cfg: True)
    qids = [f"q{i}" for i in range(9)]
    gold = {q: ["Art. 1 X"] for q in qids}
    groups = {q: f"area{i % 3}" for i, q in enumerate(qids)}
    queries = {q: types.SimpleNamespace(query_id=q, text=q) for q in qids}
    fs = ex.fold_scores(None, None, queries, gold, groups)
    assert len(fs.folds) == 3 and all(np.argmax(v) == 4 for v in fs.outer.values())  # held out: gold at 5
    for i, fold in enumerate(fs.folds):
        assert set(fs.inner[i]) == set(qids) - set(fold)  # the outer fold's queries are never scored inside
    pairs = [e for e in fitted_without if len(e) == 6]
    assert len(pairs) == 6 and all(any(set(f) <= e for f in fs.folds) for e in pairs)  # without i and j
    assert [k for _, k in ex.nested_picks([fs])] == [5, 5, 5]
    # a second variant whose inner scores are better is picked fold by fold
    better = ex.FoldScores(fs.folds, fs.outer, [{q: v + 1 for q, v in d.items()} for d in fs.inner], fs.recall100, fs.ranked)
    assert [v for v, _ in ex.nested_picks([fs, better])] == [1, 1, 1]


@pytest.mark.parametrize("preset", ["exam", "kaggle"])
def test_the_incremental_ablation_has_one_row_per_stage_of_the_preset(preset):
    from lexrag.eval.validation import _apply, incremental_steps, stage_switches
    from lexrag.stages.base import asked_for

    cfg = load_config(preset)
    stages = set(stage_switches(cfg))  # every stage the preset asks for that a section switches
    steps = incremental_steps(cfg)
    first = _apply(cfg, steps[0]["overrides"])
    assert steps[0]["run"] == "BM25" and {s.name for s in asked_for(first)} == {"bm25", "fusion", "count"}  # BM25 alone
    added = [n for st in steps for n in st["adds"] if n != "count"]
    assert sorted(added) == sorted(stages)  # each stage in exactly one row
    done: set[str] = set()
    for st in steps:  # each row's config asks for exactly the stages added so far
        done |= {n for n in st["adds"] if n != "count"}
        assert {s.name for s in asked_for(_apply(cfg, st["overrides"]))} & stages == done
    if preset == "exam":  # a row per stage, then the learned count over the last row's order
        assert len(steps) == len(stages) + 1 == 10 and all(len(st["adds"]) == 1 for st in steps)
        assert {"dictionary", "statutes", "articles", "feedback", "graph", "prior", "ranker"} <= stages
        assert steps[-1]["run"] == "+learned count" and steps[-1]["overrides"]["count.method"] == "expected_f1"
        assert all(st["overrides"]["count.method"] == "fixed" for st in steps[:-1])
    else:  # the LLM seeds need the rewrite's switch and the seeds' together: they share the rewrite's row
        shared = [st["adds"] for st in steps if len(st["adds"]) > 1]
        assert shared == [["rewrite", "llm_seeds"]] and steps[-1]["run"] == "+adaptive count"
        assert all(st["overrides"]["count.method"] == "fixed" for st in steps[:-1])


def test_variants_parse_as_presets_plus_overrides():
    from lexrag.eval.variants import GPU_STAGES_OFF, parse_variant

    from lexrag.errors import ConfigError

    with pytest.raises(ConfigError, match="count.k is given twice"):
        parse_variant("exam;count.k=3;count.k=7")
    v = parse_variant("no learned=exam;statutes.learned=false;count.k=5")
    assert (v.name, v.preset, dict(v.overrides)) == ("no learned", "exam", {"statutes.learned": False, "count.k": 5})
    assert parse_variant("default").preset is None and parse_variant("lexical").config().graph.enabled is False
    kaggle = parse_variant("kaggle (CPU stages)")
    assert kaggle.preset == "kaggle" and dict(kaggle.overrides) == GPU_STAGES_OFF
    cfg = kaggle.config()
    assert not (cfg.semantic.enabled or cfg.llm.enabled or cfg.rerank.enabled) and cfg.count.method == "fixed"
    # a preset that counts with the learned count keeps it (scored as emitted); the others rank deep at a fixed count
    exam = parse_variant("exam").config()
    assert (exam.count.method, exam.count.k, exam.ranker.enabled) == ("expected_f1", 5, True)
    fixed = parse_variant("exam fixed=exam;ranker.enabled=false;count.method=fixed").config()
    assert (fixed.count.method, fixed.count.k) == ("fixed", 300)
    assert parse_variant("lexical").config().count.k == 300


def test_the_score_checker_passes_the_demo_and_fails_a_regression(tmp_path):
    from lexrag.eval.expect import check_expected

    good = {"macro_f1": 0.357, "precision": 0.227, "recall": 0.909, "recall@10": 0.932, "recall@100": 0.955, "n_queries": 22}
    assert {r["status"] for r in check_expected(good, DEMO / "expected.yaml")} == {"OK"}
    better = {**good, "macro_f1": 0.5}
    assert {r["status"] for r in check_expected(better, DEMO / "expected.yaml")} == {"OK"}  # direction: higher
    worse = {**good, "macro_f1": 0.343, "recall@100": 0.80}
    status = {r["metric"]: r["status"] for r in check_expected(worse, DEMO / "expected.yaml")}
    assert status["macro_f1"] == "OKish" and status["recall@100"] == "FAIL"
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"metrics": worse}))
    r = subprocess.run([sys.executable, "-m", "lexrag", "check-scores", str(metrics), "--expected", str(DEMO / "expected.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "FAIL" in r.stdout


def test_statute_detection_reads_abbreviations_and_names_from_the_corpus(demo_artifacts, demo_queries):
    from lexrag.index.corpus import Corpus
    from lexrag.index.statutes import detector_for

    corpus = Corpus(demo_artifacts / "corpus")
    det = detector_for(corpus)
    assert det.detect("Gilt nach dem Obligationenrecht und Art. 8 ZGB auch die StPO?") == ["OR", "ZGB"]  # no StPO text here
    assert det.detect("Wie lange dauert die Kündigungsfrist?") == []
    assert det.detect("Zivilgesetzbuch, Strafgesetzbuch, OR, SchKG", max_codes=2) == ["ZGB", "StGB"]
    assert det.detect("Is the lessee liable under Art. 41 CO?") == ["OR"]  # the corpus's aliases (English built in)
    # the English name of a major act, in the order named; a code the corpus lacks is not named
    assert det.detect("Is the claim time-barred under the Code of Obligations or the Swiss Civil Code?") == ["OR", "ZGB"]
    assert det.detect("Does the Military Criminal Code apply?") == []  # not the Criminal Code's StGB
    # another language's abbreviation counts where an article is cited with it, in the order named
    from dataclasses import replace

    det_fr = replace(det, aliases={"CO": "OR", "LLC": "ZGB"})
    assert det_fr.detect("Orion Transport LLC rents a truck (Art. 267a CO) and Art. 8 ZGB") == ["OR", "ZGB"]
    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False, "statutes.enabled": True})
    res = run_pipeline(load_queries(demo_queries), Artifacts.from_folder(demo_artifacts, cfg), cfg)
    sig = next(s for s in res.signals if s.signal == "bm25_statute")
    q17 = sig.hits["demo_17"]  # "... self-defence under Art. 15 StGB": only StGB paragraphs
    assert q17 and all(corpus.citations[d].endswith(" StGB") for d, _ in q17)
    assert "demo_05" not in sig.hits  # names no statute: no signal
    agreed = next(s for s in res.signals if s.signal == "bm25_statute_agreed")  # named codes are agreed codes
    assert [d for d, _ in agreed.hits["demo_17"]][: len(q17)] == [d for d, _ in q17]  # the same ranking, kept deeper
    assert "demo_05" not in agreed.hits  # nothing named and no learned model to agree with the vote


def test_statistics_edge_cases_and_grid_values_with_commas():
    from lexrag.eval.stats import bootstrap_ci, paired_p_value
    from lexrag.eval.tune import parse_grid

    assert paired_p_value([0.0] * 20, [1.0] * 20) > 0  # Monte Carlo: never exactly 0
    assert paired_p_value([0.0] * 10, [1.0] * 10) == pytest.approx(2 / 1024)  # exact for few queries
    assert paired_p_value([0.3], [0.3]) == 1.0 and bootstrap_ci([0.3]) == (0.3, 0.3)
    grid = parse_grid(["lexical.variants=[query],[query,de]", "count.k=3,5"])
    assert grid == {"lexical.variants": [["query"], ["query", "de"]], "count.k": [3, 5]}


def test_queries_without_a_course_are_their_own_group(caplog):
    qids = [f"q{i}" for i in range(6)]
    groups = {"q0": "a", "q1": "a", "q2": "b", "q3": "", "q4": "", "q5": "b"}
    with caplog.at_level("WARNING"):
        folds = grouped_folds(qids, groups)
    assert sorted(map(sorted, folds)) == [["q0", "q1"], ["q2", "q5"], ["q3"], ["q4"]] and "no course" in caplog.text


def test_article_ranking_scores_articles_from_their_paragraphs(demo_artifacts, demo_queries):
    import numpy as np

    from lexrag.index.corpus import Corpus
    from lexrag.stages.articles import _ArticleIndex, article_scores

    corpus = Corpus(demo_artifacts / "corpus")
    index = _ArticleIndex(corpus)
    scores = np.zeros(len(corpus))
    p1, p2 = corpus.citations.index("Art. 41 Abs. 1 OR"), corpus.citations.index("Art. 41 Abs. 2 OR")
    solo = corpus.citations.index("Art. 8 ZGB")
    scores[p1], scores[p2], scores[solo] = 2.0, 1.0, 2.2
    a = article_scores(index, scores, 0.3)
    assert a[index.article[p1]] == pytest.approx(2.3) and a[index.article[solo]] == pytest.approx(2.2)
    rnd = np.random.default_rng(0).random(len(corpus)) * (np.random.default_rng(1).random(len(corpus)) < 0.3)
    by_article: dict = {}  # an independent computation: each article's paragraph scores, by a loop
    for d, (parent, source) in enumerate(zip(corpus.parents, corpus.sources)):
        if source == "law":
            by_article.setdefault(index.article[d], []).append(rnd[d])
    expected = np.zeros(index.n)
    for i, xs in by_article.items():
        expected[i] = max(xs) + 0.3 * (sum(xs) - max(xs))
    assert len(by_article) == index.n and np.allclose(article_scores(index, rnd, 0.3), expected)
    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False, "articles.enabled": True, "articles.top_articles": 3})
    res = run_pipeline(load_queries(demo_queries), Artifacts.from_folder(demo_artifacts, cfg), cfg)
    sig = next(s for s in res.signals if s.signal == "bm25_article")
    for qid, hits in sig.hits.items():  # whole articles, at most three of them, each article's paragraphs together
        arts = [corpus.parents[d] for d, _ in hits]
        assert len(set(arts)) <= 3 and arts == sorted(arts, key=arts.index)


def test_the_learned_statute_model_predicts_codes_from_training_questions_and_ships_with_the_prior(tmp_path):
    from lexrag.index.prior import TrainingPrior, build_prior

    train = tmp_path / "train.csv"
    train.write_text("query_id,query,gold_citations\n"
                     "t1,Kündigung des Mietvertrags durch den Vermieter,Art. 271 OR\n"
                     "t2,Mietzins und Kündigung der Wohnung,Art. 269 OR\n"
                     "t3,Scheidung der Ehe nach Getrenntleben,Art. 114 ZGB\n"
                     "t4,Unterhalt nach der Scheidung der Ehegatten,Art. 125 ZGB\n", encoding="utf-8")
    prior = build_prior(train, tmp_path / "prior")
    loaded = TrainingPrior.load(tmp_path / "prior")
    assert loaded.questions == prior.questions and len(loaded.questions) == 4
    assert loaded.codes_for("Kann der Vermieter die Wohnung kündigen?", 1) == ["OR"]
    assert loaded.codes_for("Wann ist eine Scheidung möglich?", 1) == ["ZGB"]
    assert TrainingPrior({"t1": ["Art. 271 OR"]}).codes_for("Kündigung") == []  # no questions: no model
    cfg = load_config(DEMO / "config.yaml", {"statutes.enabled": True, "statutes.learned": True})
    # a fold's prior and statute model know only the other folds' gold and questions
    from lexrag.eval.cv import held_out_artifacts

    art = Artifacts(corpus=None, bm25=None, prior=loaded)
    texts = dict(loaded.questions)
    fold = held_out_artifacts(art, cfg, loaded.gold, texts, {"t3", "t4"})
    assert set(fold.prior.gold) == {"t1", "t2"} and set(fold.prior.questions) == {"t1", "t2"}
    assert fold.prior.codes_for("Wann ist eine Scheidung möglich?", 1) != ["ZGB"]  # ZGB was only in the held-out fold
    assert loaded.codes_for("Wann ist eine Scheidung möglich?", 1) == ["ZGB"]  # the artifacts' own prior is untouched
    assert held_out_artifacts(art, load_config(DEMO / "config.yaml"), loaded.gold, texts, {"t3"}) is art  # no prior read


def test_feedback_expands_the_question_with_the_words_of_its_top_documents(demo_artifacts, demo_queries):
    from lexrag.stages.feedback import expansion_terms

    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False, "feedback.enabled": True})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    q = "Wer haftet für Schaden?"
    ids, _ = art.bm25.search(q, 5)
    terms = expansion_terms(art.bm25, art.corpus.texts(ids.tolist()), set(art.bm25.analyzer(q)), 10)
    assert terms and len(terms) <= 10 and not set(terms) & set(art.bm25.analyzer(q))
    res = run_pipeline(load_queries(demo_queries), art, cfg)
    assert next(s for s in res.signals if s.signal == "bm25_prf").hits  # the signal reaches fusion


def test_the_report_without_matplotlib_keeps_its_tables_and_says_the_plots_are_left_out(tmp_path, monkeypatch):
    import json
    import sys

    from lexrag.eval.report import NO_PLOTS, plot_ablation, write_report

    (tmp_path / "metrics.json").write_text(json.dumps({"queries": 3, "metrics": {"macro_f1": 0.25}}), encoding="utf-8")
    (tmp_path / "ablation.csv").write_text("run,status,macro_f1,recall@100\nfull,ok,0.25,0.5\n- graph,ok,0.2,0.4\n", encoding="utf-8")
    with_plots = write_report(tmp_path).read_text(encoding="utf-8")
    assert "data:image/png" in with_plots and NO_PLOTS not in with_plots
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not installed: importing it raises ImportError
    doc = write_report(tmp_path).read_text(encoding="utf-8")
    assert "- graph" in doc and "0.2500" in doc and "data:image/png" not in doc and NO_PLOTS in doc
    assert plot_ablation([{"run": "full", "macro_f1": 0.25, "recall@100": 0.5}], tmp_path / "a.png") is None
    assert not (tmp_path / "a.png").exists()


def test_final_without_a_locked_split_or_with_a_malformed_one_is_refused(tmp_path):
    """Without the locked split the "final" report would tune on the areas it claims to hold out;
    a course written as a string instead of a list would lock nothing."""
    from lexrag.errors import ConfigError
    from lexrag.eval.cv import read_locked_split
    from lexrag.eval.experiment import run_experiment
    from lexrag.eval.variants import parse_variant

    bad = tmp_path / "locked.yaml"
    bad.write_text("areas:\n  - courses: Steuerrecht\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="a course written as one string would lock nothing"):
        read_locked_split(bad)
    data = tmp_path / "data"
    data.mkdir()
    (data / "dev.csv").write_text("query_id,query,gold_citations,course\nq1,Frage,Art. 1 OR,A\nq2,Frage,Art. 2 OR,B\n",
                                  encoding="utf-8")
    with pytest.raises(ConfigError, match="--final needs the locked split"):
        run_experiment([parse_variant("lexical")], data, tmp_path / "art", tune_on="dev.csv", others=(), final=True, locked={})


def test_a_saved_run_is_read_back_and_re_fused_to_the_same_order(tmp_path, demo_artifacts, demo_queries):
    import subprocess
    import sys

    from lexrag.config import load_config
    from lexrag.eval.runs import read_run_file
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    cfg = load_config(None, {"runtime.progress": False, "graph.enabled": True})
    _, result = validate_run(cfg, Artifacts.from_folder(demo_artifacts, cfg), demo_queries, tmp_path / "v")
    run = read_run_file(tmp_path / "v" / "signals.parquet")
    assert run.predictions == result.predictions
    assert {r.signal for r in run.signals} == {r.signal for r in result.signals}
    assert run.current.signal == result.current.signal and run.current.hits == result.current.hits
    # another process re-fuses the saved signals with the run's config: the order the run fused
    code = ("import json, sys\nfrom lexrag.config import load_config\nfrom lexrag.eval.runs import read_run_file\n"
            "from lexrag.stages.fusion import fuse\n"
            "cfg = load_config(None, {'graph.enabled': True})\nrun = read_run_file(sys.argv[1])\n"
            "qids = sorted(run.fused.hits)\n"
            "f = fuse(run.signals, cfg, qids, cfg.fusion.boost)\n"
            "print(json.dumps({q: [d for d, _ in f.hits[q]] for q in qids}))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "v" / "signals.parquet")], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    refused = json.loads(out.strip().splitlines()[-1])
    assert refused == {q: [d for d, _ in h] for q, h in result.fused.hits.items()}
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    from lexrag.errors import CsvInputError

    with pytest.raises(CsvInputError, match="bad.parquet: not a run file"):
        read_run_file(bad)


def test_lexrag_fuse_re_fuses_a_saved_run_as_a_run_with_those_settings_would(tmp_path, demo_artifacts, demo_queries):
    """`lexrag fuse` in another process: the run's own settings give its scores back, and other
    fusion settings give the scores a run with them gets, without running a stage again."""
    import subprocess
    import sys

    from lexrag.config import load_config
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    def scores(out: str, row: str) -> list[float]:
        line = next(x for x in out.splitlines() if x.startswith(row))
        return [float(v) for v in line[len(row):].split()]

    def fuse(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lexrag", "-q", "fuse", str(tmp_path / "v"), *args],
                              capture_output=True, text=True, timeout=120)

    over = {"runtime.progress": False, "graph.enabled": True}
    cfg = load_config(None, over)
    art = Artifacts.from_folder(demo_artifacts, cfg)
    saved, _ = validate_run(cfg, art, demo_queries, tmp_path / "v")
    other, _ = validate_run(load_config(None, {**over, "fusion.rrf_k": 1}), art, demo_queries, tmp_path / "v1")
    r = fuse("--set", "fusion.rrf_k=1")
    assert r.returncode == 0, r.stderr
    assert "note:" not in r.stdout  # the saved settings re-fused give the saved fused order
    assert scores(r.stdout, "saved settings") == pytest.approx(
        [saved[k] for k in ("macro_f1", "recall@10", "recall@100", "ndcg@10")], abs=1e-4)
    assert scores(r.stdout, "with --set") == pytest.approx(
        [other[k] for k in ("macro_f1", "recall@10", "recall@100", "ndcg@10")], abs=1e-4)
    r = fuse("--set", "rerank.enabled=true")
    assert r.returncode == 2 and r.stderr.startswith("error: --set rerank.…: a saved run is re-fused only"), r.stderr
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "fuse", str(tmp_path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "no signals.parquet there" in r.stderr and len(r.stderr.splitlines()) == 1
