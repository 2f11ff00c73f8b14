"""The learned ranker: it trains on the demo slice's questions and reorders their candidates,
refuses a model trained on other features, round-trips byte for byte, and the expected-F1 count
and the laws-only order do what they say."""

from __future__ import annotations

import json
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
from lexrag.stages.ranker_features import feature_names  # noqa: E402

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
        runs[on] = run_pipeline(queries, Artifacts.load(ranked_artifacts, cfg), cfg)
    learned, fused = runs[True], runs[False]
    assert set(learned.current_by.values()) == {"ranker"} and set(fused.current_by.values()) == {"fused"}
    assert any(learned.ranked[q][:10] != fused.ranked[q][:10] for q in gold)  # it moved something
    for q in gold:  # a reordering: the same candidates at the top depth
        assert set(learned.ranked[q][:300]) == set(fused.ranked[q][:300]) or len(fused.ranked[q]) > 300
    # on the questions it was fitted on, the learned order puts their gold higher than the fused order
    assert np.mean(np.log1p(_gold_ranks(learned, gold))) < np.mean(np.log1p(_gold_ranks(fused, gold)))


def test_a_ranker_trained_on_other_features_is_refused_in_one_line(ranked_artifacts, tmp_path):
    from lexrag.stages.ranker import LearnedRanker

    folder = tmp_path / "ranker"
    shutil.copytree(ranked_artifacts / "ranker", folder)
    doc = json.loads((folder / "params.json").read_text())
    doc["params"]["features"] = doc["params"]["features"][:-1] + ["a_feature_this_code_does_not_compute"]
    (folder / "params.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError) as e:
        LearnedRanker.load(folder)
    msg = str(e.value)
    assert "\n" not in msg and "other features" in msg and "rebuild" in msg and str(folder) in msg
    doc["params"]["features"] = json.loads((ranked_artifacts / "ranker" / "params.json").read_text())["params"]["features"]
    doc["params"]["feature_set"] = 0  # a model from an older feature set
    (folder / "params.json").write_text(json.dumps(doc))
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
    art = Artifacts.load(demo_artifacts, cfg, degrade=True)
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
    art = Artifacts.load(tmp_path / "art", load_config(None, {"runtime.progress": False}))
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
    art = Artifacts.load(out, load_config(None, {"runtime.progress": False}))
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
    art = Artifacts.load(ranked_artifacts, cfg)
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
    loaded = Artifacts.load(ranked_artifacts, cfg)
    assert not refits_prior(loaded, cfg)
    with pytest.raises(ValueError, match="training rows"):
        loaded.ranker.refit(rows.qids)
