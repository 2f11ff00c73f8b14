"""The stage protocol, the signal registry and the package's import layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from lexrag.config import load_config
from lexrag.errors import ConfigError, StageError
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import Query
from lexrag.ranking import Ranking
from lexrag.stages.base import (
    Phase,
    register_stage,
    registered_stages,
    unregister_stage,
)

PKG = Path(__file__).resolve().parents[1] / "kernel_src" / "lexrag"
Q = [Query("a", "Kündigung nach Art. 337 OR aus wichtigen Gründen"), Query("b", "Wer haftet für Schaden?")]


class Echo:
    """A new graph-phase stage in a few lines: the top three seed candidates as its own signal."""

    name = "echo"
    family = "graph"
    phase = Phase.GRAPH
    essential = False
    signals = ("echo",)
    seen: dict = {}

    def enabled(self, cfg, art):
        return True

    def run(self, batch, ctx):
        Echo.seen = {"queries": batch.query_ids, "signals": set(batch.signals), "seeds": dict(batch.seeds)}
        return [Ranking("echo", "graph", {q: batch.seeds[q][:3] for q in batch.query_ids})]


@pytest.fixture
def echo():
    stage = Echo()
    register_stage(stage)
    yield stage
    unregister_stage("echo")


def test_a_registered_stage_runs_in_its_phase_is_timed_and_yields_to_the_budget(echo, demo_artifacts):
    assert [s.name for s in registered_stages()].index("echo") > [s.name for s in registered_stages()].index("graph")
    cfg = load_config(None, {"runtime.progress": False, "graph.enabled": True, "fusion.weights": {"echo": 0.5, "bm25_query": 1.0}})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline(Q, art, cfg)
    # after content and seed fusion (and the graph stage registered before it in the same phase)
    assert Echo.seen["queries"] == ["a", "b"] and {"citation_seeds", "bm25_query", "ppr"} <= Echo.seen["signals"]
    assert all(Echo.seen["seeds"][q] for q in ("a", "b"))
    assert "echo" in {r.signal for r in res.signals} and res.timings["echo"] > 0
    cfg.runtime.time_budget_s = 1e-9
    with pytest.warns(UserWarning, match="time budget"):
        res = run_pipeline(Q, art, cfg)
    assert res.skipped["echo"] == ["a", "b"] and "echo" not in {r.signal for r in res.signals}
    assert res.predictions["a"]  # the essential stages still answered
    echo.essential = True
    res = run_pipeline(Q, art, cfg)
    assert "echo" not in res.skipped and "echo" in {r.signal for r in res.signals}


@pytest.mark.parametrize("over", [{}, {"count.articles_first": 3, "count.whole_articles": 1,
                                       "count.whole_articles_from": 2}])
def test_chunks_see_every_signal_and_give_the_same_answer(demo_artifacts, over):
    cfg = load_config(None, {"runtime.progress": False, **over})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    whole = run_pipeline(Q, art, cfg)
    cfg.runtime.batch_size = 1
    chunked = run_pipeline(Q, art, cfg)
    assert chunked.predictions == whole.predictions and chunked.ranked == whole.ranked


def test_a_stage_breaking_the_protocol_is_named(demo_artifacts):
    class Bad(Echo):
        name = "bad"

        def run(self, batch, ctx):
            return {"a": []}

    with pytest.raises(StageError, match="phase must be"):
        register_stage(type("P", (Echo,), {"name": "p", "phase": 3})())
    register_stage(Bad())
    try:
        with pytest.raises(StageError, match="stage 'bad' must return a list of Rankings"):
            run_pipeline(Q, Artifacts.from_folder(demo_artifacts, load_config(None, {"runtime.progress": False})),
                         load_config(None, {"runtime.progress": False}))
        with pytest.raises(StageError, match="already registered"):
            register_stage(Bad())
    finally:
        unregister_stage("bad")


def test_a_weight_or_switch_for_an_unknown_signal_is_a_config_error():
    with pytest.raises(ConfigError, match="fusion.weights: unknown signal 'bm25_qurey' \\(did you mean 'bm25_query'\\?\\)"):
        load_config(None, {"fusion.weights": {"bm25_qurey": 1.0}})
    with pytest.raises(ConfigError, match="fusion.boost_exclude: unknown signal 'sibling'"):
        load_config(None, {"fusion.boost_exclude": ["sibling"]})
    with pytest.raises(ConfigError, match="graph.signals"):
        load_config(None, {"graph.signals": {"bm25_query": False}})
    with pytest.raises(ConfigError, match="graph.signals: unknown signal 'pagerank'"):
        load_config(None, {"graph.signals": {"pagerank": False}})
    assert load_config(None, {"fusion.weights": {"bm25_de": 2.0, "dense_hyde": 0.5}}).fusion.weights["dense_hyde"] == 0.5


LAYERS = {"index": 1, "llm": 2, "stages": 3, "pipeline": 4, "eval": 5, "kaggle": 6, "cli": 7, "__main__": 7}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def test_imports_only_point_down_the_layers():
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        mod = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # the package's front door (lexrag.Searcher) resolves its names lazily, on first use: not an import of
        # the ground floor, which `import lexrag` alone runs
        facade = {id(n) for f in tree.body if mod == "lexrag" and isinstance(f, ast.FunctionDef) and f.name == "__getattr__"
                  for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in facade:
                continue
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lexrag"):
                names = [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module == "lexrag" else [])
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("lexrag")]
            for n in names:
                if _layer(n) > _layer(mod):
                    bad.append(f"{mod} imports {n}")
    assert not bad, bad


def test_the_package_reports_through_logging_not_print():
    import re

    offenders = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")  # the command-line tools print their report
                 if p.parent.name != "cli" and p.name != "install.py"
                 and re.search(r"(?<![\w.])print\(", p.read_text(encoding="utf-8"))]
    assert not offenders, offenders


def test_a_failing_stage_leaves_no_half_written_query_state(demo_artifacts):
    """With on_stage_error: skip, a call that changed a query and then raised is undone before
    the retry, so nothing is counted twice and nothing of the failed attempt stays."""
    from lexrag.queries import Variant

    class Half:
        name, family, phase, essential, signals = "half", "rewrite", Phase.REWRITE, False, ()

        def enabled(self, cfg, art):
            return True

        def run(self, batch, ctx):
            out = {}
            for q in batch.queries:
                q.llm_citations.append("Art. 1 OR")
                q.add_cost("half", llm_calls=1)
                if q.query_id == "b":
                    raise RuntimeError("the LLM ran out of memory halfway")
                out[q.query_id] = [Variant("de", q.text, "half")]
            return out

    register_stage(Half())
    try:
        cfg = load_config(None, {"runtime.progress": False, "runtime.on_stage_error": "skip"})
        res = run_pipeline(Q, Artifacts.from_folder(demo_artifacts, cfg), cfg)
    finally:
        unregister_stage("half")
    a, b = res.states
    assert a.llm_citations == ["Art. 1 OR"] and res.costs["a"]["half"]["llm_calls"] == 1  # once, not twice
    assert b.llm_citations == [] and "llm_calls" not in res.costs["b"].get("half", {}) and "de" not in b.variants
    assert res.failed == {"half": {"b": "RuntimeError: the LLM ran out of memory halfway"}}


def test_stage_order_is_data_not_import_order():
    """The walk order is STAGE_ORDER; a stage it does not list runs after the listed stages of its
    phase, whenever it was registered."""
    from lexrag.stages.base import STAGE_ORDER, Phase, register_stage, registered_stages, unregister_stage

    assert [s.name for s in registered_stages()] == list(STAGE_ORDER)

    class Extra:
        name, family, phase, essential, signals = "extra_content", "lexical", Phase.CONTENT, False, ("extra_content",)

        def enabled(self, cfg, art):
            return True

        def run(self, batch, ctx):
            return []

    register_stage(Extra())
    try:
        names = [s.name for s in registered_stages()]
        assert names.index("extra_content") == names.index("feedback") + 1 < names.index("seed_fusion")
    finally:
        unregister_stage("extra_content")


def test_no_import_circle():
    """No module of the package imports, directly or through others, a module that imports it
    (imports inside functions count too)."""
    mods = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        mods[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lexrag"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("lexrag")]
            graph[mod] |= {n for n in names if n in mods and n != mod and not mod.startswith(n + ".")}
    def reach(start: str) -> set[str]:
        out, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in out:
                    out.add(nxt)
                    todo.append(nxt)
        return out

    circles = sorted(m for m in graph if m in reach(m))
    assert not circles, circles


@pytest.mark.parametrize("name", sorted(s.name for s in registered_stages()))
def test_every_registered_stage_keeps_the_contract(name, demo_artifacts):
    """What every stage promises, checked on each built-in one: its declarations (phase, signals
    registered, the loaded parts it needs, each with a fix the run status can give), an answer of
    its phase's shape for a batch of no queries (without loading a model), and one enabled() verdict."""
    from lexrag.eval.status import fix_for
    from lexrag.pipeline.context import make_context
    from lexrag.pipeline.calls import _merge
    from lexrag.signals import known_signals
    from lexrag.registry import loadable
    from lexrag.stages.base import BatchState, needs_of

    stage = next(s for s in registered_stages() if s.name == name)
    assert isinstance(stage.phase, Phase) and isinstance(stage.essential, bool)
    assert isinstance(stage.signals, tuple) and set(stage.signals) <= set(known_signals())
    assert isinstance(stage.needs, tuple) and set(stage.needs) <= set(loadable()) and all(fix_for(n) for n in stage.needs)
    cfg = load_config("exam", {"runtime.progress": False})
    assert set(needs_of(stage, cfg)) <= set(stage.needs)  # what it needs under a config is among what it declares
    order = [s.name for s in registered_stages()]  # a stage whose output it reads runs before it
    assert all(r in order[: order.index(name)] for r in getattr(stage, "reads_stages", ()))
    art = Artifacts.from_folder(demo_artifacts, cfg, degrade=True)  # what the demo lacks (the prior) is left out
    on = stage.enabled(cfg, art)
    assert on in (True, False)
    if not on:  # run is only called on an enabled stage (the LLM stages, the ranker: their parts are not in the demo)
        return
    batch = BatchState([])
    out = stage.run(batch, make_context(cfg, art))
    _merge(batch, stage, out, len(art.corpus))  # the shape its phase takes, or a StageError naming the stage
    assert not any(r.hits for r in batch.signals.values()) and not batch.final
