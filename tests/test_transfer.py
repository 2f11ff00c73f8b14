"""Issue 12: retrieval that transfers to unseen legal areas (statute vote, SR-number weight)."""

from __future__ import annotations

import numpy as np
import pytest

from lexrag.config import ConfigError, load_config
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import QueryState, load_queries
from lexrag.stages.statutes import StatuteDetector

from conftest import DEMO


def _detector(codes):
    return StatuteDetector(codes, frozenset(c for c in codes if c and not c[0].isdigit()), {})


def test_the_statute_vote_damps_codes_the_best_hits_do_not_agree_on():
    #        0     1     2      3      4           5   6
    codes = ["OR", "OR", "OR", "ZGB", "831.131", "", "ZGB"]
    det = _detector(codes)
    scores = np.array([5.0, 4.0, 1.0, 3.0, 2.5, 2.2, 0.0], dtype=np.float32)
    out = det.rescore(scores, vote=1.0, depth=5, numbered_weight=1.0)
    # the top 5 scores: OR 5+4, ZGB 3, 831.131 2.5 vote; the court document 5 does not
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


def test_the_lexical_stage_applies_the_vote_and_the_weight_is_range_checked(demo_artifacts):
    every = {"runtime.progress": False, "lexical.top_k": 100_000}  # every hit, so the two lists hold the same documents
    base = load_config(DEMO / "config.yaml", {**every, "lexical.code_vote": 0.0, "lexical.numbered_code_weight": 1.0})
    voted = load_config(DEMO / "config.yaml", {**every, "lexical.code_vote": 3.0})
    q = [QueryState("q", "Der Arbeitgeber kündigt das Arbeitsverhältnis fristlos; hat der Arbeitnehmer Anspruch auf Lohn?")]
    art = Artifacts.load(demo_artifacts, base)
    plain = run_pipeline(q, art, base)
    lifted = run_pipeline(q, Artifacts.load(demo_artifacts, voted), voted)
    sig = lambda res: [d for d, _ in next(s for s in res.signals if s.signal == "bm25_query").hits["q"]]
    a, b = sig(plain), sig(lifted)
    assert sorted(a) == sorted(b)  # the same documents, reordered: the vote filters nothing
    top_code = art.corpus.citations[b[0]].split()[-1]
    codes = [art.corpus.citations[d].split()[-1] for d in b]
    first_other = next(i for i, c in enumerate(codes) if c != top_code)
    assert a != b and codes[:first_other] == [top_code] * first_other and first_other >= 3
    with pytest.raises(ConfigError, match="numbered_code_weight"):
        load_config(None, {"lexical.numbered_code_weight": 1.5})
