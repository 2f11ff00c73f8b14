import pytest
from lexrag.eval.metrics import (
    ap_at_k,
    evaluate,
    ndcg_at_k,
    per_query_table,
    prf,
    recall_at_k,
)


def test_prf_by_hand():
    p, r, f = prf(["A", "B", "C", "D"], ["A", "B", "X"])
    assert (p, r) == (pytest.approx(2 / 3), pytest.approx(2 / 4))
    assert f == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))


def test_competition_rules():
    assert prf([], []) == (1.0, 1.0, 1.0)  # both empty = 1
    assert prf(["A"], []) == (0.0, 0.0, 0.0)
    assert prf([], ["A"]) == (0.0, 0.0, 0.0)
    # strip and whitespace collapse, exact otherwise (case matters)
    assert prf(["Art. 1  Abs. 2 OR"], [" Art. 1 Abs. 2 OR "])[2] == 1.0
    assert prf(["Art. 1 Abs. 2 OR"], ["art. 1 abs. 2 or"])[2] == 0.0
    # duplicates in the prediction count once
    assert prf(["A"], ["A", "A"]) == (1.0, 1.0, 1.0)


def test_ranking_metrics_by_hand():
    gold = ["A", "B"]
    ranked = ["X", "A", "Y", "B"]
    assert recall_at_k(gold, ranked, 2) == 0.5
    assert recall_at_k(gold, ranked, 4) == 1.0
    import math

    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at_k(gold, ranked, 4) == pytest.approx(dcg / idcg)
    assert ap_at_k(gold, ranked, 4) == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert ap_at_k(gold, ranked, 2) == pytest.approx((1 / 2) / 2)


def test_evaluate_macro_and_missing_queries():
    gold = {"q1": ["A", "B"], "q2": ["C"], "q3": []}
    pred = {"q1": ["A"], "q3": []}
    m = evaluate(gold, pred, ks=(10,))
    f1_q1 = 2 * 1 * 0.5 / 1.5
    assert m["macro_f1"] == pytest.approx((f1_q1 + 0 + 1) / 3)
    assert m["precision"] == pytest.approx((1 + 0 + 1) / 3)
    assert m["recall"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert m["n_queries"] == 3
    rows = per_query_table(gold, pred, ks=(10,))
    assert [r["query_id"] for r in rows] == ["q1", "q2", "q3"] and rows[1]["n_pred"] == 0
    with pytest.raises(ValueError, match="no gold"):
        evaluate({}, {})
