"""The time budget stops an optional LLM stage inside a question: the LLM client refuses a
generation batch once the budget is spent and gives the others the seconds left as their time
limit; a cut answer is neither cached nor used, the stage's work on the question is undone and
the stage is dropped for the rest of the run, which the status says.  The clock is a fake one
that the scripted model's simulated cost moves; the real model's part is checked on a tiny
random Qwen2 with its generate call wrapped."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lexrag.config import load_config
from lexrag.errors import BudgetSpent
from lexrag.eval.status import run_status
from lexrag.eval.submission import write_submission
from lexrag.llm.cache import LLMCache
from lexrag.llm.client import LLMClient
from lexrag.llm.prompts import load_template
from lexrag.llm.scripted import ScriptedLM, write_script
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import Query

Q1 = "Wer haftet, wenn jemand einem anderen widerrechtlich und fahrlässig einen Schaden zufügt?"
Q2 = "Welche Kündigungsfrist gilt für ein Arbeitsverhältnis im zweiten bis neunten Dienstjahr?"
Q3 = "Wann verjährt eine Forderung aus einem Vertrag?"
TASKS = ["translate", "hyde", "sparse", "dense"]



def cached_templates(cache: Path) -> list[str]:
    with sqlite3.connect(cache / "cache.sqlite") as con:
        return sorted(r[0] for r in con.execute("SELECT template FROM generations"))


@pytest.mark.parametrize("per_call, ran, how", [
    (100.0, ["hyde", "sparse", "translate"], "not started"),  # three calls fill the 300 s; the fourth is refused
    (120.0, ["hyde", "translate"], "cut"),  # the third call gets the 60 s left as its limit and is cut
])
def test_the_budget_cuts_the_llm_rewrite_inside_the_first_question(tmp_path, demo_artifacts, clock, per_call, ran, how):
    """A 300 s budget, LLM calls of 100 s (or 120 s) each, four rewrite tasks a question: the
    rewrite is stopped inside question 1 (before, the whole question ran: 400 s or 480 s), the
    question keeps no variant, the cache holds only the answers that finished, the result and
    the status name the drop and the question, and every question is answered."""
    model = write_script(tmp_path / "m", default_output="Haftung Schaden Vertrag Verschulden",
                         seconds_per_call=per_call)
    cfg = load_config(overrides={
        "runtime.progress": False, "llm.enabled": True, "llm.backend": "scripted", "llm.model": str(model),
        "llm.cache_dir": str(tmp_path / "cache"), "llm.tasks": TASKS, "runtime.time_budget_s": 300.0,
        "runtime.reserve_s": 0.0, "runtime.stage_estimates_s": {"rewrite": 10.0}})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    queries = [Query("q1", Q1), Query("q2", Q2), Query("q3", Q3)]
    start = clock.t
    res = run_pipeline(queries, art, cfg)

    assert clock.t - start == 300.0  # the run spent its budget and not a second more
    assert "rewrite" in res.dropped and "inside query 'q1'" in res.dropped["rewrite"] and how in res.dropped["rewrite"]
    assert res.skipped["rewrite"] == ["q1", "q2", "q3"]
    q1 = res.states[0]
    assert not any(v.origin.startswith("llm:") for v in q1.variants.values())
    assert not q1.concepts and not q1.llm_citations
    assert res.costs["q1"]["rewrite"]["llm_calls"] == len(ran)  # the calls made are booked; their answers unused
    # the answers that finished are kept for a later run; the cut or refused one is not there
    assert [t.split("@")[0].split(":")[0] for t in cached_templates(tmp_path / "cache")] == ran
    status = run_status(cfg, art, res)
    row = status.to_dict()["stages"]["rewrite"]
    assert status.status == "DEGRADED" and row["state"] == "dropped" and row["queries"] == 0
    assert "dropped by the time budget" in row["why"] and "inside query 'q1'" in row["why"]
    out = tmp_path / "submission.csv"
    write_submission(out, res.predictions, res.query_ids)
    assert res.query_ids == ["q1", "q2", "q3"] and all(res.predictions[q] for q in res.query_ids)
    assert len(out.read_text(encoding="utf-8").strip().splitlines()) == 1 + len(queries)


def plan(queries):
    return json.dumps({"queries": queries, "done": False})


def test_an_agent_cut_inside_a_round_keeps_the_rounds_before_it(tmp_path, demo_artifacts, clock):
    """Planner calls of 100 s under a 150 s budget: round 1 finishes, round 2's planner call gets
    the 50 s left and is cut; the question keeps round 0 and 1 and the agent's order, and the
    status notes the cut.  Before, every round ran to the round limit."""
    rules = [
        {"when": ["plan searches", "- Kündigung Arbeitsverhältnis"], "output": plan(["Betrug Vermögensschaden"]), "seconds": 100},
        {"when": ["plan searches", "- Haftung Verschulden"], "output": plan(["Kündigung Arbeitsverhältnis"]), "seconds": 100},
        {"when": ["plan searches"], "output": plan(["Haftung Verschulden"]), "seconds": 100},
        {"when": ["Would a decision answering"], "yes": 0.9},
    ]
    cfg = load_config(overrides={
        "runtime.progress": False, "llm.enabled": True, "llm.backend": "scripted", "llm.model": str(write_script(tmp_path / "m", rules)),
        "llm.cache_dir": str(tmp_path / "cache"), "llm.tasks": [], "agent.enabled": True, "agent.max_rounds": 3,
        "agent.observe_depth": 5, "runtime.time_budget_s": 150.0, "runtime.reserve_s": 0.0,
        "runtime.stage_estimates_s": {"agent": 1.0}})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    start = clock.t
    res = run_pipeline([Query("q1", Q1)], art, cfg)
    assert clock.t - start == 150.0
    assert [r["round"] for r in res.traces] == [0, 1]
    assert "agent" not in res.dropped and res.current_by == {"q1": "agent"}
    assert any("inside a round" in n and "1 queries keep the rounds before it" in n for n in art.notes)
    assert [t.split("@")[0].split(":")[0] for t in cached_templates(tmp_path / "cache")].count("plan") == 1


# ---------------------------------------------------------------- the model's time limit


class _Spy:
    """Wraps a model's ``generate``: records each call's keywords; ``stop_after`` tokens imitates
    transformers' ``max_time`` stopping the batch mid-answer (deterministically, no clock)."""

    def __init__(self, generate, stop_after: int | None = None):
        self.generate, self.stop_after, self.calls = generate, stop_after, []

    def __call__(self, **kw):
        self.calls.append({k: v for k, v in kw.items() if k not in ("input_ids", "attention_mask")})
        kw.pop("max_time", None)
        if self.stop_after is not None:
            kw["max_new_tokens"] = self.stop_after
            kw["eos_token_id"] = None  # no answer ends on its own before the cut
        return self.generate(**kw)


@pytest.fixture(scope="module")
def tiny_lm(tiny_llm):
    from lexrag.models import load_causal_lm

    return load_causal_lm(tiny_llm, "none", "cpu")


def test_causal_lm_passes_the_time_left_to_generate_and_a_cut_answer_is_not_cached(tmp_path, tiny_lm, monkeypatch):
    real = tiny_lm.model.generate
    prompt = tiny_lm.render_chat([{"role": "user", "content": "Wer haftet für den Schaden?"}])
    spy = _Spy(real)
    monkeypatch.setattr(tiny_lm.model, "generate", spy)
    (text, n_in, n_out), = tiny_lm.generate([prompt], 8, max_time=42.0)
    assert spy.calls[-1]["max_time"] == 42.0 and n_in > 0 and 0 < n_out <= 8
    tiny_lm.generate([prompt], 8)
    assert "max_time" not in spy.calls[-1]  # no budget: no limit
    spy.stop_after = 3  # the limit stopped the batch after 3 of 8 tokens
    with pytest.raises(BudgetSpent, match="time limit of 42.0s after 3 of 8 tokens"):
        tiny_lm.generate([prompt], 8, max_time=42.0)

    # through the client: the seconds the budget has left are the limit; a cut answer is never stored
    lc = load_config(overrides={"llm.model": "tiny", "llm.quantization": "none"}).llm
    left = [50.0]
    loads = []
    client = LLMClient(lc, LLMCache(tmp_path / "cache"), lambda: loads.append(1) or tiny_lm, "tiny",
                       time_left=lambda: left[0])
    translate = load_template("translate")
    with pytest.raises(BudgetSpent, match="translate") as e:
        client.generate(translate, [{"question": "Who is liable?"}], ["q7"])
    assert e.value.query_ids == ["q7"] and spy.calls[-1]["max_time"] == 50.0 and len(client.cache) == 0
    spy.stop_after = None
    g, = client.generate(translate, [{"question": "Who is liable?"}], ["q7"])
    assert not g.cached and len(client.cache) == 1
    assert client.generate(translate, [{"question": "Who is liable?"}], ["q7"])[0].cached  # the finished one is reused
    # a spent budget starts no batch and loads no model
    left[0] = 0.0
    n_calls, n_loads = len(spy.calls), len(loads)
    with pytest.raises(BudgetSpent, match="not started") as e:
        client.generate(translate, [{"question": "Who pays?"}, {"question": "When?"}], ["q8", "q9"])
    assert e.value.query_ids == ["q8", "q9"] and len(spy.calls) == n_calls and len(loads) == n_loads
    with pytest.raises(BudgetSpent):  # a Yes/No batch is one forward pass: the check before it is its limit
        client.yes_probabilities(load_template("verify"), [{"question": "Q?", "citation": "Art. 41 OR", "text": "t"}], ["q8"])
    client.cache.close()


def test_a_backend_without_max_time_is_still_called_and_only_refused_once_the_budget_is_spent(tmp_path):
    class OldLM(ScriptedLM):  # a backend written before the time limit: generate(prompts, max_new_tokens)
        def generate(self, prompts, max_new_tokens):
            return super().generate(prompts, max_new_tokens)

    lm = OldLM({"default_output": "Wer haftet?"}, "old")
    lc = load_config(overrides={"llm.model": "old"}).llm
    left = [30.0]
    client = LLMClient(lc, LLMCache(tmp_path / "cache"), lambda: lm, "old", time_left=lambda: left[0])
    assert client.generate(load_template("translate"), [{"question": "Who is liable?"}], ["q1"])[0].text == "Wer haftet?"
    left[0] = -1.0
    with pytest.raises(BudgetSpent):
        client.generate(load_template("translate"), [{"question": "Who pays?"}], ["q2"])
    client.cache.close()
