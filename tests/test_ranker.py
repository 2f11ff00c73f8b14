"""The learned ranker: it trains on the demo slice's questions and reorders their candidates,
refuses a model trained on other features, round-trips byte for byte, and the expected-F1 count
and the laws-only order do what they say; its features are set by name, an absent one from one
table whose values are those the trained models read; the signals a training run cannot have are
those of the stages its config switches off."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lightgbm")

from lexrag.citations import scoring_form  # noqa: E402
from lexrag.config import load_config  # noqa: E402
from lexrag.errors import ArtifactError, ConfigError  # noqa: E402
from lexrag.queries import load_gold, load_queries  # noqa: E402
from lexrag.stages.count import expected_f1_count  # noqa: E402
from lexrag.stages.ranker_features import (  # noqa: E402
    ABSENT,
    FEATURE_SET,
    absent_values,
    candidate_features,
    feature_column,
    feature_names,
)

CANDIDATES = {"runtime.progress": False, "statutes.enabled": True, "articles.enabled": True, "feedback.enabled": True}


@pytest.fixture(scope="module")
def training_file(tmp_path_factory, demo_queries) -> Path:
    """The demo questions as training questions; in every other one the gold cites its law
    paragraphs' articles as a whole too, as exam answers do ("Art. 41 OR")."""
    import csv

    from lexrag.citations import parent

    rows = list(csv.DictReader(demo_queries.open(encoding="utf-8")))
    for i, r in enumerate(rows):
        gold = [g.strip() for g in r["gold_citations"].split(";") if g.strip()]
        if i % 2 == 0:
            gold += [parent(g) for g in gold if g.startswith("Art") and parent(g) != g]
        r["gold_citations"] = ";".join(dict.fromkeys(gold))
    path = tmp_path_factory.mktemp("train") / "train.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def ranked_artifacts(tmp_path_factory, demo_laws, training_file) -> Path:
    """The demo's laws with a ranker trained on the demo questions (laws only: a quick build)."""
    from lexrag.pipeline.build import build_artifacts

    out = tmp_path_factory.mktemp("ranked")
    build_artifacts(load_config(None, {**CANDIDATES, "ranker.enabled": True}), demo_laws, out, train=training_file)
    return out


def _gold_ranks(res, gold) -> list[int]:
    """The rank of every gold citation in each query's ranking (300 when absent)."""
    out = []
    for q, g in gold.items():
        pos = {scoring_form(c): i for i, c in enumerate(res.ranked.get(q, []))}
        out += [pos.get(scoring_form(x), 300) for x in g]
    return out


def test_the_ranker_trains_on_the_training_questions_and_reorders_them(ranked_artifacts, training_file):
    from lexrag.pipeline import Artifacts, run_pipeline

    params = json.loads((ranked_artifacts / "ranker" / "params.json").read_text())["params"]
    assert params["questions"] == len(load_gold(training_file)) and params["train"] == training_file.name
    assert params["questions_with_gold_in_candidates"] > 0 and "bm25_query" in params["signals"]
    gold = {q: g for q, g in load_gold(training_file).items() if g}
    queries = [q for q in load_queries(training_file) if q.query_id in gold]
    base = {**CANDIDATES, "count.method": "fixed", "count.k": 300}
    runs = {}
    for on in (False, True):
        cfg = load_config(None, {**base, "ranker.enabled": on})
        runs[on] = run_pipeline(queries, Artifacts.from_folder(ranked_artifacts, cfg), cfg)
    learned, fused = runs[True], runs[False]
    assert set(learned.current_by.values()) == {"ranker"} and set(fused.current_by.values()) == {"fused"}
    assert any(learned.ranked[q][:10] != fused.ranked[q][:10] for q in gold)  # it moved something
    for q in gold:  # a reordering: the same candidates at the top depth
        assert set(learned.ranked[q][:300]) == set(fused.ranked[q][:300]) or len(fused.ranked[q]) > 300
    # on the questions it was fitted on, the learned order puts their gold higher than the fused order
    assert np.mean(np.log1p(_gold_ranks(learned, gold))) < np.mean(np.log1p(_gold_ranks(fused, gold)))


def test_a_ranker_trained_on_other_features_is_refused_in_one_line(ranked_artifacts, tmp_path):
    from lexrag.artifacts import seal
    from lexrag.stages.ranker import LearnedRanker

    folder = tmp_path / "ranker"
    shutil.copytree(ranked_artifacts / "ranker", folder)
    doc = json.loads((folder / "params.json").read_text())
    doc["params"]["features"] = doc["params"]["features"][:-1] + ["a_feature_this_code_does_not_compute"]
    (folder / "params.json").write_text(json.dumps(seal(doc)))  # as another lexrag's build writes it, its digest with it
    with pytest.raises(ArtifactError) as e:
        LearnedRanker.load(folder)
    msg = str(e.value)
    assert "\n" not in msg and "other features" in msg and "rebuild" in msg and str(folder) in msg
    doc["params"]["features"] = json.loads((ranked_artifacts / "ranker" / "params.json").read_text())["params"]["features"]
    doc["params"]["feature_set"] = 0  # a model from an older feature set
    (folder / "params.json").write_text(json.dumps(seal(doc)))
    with pytest.raises(ArtifactError, match="other features"):
        LearnedRanker.load(folder)


def test_a_damaged_model_file_is_refused(ranked_artifacts, tmp_path):
    from lexrag.stages.ranker import LearnedRanker

    folder = tmp_path / "ranker"
    shutil.copytree(ranked_artifacts / "ranker", folder)
    (folder / "model.txt").write_text("tree\nnot a model\n")
    with pytest.raises(ArtifactError, match="model.txt"):
        LearnedRanker.load(folder)


def test_the_ranker_artifact_round_trips_byte_for_byte(ranked_artifacts, tmp_path):
    from lexrag.stages.ranker import LearnedRanker

    src = ranked_artifacts / "ranker"
    model = LearnedRanker.load(src)
    model.save(tmp_path / "again", builder=json.loads((src / "params.json").read_text())["builder"])
    for name in ("model.txt", "params.json"):
        assert (tmp_path / "again" / name).read_bytes() == (src / name).read_bytes(), name
    again = LearnedRanker.load(tmp_path / "again")
    X = np.random.default_rng(0).normal(size=(20, len(model.features)))
    assert np.allclose(again.scores(X), model.scores(X))
    assert np.allclose(again.probabilities(again.scores(X)), model.probabilities(model.scores(X)))


def test_expected_f1_count_cuts_where_the_expected_f1_peaks():
    # two likely hits then unlikely ones: E[F1] = 2*sum(p[:k]) / (k + sum(p)) peaks at 2
    assert expected_f1_count([0.9, 0.8, 0.1, 0.05]) == 2
    # in list order (a blended or laws-only order): a likely hit below an unlikely one is reached by cutting deeper
    assert expected_f1_count([0.05, 0.9, 0.1, 0.8]) == 4
    assert expected_f1_count([0.3, 0.9, 0.01, 0.01]) == 2
    # many equally likely candidates: each adds more expected hits than it costs
    assert expected_f1_count([0.2] * 10) == 10
    assert expected_f1_count([0.2] * 10, max_k=4) == 4
    assert expected_f1_count([0.99, 0.01], min_k=2) == 2
    assert expected_f1_count([]) == 0


def test_expected_f1_count_needs_the_ranker():
    with pytest.raises(ConfigError, match="ranker.enabled"):
        load_config(None, {"count.method": "expected_f1"})
    assert load_config(None, {"count.method": "expected_f1", "ranker.enabled": True}).count.method == "expected_f1"


def test_without_the_ranker_artifact_the_stage_is_missing_and_the_count_says_so(demo_artifacts, demo_queries, caplog):
    from lexrag.pipeline import Artifacts, run_pipeline

    cfg = load_config(None, {"runtime.progress": False, "ranker.enabled": True, "count.method": "expected_f1", "count.k": 4})
    art = Artifacts.from_folder(demo_artifacts, cfg, degrade=True)
    assert art.ranker is None and "ranker" in art.missing
    queries = load_queries(demo_queries)[:3]
    with caplog.at_level("WARNING"):
        res = run_pipeline(queries, art, cfg)
    assert all(len(res.predictions[q.query_id]) == 4 for q in queries)
    assert any("expected_f1" in r.message and "count.k=4" in r.message for r in caplog.records)


class _ReverseModel:
    """Scores the candidates in reverse fused order (the logic around the model is under test)."""

    signals: list[str] = []
    features = feature_names([])

    def scores(self, X):
        return np.arange(len(X), dtype=np.float64)

    def probabilities(self, raw):
        return raw / (raw.max() + 1.0)


def test_reorder_puts_the_learned_order_and_false_keeps_the_fused_one(tiny_inputs, tmp_path):
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts
    from lexrag.queries import QueryState
    from lexrag.stages.base import BatchState, Context
    from lexrag.stages.ranker import Ranker

    laws, _ = tiny_inputs
    build_artifacts(load_config(None, {"runtime.progress": False}), laws, tmp_path / "art")
    art = Artifacts.from_folder(tmp_path / "art", load_config(None, {"runtime.progress": False}))
    art.ranker = _ReverseModel()
    docs = list(range(len(art.corpus.citations)))
    fused = [(d, 1.0 - i / 100) for i, d in enumerate(docs)]
    orders, relevance = {}, {}
    for reorder in (False, True):
        batch = BatchState([QueryState("q", "Vertrag")], current={"q": fused})
        cfg = load_config(None, {"ranker.enabled": True, "ranker.reorder": reorder})
        orders[reorder] = [d for d, _ in Ranker().run(batch, Context(cfg, art)).hits["q"]]
        relevance[reorder] = batch.relevance["q"]
    assert orders[False] == docs and orders[True] == docs[::-1]
    assert relevance[False] == relevance[True][::-1]  # each candidate keeps its own probability, in the list's order


def test_laws_only_moves_the_law_candidates_and_keeps_the_court_slots(tiny_inputs, tmp_path):
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts
    from lexrag.queries import QueryState
    from lexrag.stages.base import BatchState, Context
    from lexrag.stages.ranker import Ranker

    laws, courts = tiny_inputs
    out = tmp_path / "art"
    build_artifacts(load_config(None, {"runtime.progress": False}), laws, out, courts=courts)
    art = Artifacts.from_folder(out, load_config(None, {"runtime.progress": False}))
    art.ranker = _ReverseModel()
    cits = art.corpus.citations
    docs = list(range(len(cits)))
    fused = [(d, 1.0 - i / 100) for i, d in enumerate(docs)]
    for laws_only in (False, True):
        cfg = load_config(None, {"ranker.enabled": True, "ranker.laws_only": laws_only})
        batch = BatchState([QueryState("q", "Beschwerde")], current={"q": fused})
        hits = Ranker().run(batch, Context(cfg, art)).hits["q"]
        probs = _ReverseModel().probabilities(np.arange(len(docs), dtype=np.float64))
        assert sorted(batch.relevance["q"]) == sorted(probs)  # each candidate's own probability, in the output order
        order = [cits[d] for d, _ in hits]
        before = [cits[d] for d in docs]
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        if not laws_only:
            assert order == before[::-1]
        else:
            is_law = [c.startswith("Art.") for c in before]
            assert [c for c, law in zip(order, is_law) if not law] == [c for c, law in zip(before, is_law) if not law]
            assert [c for c, law in zip(order, is_law) if law] == [c for c, law in zip(before, is_law) if law][::-1]
            assert any(not law for law in is_law) and sum(is_law) > 1


def test_the_removed_article_form_is_named_as_removed():
    from lexrag.errors import ConfigError

    with pytest.raises(ConfigError, match="ranker.article_form.*removed|removed.*ranker.article_form"):
        load_config(None, {"ranker.article_form": True})


def test_a_held_out_fold_is_ranked_by_a_ranker_fitted_without_it(ranked_artifacts, training_file):
    """The harness's refit: the fold's questions never reach the ranker that ranks them."""
    import dataclasses

    from lexrag.eval.cv import held_out_artifacts, refits_prior
    from lexrag.pipeline import Artifacts
    from lexrag.pipeline.ranker_fit import candidate_config, training_rows
    from lexrag.stages.ranker import LearnedRanker

    cfg = load_config(None, {**CANDIDATES, "ranker.enabled": True})
    art = Artifacts.from_folder(ranked_artifacts, cfg)
    gold = {q: g for q, g in load_gold(training_file).items() if g}
    queries = load_queries(training_file)
    rows, signals = training_rows(queries, gold, dataclasses.replace(art, ranker=None), candidate_config(cfg))
    assert rows.qids == [q.query_id for q in queries if q.query_id in gold]
    art = dataclasses.replace(art, ranker=LearnedRanker.fit(rows, signals, calibrate=False))
    assert refits_prior(art, cfg) and not refits_prior(art, load_config(None, CANDIDATES))
    fold = set(rows.qids[:5])
    fitted = held_out_artifacts(art, cfg, gold, {q.query_id: q.text for q in queries}, fold)
    assert fitted.ranker is not art.ranker and fitted.prior is art.prior
    assert set(fitted.ranker.rows.qids) == set(rows.qids) - fold
    # nothing held out: the same training questions, so the model already fitted (no second fit)
    assert held_out_artifacts(art, cfg, gold, {q.query_id: q.text for q in queries}, set()).ranker is art.ranker
    # a loaded artifact holds no training rows: the harness does not refit it, and says why when asked
    loaded = Artifacts.from_folder(ranked_artifacts, cfg)
    assert not refits_prior(loaded, cfg)
    with pytest.raises(ValueError, match="training rows"):
        loaded.ranker.refit(rows.qids)


def test_the_absent_values_are_the_ones_feature_set_1_models_were_trained_on():
    """Pinned: a changed absent value changes a trained model's predictions (a tree may split
    between 6.9 and 1000), so it comes with a new FEATURE_SET and a refit, never alone."""
    assert FEATURE_SET == 1 and ABSENT == 1000.0
    assert absent_values(["a", "b"]) == {
        "fused_rel": 0.0, "a_log_rank": math.log1p(1000.0), "a_rel": 0.0, "b_log_rank": math.log1p(1000.0), "b_rel": 0.0,
        "code_best_log_rank": 1000.0, "code_top10": 0.0, "code_top30": 0.0, "code_top100": 0.0, "paragraph": 0.0}
    assert set(absent_values(["a", "b"])) <= set(feature_names(["a", "b"]))  # the table names features, no typos
    with pytest.raises(KeyError, match="no feature 'is_lawful'"):
        feature_column(np.zeros((2, len(feature_names([])))), feature_names([]), "is_lawful")


def test_each_feature_is_read_by_name_and_an_absent_one_takes_the_table_value(tiny_inputs, tmp_path):
    """Laws and court decisions, a signal listing every other candidate: a candidate it does not
    list, and a decision's law-code features, read the table's values; what is present reads its
    own rank, kind and code."""
    from lexrag.pipeline import Artifacts
    from lexrag.pipeline.build import build_artifacts

    laws, courts = tiny_inputs
    cfg = load_config(None, {"runtime.progress": False})
    build_artifacts(cfg, laws, tmp_path / "art", courts=courts)
    corpus = Artifacts.from_folder(tmp_path / "art", cfg).corpus
    cits = corpus.citations
    fused = [(d, 1.0 - i / 100) for i, d in enumerate(range(len(cits)))]
    sig = [(d, 1.0 / (r + 1)) for r, (d, _) in enumerate(fused[1::2])]
    docs, ranked, X = candidate_features(fused, {"sig": sig}, ["sig"], "Kündigung nach Art. 1 OR", corpus, 300)
    names, absent = feature_names(["sig"]), absent_values(["sig"])
    assert X.shape == (len(ranked), len(names)) and [cits[d] for d in docs] == ranked

    def col(name):
        return feature_column(X, names, name)

    assert list(col("fused_rank")) == list(range(len(ranked)))
    sig_rank = {}
    for r, (d, _) in enumerate(sig):
        sig_rank.setdefault(cits[d], r)
    law = [c.startswith("Art.") for c in ranked]
    assert any(law) and not all(law) and 0 < len(sig_rank) < len(ranked)
    for i, c in enumerate(ranked):
        if c in sig_rank:
            assert col("sig_log_rank")[i] == math.log1p(sig_rank[c]) and col("signals_listing")[i] == 1
            assert 0 < col("sig_rel")[i] <= 1
        else:
            assert col("sig_log_rank")[i] == absent["sig_log_rank"] and col("sig_rel")[i] == absent["sig_rel"]
            assert col("signals_listing")[i] == 0
        assert col("is_law")[i] == float(law[i])
        if not law[i]:  # a court decision has no law code and no paragraph
            for name in ("code_best_log_rank", "code_top10", "code_top30", "code_top100", "paragraph"):
                assert col(name)[i] == absent[name], (c, name)
            assert col("code_named")[i] == 0.0
        else:
            assert col("code_best_log_rank")[i] < math.log1p(len(ranked)) and col("code_top100")[i] >= 1
            assert col("code_named")[i] == float(c.endswith(" OR")), c  # the question names the OR
    assert set(col("codes_named")) == {1.0}


def test_the_signals_a_ranker_is_never_trained_with_are_those_of_the_stages_a_training_run_switches_off():
    """CANDIDATE_OFF says once what a training run leaves out: every stage it switches off emits
    only signals not_in_training names, every stage it keeps emits trained signals but for the
    LLM's query variants and the English-only ones (the training questions are German)."""
    import lexrag.stages  # noqa: F401 - registers the stages
    from lexrag.pipeline.ranker_fit import CANDIDATE_OFF as RECORDED, candidate_config
    from lexrag.signals import TASK_VARIANTS
    from lexrag.stages.base import asked_for
    from lexrag.stages.ranker import CANDIDATE_OFF, not_in_training
    from lexrag.stages.ranker.training import LANGUAGE_SIGNALS

    assert RECORDED is CANDIDATE_OFF
    every = load_config(None, {"llm.enabled": True, "llm.model": "m", "semantic.enabled": True, "semantic.model": "e",
                               "rerank.enabled": True, "rerank.model": "r", "verify.enabled": True, "agent.enabled": True,
                               "prior.enabled": True, "statutes.enabled": True, "statutes.learned": True,
                               "articles.enabled": True, "feedback.enabled": True, "english.enabled": True,
                               "dictionary.enabled": True, "graph.enabled": True, "ranker.enabled": True})
    kept = {s.name for s in asked_for(candidate_config(every))}
    dropped = [s for s in asked_for(every) if s.name not in kept]
    assert {"prior", "dense", "llm_seeds", "verify", "agent"} <= {s.name for s in dropped}
    for stage in dropped:
        assert all(not_in_training(x) for x in stage.signals), stage.name
    llm_variants = {f"bm25_{v}" for v in TASK_VARIANTS.values()}
    for stage in asked_for(every):
        if stage.name in kept:
            for x in stage.signals:
                assert not_in_training(x) == (x in llm_variants or x in LANGUAGE_SIGNALS), x


def test_a_signal_no_training_run_has_is_said_at_info_one_its_build_left_out_is_a_warning(tiny_inputs, tmp_path, caplog,
                                                                                         monkeypatch):
    from lexrag.pipeline import Artifacts
    from lexrag.pipeline.build import build_artifacts
    from lexrag.queries import QueryState
    from lexrag.ranking import Ranking
    from lexrag.stages.base import BatchState, Context
    from lexrag.stages.ranker import Ranker, stage

    laws, _ = tiny_inputs
    cfg = load_config(None, {"runtime.progress": False, "ranker.enabled": True})
    build_artifacts(load_config(None, {"runtime.progress": False}), laws, tmp_path / "art")
    art = Artifacts.from_folder(tmp_path / "art", load_config(None, {"runtime.progress": False}))
    art.ranker = _ReverseModel()
    monkeypatch.setattr(stage, "_WARNED", set())
    fused = [(d, 1.0 - i / 100) for i, d in enumerate(range(len(art.corpus.citations)))]
    for signal, level in (("dense_query", "INFO"), ("bm25_query", "WARNING")):
        caplog.clear()
        batch = BatchState([QueryState("q", "Vertrag")], current={"q": fused},
                           signals={signal: Ranking(signal, "lexical", {"q": fused[:3]})})
        with caplog.at_level("INFO", logger="lexrag.stages.ranker"):
            Ranker().run(batch, Context(cfg, art))
        said = [r for r in caplog.records if signal in r.message and "trained without" in r.message]
        assert [r.levelname for r in said] == [level], (signal, [(r.levelname, r.message) for r in caplog.records])
