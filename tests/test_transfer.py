"""Retrieval that transfers to unseen legal areas (statute vote, SR-number weight), and the presets the harness measures."""

from __future__ import annotations

import numpy as np
import pytest

from lexrag.config import ConfigError, load_config
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import QueryState, load_queries
from lexrag.index.statutes import StatuteDetector

from conftest import DEMO


def _detector(codes):
    return StatuteDetector(codes, frozenset(c for c in codes if c and not c[0].isdigit()), {})


def test_the_statute_vote_damps_codes_the_best_hits_do_not_agree_on():
    #        0     1     2      3      4           5   6
    codes = ["OR", "OR", "OR", "ZGB", "831.131", "", "ZGB"]
    det = _detector(codes)
    scores = np.array([5.0, 4.0, 1.0, 3.0, 2.5, 2.2, 0.0], dtype=np.float32)
    out = det.rescore(scores, vote=1.0, depth=4, numbered_weight=1.0)
    # the 4 best law paragraphs vote: OR 5+4, ZGB 3, 831.131 2.5 (the court document 5 never votes)
    assert out[0] == 5.0 and out[2] == 1.0  # the agreed code keeps its scores
    assert out[3] == pytest.approx(3.0 * (1 + 3 / 9) / 2)  # a code with a third of the vote loses a third
    assert out[4] == pytest.approx(2.5 * (1 + 2.5 / 9) / 2)
    assert out[5] == pytest.approx(2.2)  # a court document is never damped: it now ranks above ZGB
    assert out[6] == 0  # a zero score stays zero: the vote never invents a hit
    assert np.argsort(-out, kind="stable").tolist()[:4] == [0, 1, 5, 3]
    same = det.rescore(scores, vote=0.0, depth=4, numbered_weight=1.0)
    assert np.array_equal(same, scores)
    damped = det.rescore(scores, vote=0.0, depth=4, numbered_weight=0.5)
    assert damped[4] == pytest.approx(1.25) and damped[0] == 5.0
    assert det.rescore(scores, vote=0.0, depth=4, numbered_weight=0.0)[4] == 0
    assert np.array_equal(det.rescore(np.zeros(7, np.float32), 1.0, 4, 1.0), np.zeros(7))  # nothing found, nothing voted
    # the depth counts law paragraphs: court hits above them do not crowd the vote out
    court_first = np.array([1.0, 0.5, 0.0, 0.8, 0.0, 9.0, 0.0], dtype=np.float32)
    voted = det.rescore(court_first, vote=1.0, depth=1, numbered_weight=1.0)  # OR's 1.0 is the best law hit
    assert voted[0] == 1.0 and voted[3] == pytest.approx(0.4) and voted[5] == 9.0  # ZGB holds no vote: halved


def test_the_lexical_stage_applies_the_vote_and_the_weight_is_range_checked(demo_artifacts):
    every = {"runtime.progress": False, "lexical.top_k": 100_000}  # every hit, so the two lists hold the same documents
    base = load_config(DEMO / "config.yaml", {**every, "lexical.code_vote": 0.0, "lexical.numbered_code_weight": 1.0})
    voted = load_config(DEMO / "config.yaml", {**every, "lexical.code_vote": 3.0})
    q = [QueryState("q", "Der Arbeitgeber kündigt das Arbeitsverhältnis fristlos; hat der Arbeitnehmer Anspruch auf Lohn?")]
    art = Artifacts.from_folder(demo_artifacts, base)
    plain = run_pipeline(q, art, base)
    lifted = run_pipeline(q, Artifacts.from_folder(demo_artifacts, voted), voted)
    sig = lambda res: [d for d, _ in next(s for s in res.signals if s.signal == "bm25_query").hits["q"]]
    a, b = sig(plain), sig(lifted)
    assert sorted(a) == sorted(b)  # the same documents, reordered: the vote filters nothing
    top_code = art.corpus.citations[b[0]].split()[-1]
    codes = [art.corpus.citations[d].split()[-1] for d in b]
    first_other = next(i for i, c in enumerate(codes) if c != top_code)
    assert a != b and codes[:first_other] == [top_code] * first_other and first_other >= 3
    with pytest.raises(ConfigError, match="numbered_code_weight"):
        load_config(None, {"lexical.numbered_code_weight": 1.5})


@pytest.mark.parametrize("overrides,message", [
    ({"graph.signals": {"popular": True}}, "graph.signals.popular was removed"),
    ({"seeds.expand_decisions": True}, "config key seeds.expand_decisions was removed"),
])
def test_a_removed_key_or_signal_is_named_as_removed_not_unknown(overrides, message):
    with pytest.raises(ConfigError, match=message) as e:
        load_config(None, overrides)
    assert "never measured to help" in str(e.value) and "delete it from the config" in str(e.value)


# internal limits and weights that no preset set and no measurement chose: now constants of the modules that use them
FIXED = {"corpus.max_error_examples": ("lexrag.index.corpus_build", "MAX_ERROR_EXAMPLES"),
         "lexical.code_vote_depth": ("lexrag.stages.lexical", "CODE_VOTE_DEPTH"),
         "statutes.learned_codes": ("lexrag.index.statutes", "LEARNED_CODES"),
         "statutes.vote_depth": ("lexrag.index.statutes", "VOTE_DEPTH"),
         "articles.sum_weight": ("lexrag.stages.articles", "SUM_WEIGHT"),
         "feedback.term_weight": ("lexrag.stages.feedback", "TERM_WEIGHT"),
         "graph.alpha": ("lexrag.stages.graph_signals", "PPR_ALPHA"),
         "graph.docs_per_node": ("lexrag.stages.graph_signals", "DOCS_PER_NODE"),
         "graph.hits_max_nodes": ("lexrag.stages.graph_signals", "HITS_MAX_NODES"),
         "verify.expand_weight": ("lexrag.stages.verify", "EXPAND_WEIGHT"),
         "agent.evidence_items": ("lexrag.stages.agent", "EVIDENCE_ITEMS"),
         "agent.evidence_chars": ("lexrag.stages.agent", "EVIDENCE_CHARS"),
         "llm.json_retries": ("lexrag.llm.rewrite", "JSON_RETRIES"),
         "lexical.query_dedup": ("lexrag.index.lexical", "QUERY_DEDUP"),
         "feedback.docs": ("lexrag.stages.feedback", "FEEDBACK_DOCS"),
         "feedback.terms": ("lexrag.stages.feedback", "FEEDBACK_TERMS"),
         "articles.top_k": ("lexrag.stages.articles", "TOP_K"),
         "semantic.top_k": ("lexrag.stages.semantic", "TOP_K"),
         "rerank.top_n": ("lexrag.stages.rerank", "TOP_N"),
         "graph.community_resolution": ("lexrag.config.sections", "COMMUNITY_RESOLUTION"),
         "graph.leiden_seed": ("lexrag.index.graph", "LEIDEN_SEED"),
         "prior.top_k": ("lexrag.stages.graph", "PRIOR_TOP_K")}


@pytest.mark.parametrize("key", sorted(FIXED))
def test_a_fixed_knob_set_in_a_config_or_by_set_is_one_line_naming_it_and_its_value(key, tmp_path):
    import importlib

    from lexrag.config import parse_overrides
    from lexrag.config.fields import REMOVED

    module, name = FIXED[key]
    value = getattr(importlib.import_module(module), name)
    assert REMOVED[key].startswith(f"now fixed at {value}: ")  # the message says the value the code uses
    section, field = key.split(".")
    config = tmp_path / "c.yaml"
    config.write_text(f"{section}:\n  {field}: {value}\n", encoding="utf-8")
    for path, overrides in ((config, None), (None, parse_overrides([f"{key}={value}"]))):
        with pytest.raises(ConfigError) as e:
            load_config(path, overrides)
        message = str(e.value)
        assert message.endswith(f"config key {key} was removed ({REMOVED[key]}): delete it from the config")
        assert "\n" not in message and "never measured" not in message


@pytest.mark.parametrize("overrides,message", [
    ({"count.method": "relative"}, "count.method=relative was removed (the relative count "),
    ({"count.threshold": 0.9}, "config key count.threshold was removed (the relative count "),
    ({"count.relative_min_k": 2}, "config key count.relative_min_k was removed (the relative count "),
])
def test_the_relative_count_is_named_as_moved_to_its_experiment(overrides, message, tmp_path):
    (section, field), value = next(iter(overrides.items()))[0].split("."), next(iter(overrides.values()))
    config = tmp_path / "c.yaml"
    config.write_text(f"{section}:\n  {field}: {value}\n", encoding="utf-8")
    for path, over in ((None, overrides), (config, None)):
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as e:
            load_config(path, over)
        assert "scripts/experiment_count.py" in str(e.value) and "\n" not in str(e.value)


MAX_FIELDS = 125  # issue 55: a field that no preset and no measured result uses leaves the product config


def test_the_config_holds_at_most_125_fields_and_no_removed_key():
    import dataclasses

    from lexrag.config import Config
    from lexrag.config.fields import REMOVED

    cfg = Config()
    fields = {f"{s.name}.{f.name}" for s in dataclasses.fields(cfg) for f in dataclasses.fields(getattr(cfg, s.name))}
    assert len(fields) <= MAX_FIELDS, f"the config has {len(fields)} fields, at most {MAX_FIELDS}"
    assert not fields & set(REMOVED)  # a key still there would never get its message


def test_the_score_curve_cut_emits_at_least_one_and_at_most_max_k():
    from lexrag.stages.count import curve_cut

    cits, scores = ["a", "b", "c", "d"], [2.0, 1.9, 1.0, 0.2]
    assert curve_cut(cits, scores, 0.9, 10) == ["a", "b"]  # 1.9 / 2.0 reaches 0.9, 1.0 / 2.0 does not
    assert curve_cut(cits, scores, 0.05, 3) == ["a", "b", "c"]  # capped at max_k
    assert curve_cut(cits, [0.0, 0.0, 0.0, 0.0], 0.9, 10) == ["a"]  # no positive top score: still one
    assert curve_cut([], [], 0.9, 10) == []


def test_the_vote_reports_the_code_the_best_law_hits_agree_on():
    codes = ["OR", "OR", "ZGB", "", "ZGB"]
    det = _detector(codes)
    scores = np.array([2.0, 2.0, 3.0, 9.0, 0.5], dtype=np.float32)
    assert det.voted(scores, depth=4, k=1) == ["OR"]  # OR 4.0 beats ZGB 3.5; the court hit never votes
    assert det.voted(scores, depth=1, k=2) == ["ZGB"]  # only the best law hit votes; a code without votes is not listed
    assert det.voted(np.zeros(5, np.float32), depth=4, k=2) == []


def test_statute_codes_puts_named_codes_before_the_learned_ones_and_caps_them():
    from lexrag.index.prior import TrainingPrior
    from lexrag.index.statutes import statute_codes

    det = StatuteDetector(["OR", "ZGB", "StGB"], frozenset({"OR", "ZGB", "StGB"}), {"strafgesetzbuch": "StGB"})
    prior = TrainingPrior({"t1": ["Art. 271 OR"], "t2": ["Art. 114 ZGB"]},
                          questions={"t1": "Kündigung der Mietwohnung durch den Vermieter", "t2": "Scheidung der Ehe auf Klage"})
    sc = load_config(None, {"statutes.enabled": True, "statutes.learned": True, "statutes.max_codes": 2}).statutes
    text = "Nach dem Strafgesetzbuch: darf der Vermieter die Mietwohnung kündigen?"
    assert statute_codes(det, text, sc, prior) == ["StGB", "OR"]  # named first, then the model's best guess
    assert statute_codes(det, text, sc, None) == ["StGB"]  # no prior: named codes only
    plain = load_config(None, {"statutes.max_codes": 2}).statutes  # learned off
    assert statute_codes(det, text, plain, prior) == ["StGB"]
    one = load_config(None, {"statutes.learned": True, "statutes.max_codes": 1}).statutes
    assert statute_codes(det, text, one, prior) == ["StGB"]  # the cap holds


def test_code_prediction_scores_codes_against_the_codes_of_the_gold_citations():
    from lexrag.citations import law_codes
    from lexrag.eval.metrics import code_prediction

    assert law_codes(["Art. 8 ZGB", "Art. 1 Abs. 2 OR", "BGE 145 II 32 E. 3.1", "Art. 9 ZGB", "nonsense"]) == ["ZGB", "OR"]
    gold = {"a": ["Art. 8 ZGB", "Art. 1 Abs. 2 OR"], "b": ["Art. 41 OR"], "c": ["BGE 145 II 32 E. 3.1"]}
    m = code_prediction(gold, {"a": ["ZGB", "StGB", "ZGB"], "b": [], "c": ["OR"]})
    # c cites no law and is not scored; a: 1 of 2 predicted right, half its codes; b: nothing predicted
    assert m == {"precision": 0.5, "recall": 0.25, "per_query": 1.0, "n": 2}
    assert code_prediction({"c": ["BGE 145 II 32 E. 3.1"]}, {})["n"] == 0


def test_whole_articles_follow_their_nth_paragraph_and_take_a_slot_of_the_count(demo_artifacts):
    from lexrag.stages.count import with_whole_articles

    cits = ["Art. 41 Abs. 1 OR", "Art. 8 ZGB", "Art. 41 Abs. 2 OR", "BGE 145 II 32 E. 3.1", "Art. 2 Abs. 1 lit. a ZGB",
            "Art. 41 Abs. 3 OR", "Art. 2 Abs. 2 ZGB"]
    scores = [7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    out, s = with_whole_articles(cits, scores, 2)
    assert out == ["Art. 41 Abs. 1 OR", "Art. 8 ZGB", "Art. 41 Abs. 2 OR", "Art. 41 OR", "BGE 145 II 32 E. 3.1",
                   "Art. 2 Abs. 1 lit. a ZGB", "Art. 41 Abs. 3 OR", "Art. 2 Abs. 2 ZGB", "Art. 2 ZGB"]
    assert s == [7.0, 6.0, 5.0, 5.0, 4.0, 3.0, 2.0, 1.0, 1.0]  # the article takes its paragraph's score: still sorted
    assert with_whole_articles(cits, scores, 1)[0][:2] == ["Art. 41 Abs. 1 OR", "Art. 41 OR"]
    assert with_whole_articles(cits, scores, 0) == (cits, scores)  # off
    already = ["Art. 41 Abs. 1 OR", "Art. 41 OR", "Art. 41 Abs. 2 OR"]  # an article string in the order stays put
    assert with_whole_articles(already, [3.0, 2.0, 1.0], 1)[0] == already
    # one further down moves up to the insertion point, so the cut list is a prefix of the full one
    later = ["Art. 41 Abs. 1 OR", "Art. 41 Abs. 2 OR", "Art. 8 ZGB", "Art. 41 OR"]
    full = with_whole_articles(later, [4.0, 3.0, 2.0, 1.0], 2)
    assert full == (["Art. 41 Abs. 1 OR", "Art. 41 Abs. 2 OR", "Art. 41 OR", "Art. 8 ZGB"], [4.0, 3.0, 3.0, 2.0])
    for k in range(len(later) + 1):
        cut = with_whole_articles(later[:k], [4.0, 3.0, 2.0, 1.0][:k], 2)[0]
        assert cut == full[0][: len(cut)]
    # in the pipeline: the emitted list keeps its length, the article takes the last slot's place
    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False, "count.method": "fixed", "count.k": 5})
    on = load_config(DEMO / "config.yaml", {"runtime.progress": False, "count.method": "fixed", "count.k": 5, "count.whole_articles": 1})
    qs = load_queries(DEMO / "queries_demo.csv")[:3]
    art = Artifacts.from_folder(demo_artifacts, cfg)
    plain, whole = run_pipeline(qs, art, cfg), run_pipeline(qs, art, on)
    for q in plain.query_ids:
        expect = with_whole_articles(plain.ranked[q], range(len(plain.ranked[q]), 0, -1), 1)[0]
        assert whole.ranked[q] == expect and whole.predictions[q] == expect[:5]
        assert any(" Abs. " not in c and c not in plain.ranked[q] for c in whole.predictions[q])
    with pytest.raises(ConfigError, match="whole_articles"):
        load_config(None, {"count.whole_articles": -1})


def test_the_harness_measures_the_retrieval_the_kaggle_preset_runs():
    # the harness's "kaggle (CPU stages)" variant is the preset itself with only the GPU and LLM stages off
    from lexrag.eval.variants import GPU_STAGES_OFF, PRESET_VARIANTS
    from lexrag.eval.validation import stage_switches

    v = next(v for v in PRESET_VARIANTS if v.name == "kaggle (CPU stages)")
    cfg, preset = v.config(), load_config("kaggle")
    for section in ("lexical", "seeds", "graph", "prior", "statutes", "feedback", "articles", "fusion"):
        assert getattr(cfg, section) == getattr(preset, section), section
    assert set(GPU_STAGES_OFF) == {f"{s}.enabled" for s in ("semantic", "rerank", "llm", "verify", "agent")}
    stages = {x.name: x for x in every_stage()}
    needs = {n for s in stage_switches(cfg) for n in getattr(stages[s], "needs", None) or ()}
    assert not needs & {"llm", "semantic", "reranker"}  # nothing it runs needs a GPU model


def every_stage():
    from lexrag.stages.base import registered_stages

    return registered_stages()


def test_the_exam_preset_is_the_kaggle_retrieval_with_whole_articles():
    # the "exam" preset: the kaggle preset's CPU retrieval, plus whole articles, cut by the learned
    # count over the fused order (the ranker's probabilities, not its order)
    exam, kaggle = load_config("exam"), load_config("kaggle")
    for section in ("lexical", "seeds", "graph", "prior", "statutes", "feedback", "articles", "fusion"):
        assert getattr(exam, section) == getattr(kaggle, section), section
    assert exam.count.method == "expected_f1" and exam.count.whole_articles == 1
    assert exam.ranker.enabled and not exam.ranker.reorder
    assert not exam.semantic.enabled and not exam.llm.enabled and not exam.rerank.enabled  # runs on a CPU


def test_the_ceilings_show_where_f1_at_three_is_lost():
    from lexrag.eval.experiment_scores import ceilings

    gold = {"a": ["Art. 41 OR", "Art. 97 Abs. 1 OR"], "b": ["Art. 8 ZGB"]}
    ranked = {"a": ["Art. 41 Abs. 1 OR", "Art. 41 Abs. 2 OR", "Art. 1 OR", "Art. 97 Abs. 1 OR"],
              "b": ["Art. 1 ZGB", "Art. 8 ZGB", "Art. 2 ZGB"]}
    c = ceilings(gold, ranked, k=3)
    # a: nothing in its first three (F1 0); b: 1 of 3 emitted, 1 gold: 2 * 1/3 * 1 / (1/3 + 1) = 0.5
    assert c["as ranked"] == pytest.approx(0.25)
    # a written in the gold's form: "Art. 41 OR" (once, for both paragraphs), "Art. 1 OR", "Art. 97 Abs. 1 OR"
    # -> 2 of 3 emitted, 2 of 2 gold: 0.8; b unchanged
    assert c["oracle citation form"] == pytest.approx((0.8 + 0.5) / 2)
    # cut at the gold count: a at 2 -> 0; b at 1 -> "Art. 1 ZGB" -> 0
    assert c["k = gold count"] == 0.0
    # best k: a at 4 -> 1 of 4, 1 of 2 gold: 1/3; b at 2 -> 1 of 2, 1 of 1: 2/3
    assert c["best k per question"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_agreed_codes_are_the_named_ones_and_those_the_vote_and_the_learned_model_both_rank_high():
    from lexrag.index.prior import TrainingPrior
    from lexrag.index.statutes import agreed_codes

    #                  0     1      2      3       4
    det = StatuteDetector(["OR", "OR", "ZGB", "StGB", ""], frozenset({"OR", "ZGB", "StGB"}), {"strafgesetzbuch": "StGB"})
    prior = TrainingPrior({"t1": ["Art. 271 OR"], "t2": ["Art. 114 ZGB"], "t3": ["Art. 1 StGB"]},
                          questions={"t1": "Kündigung der Mietwohnung durch den Vermieter", "t2": "Scheidung der Ehe auf Klage",
                                     "t3": "Diebstahl einer Sache"})
    sc = load_config(None, {"statutes.learned": True, "statutes.agree": 1.5}).statutes
    text = "Darf der Vermieter die Mietwohnung kündigen?"  # the model's best guess is OR
    or_hits = np.array([3.0, 2.0, 1.0, 0.0, 9.0], dtype=np.float32)  # the vote: OR 5 (best), ZGB 1; the court hit never votes
    assert agreed_codes(det, text, sc, prior, scores=or_hits) == ["OR"]  # both rank OR first: 1 + 1
    zgb_hits = np.array([0.5, 0.0, 4.0, 0.0, 0.0], dtype=np.float32)  # the vote now favours ZGB, the model still OR
    assert agreed_codes(det, text, sc, prior, scores=zgb_hits) == []  # neither code reaches 1.5: no agreement
    loose = load_config(None, {"statutes.learned": True, "statutes.agree": 1.0}).statutes
    assert agreed_codes(det, text, loose, prior, scores=zgb_hits)[:2] == ["OR", "ZGB"]  # each predictor's best counts now
    named = "Nach dem Strafgesetzbuch: darf der Vermieter die Mietwohnung kündigen?"
    assert agreed_codes(det, named, sc, prior, scores=or_hits) == ["StGB", "OR"]  # a named code is always agreed, first
    assert agreed_codes(det, text, sc, None, scores=or_hits) == []  # no learned model: only named codes
    # the model ranks a question's codes once; another k slices the same ranking, another question re-ranks
    assert prior.scored_codes(text, 1) == prior.scored_codes(text, 3)[:1] and prior.scored_codes(text, 1)[0][0] == "OR"
    assert prior.scored_codes("Scheidung der Ehe", 1)[0][0] == "ZGB"
    assert det.vote_shares(or_hits, 3) == {"OR": 1.0, "ZGB": pytest.approx(0.2)}
    off = load_config(None, {"statutes.learned": True, "statutes.agree": 0}).statutes
    assert agreed_codes(det, named, off, prior, scores=or_hits) == []  # 0: no agreed signal at all
    with pytest.raises(ConfigError, match="statutes.agree"):
        load_config(None, {"statutes.agree": -1})


def test_the_default_config_loads_in_a_fresh_interpreter():
    """The default fusion weights name a signal a stage registers (bm25_statute_agreed): loading
    the config first thing, as build_datasets.py does, must not depend on the stages being imported."""
    import subprocess
    import sys

    code = "from lexrag.config import load_config; print(load_config(None).fusion.weights['bm25_statute_agreed'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.5"


def test_the_statute_stage_emits_the_codes_the_vote_and_the_learned_model_agree_on(demo_artifacts, demo_queries):
    import dataclasses

    from lexrag.index.prior import TrainingPrior

    cfg = load_config(DEMO / "config.yaml", {"runtime.progress": False, "statutes.enabled": True, "statutes.learned": True})
    # a learned model that has seen tenancy and employment questions cite OR and divorce questions cite ZGB
    prior = TrainingPrior({"t1": ["Art. 337 Abs. 1 OR"], "t2": ["Art. 253 OR"], "t3": ["Art. 114 ZGB"]},
                          questions={"t1": "Der Arbeitgeber kündigt das Arbeitsverhältnis fristlos.",
                                     "t2": "Der Vermieter verlangt vom Mieter den Mietzins.",
                                     "t3": "Die Ehegatten verlangen die Scheidung ihrer Ehe."})
    plain = load_config(DEMO / "config.yaml", {"runtime.progress": False})  # the demo has no prior artifact to load
    art = dataclasses.replace(Artifacts.from_folder(demo_artifacts, plain), prior=prior)
    queries = {q.query_id: q for q in load_queries(demo_queries)}
    res = run_pipeline([queries["demo_07"]], art, cfg)  # "Wann ist die Kündigung eines Arbeitsverhältnisses missbräuchlich?"
    agreed = next(s for s in res.signals if s.signal == "bm25_statute_agreed").hits["demo_07"]
    cits = [art.corpus.citations[d] for d, _ in agreed]
    assert cits and all(c.endswith(" OR") for c in cits)  # the vote and the model both point at OR; nothing else
    assert "Art. 336 Abs. 1 OR" in cits[:10]  # its gold, found inside the agreed code
    named = next(s for s in res.signals if s.signal == "bm25_statute").hits["demo_07"]
    assert len(agreed) > len(named)  # 300 deep against bm25_statute's 100: OR alone holds more than 100 hits
    off = load_config(DEMO / "config.yaml", {"runtime.progress": False, "statutes.enabled": True, "statutes.learned": True,
                                             "statutes.agree": 0.0})
    assert not any(s.signal == "bm25_statute_agreed" and s.hits for s in run_pipeline([queries["demo_07"]], art, off).signals)


def test_the_similar_questions_prior_votes_the_gold_of_the_nearest_training_questions():
    from lexrag.index.prior import TrainingPrior

    prior = TrainingPrior({"t1": ["Art. 271 OR", "Art. 2 ZGB"], "t2": ["Art. 271 OR"], "t3": ["Art. 114 ZGB"]},
                          questions={"t1": "Kündigung der Mietwohnung durch den Vermieter",
                                     "t2": "Der Vermieter kündigt die Mietwohnung missbräuchlich",
                                     "t3": "Scheidung der Ehe auf Klage"})
    got = prior.similar("Darf der Vermieter die Mietwohnung kündigen?", neighbours=2)
    assert [c for c, _ in got] == ["Art. 271 OR", "Art. 2 ZGB"]  # both neighbours cite Art. 271 OR; the divorce question is no neighbour
    assert got[0][1] > got[1][1] > 0
    one = prior.similar("Darf der Vermieter die Mietwohnung kündigen?", neighbours=1)
    assert {c for c, _ in one} in ({"Art. 271 OR", "Art. 2 ZGB"}, {"Art. 271 OR"})  # one neighbour: its gold only
    own = prior.similar("Scheidung der Ehe auf Klage", query_id="t3", neighbours=3)
    assert "Art. 114 ZGB" not in dict(own)  # the query's own training question is left out
    assert prior.similar("Darf der Vermieter kündigen?", neighbours=0) == []
    assert TrainingPrior({"t1": ["Art. 271 OR"]}).similar("Kündigung") == []  # no questions: nothing


def test_whole_articles_can_leave_the_first_slots_as_ranked():
    from lexrag.stages.count import with_whole_articles

    cits = ["Art. 41 Abs. 1 OR", "Art. 8 ZGB", "Art. 2 Abs. 1 ZGB", "Art. 97 Abs. 1 OR", "Art. 2 Abs. 2 ZGB", "Art. 41 OR"]
    scores = [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    out, s = with_whole_articles(cits, scores, 1, start=3)
    # the first three stay as ranked; the articles due there follow them in their paragraphs' order,
    # then each article follows its first paragraph, and "Art. 41 OR" further down is not repeated
    assert out == ["Art. 41 Abs. 1 OR", "Art. 8 ZGB", "Art. 2 Abs. 1 ZGB", "Art. 41 OR", "Art. 2 ZGB", "Art. 97 Abs. 1 OR",
                   "Art. 97 OR", "Art. 2 Abs. 2 ZGB"]
    assert s == sorted(s, reverse=True)  # an article takes the score of the citation it follows
    assert with_whole_articles(cits, scores, 1, start=0) == with_whole_articles(cits, scores, 1)
    assert with_whole_articles(cits, scores, 1, start=100)[0] == cits  # never past the first slots: nothing inserted
    for k in range(len(cits) + 1):  # a cut list is still a prefix of the full one
        cut = with_whole_articles(cits[:k], scores[:k], 1, start=3)[0]
        assert cut == out[: len(cut)]
    with pytest.raises(ConfigError, match="whole_articles_from"):
        load_config(None, {"count.whole_articles_from": -1})


def test_the_pipeline_leaves_the_first_slots_as_ranked_when_told(demo_artifacts):
    from lexrag.stages.count import with_whole_articles

    base = {"runtime.progress": False, "count.method": "fixed", "count.k": 5}
    cfg = load_config(DEMO / "config.yaml", base)
    on = load_config(DEMO / "config.yaml", {**base, "count.whole_articles": 1, "count.whole_articles_from": 2})
    qs = load_queries(DEMO / "queries_demo.csv")[:4]
    art = Artifacts.from_folder(demo_artifacts, cfg)
    plain, whole = run_pipeline(qs, art, cfg), run_pipeline(qs, art, on)
    for q in plain.query_ids:
        expect = with_whole_articles(plain.ranked[q], range(len(plain.ranked[q]), 0, -1), 1, start=2)[0]
        assert whole.ranked[q] == expect and whole.predictions[q] == expect[:5]
        assert whole.predictions[q][:2] == plain.predictions[q][:2]
        assert any(" Abs. " not in c and c not in plain.ranked[q] for c in whole.predictions[q])
