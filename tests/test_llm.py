"""The LLM half of query understanding: loader, prompts, cache and replay, query variants.

Tiny Qwen2- and Llama-style models with random weights are built at test time and loaded through
the real loader in 4-bit NF4 on the CPU.  Where a test needs particular answers (a translation,
malformed JSON), they are stored in the cache under the keys the real client looks up, and the
run goes through the real client, cache and stages.
"""

from __future__ import annotations

import json
import subprocess
import sys
import weakref

from pathlib import Path

import pytest
from lexrag.config import load_config
from lexrag.errors import ConfigError, PromptError, ReplayMissError
from lexrag.eval.submission import write_submission
from lexrag.llm.cache import LLMCache, export_cache
from lexrag.llm.client import LLMClient
from lexrag.llm.prompts import load_template, template_names
from lexrag.llm.rewrite import CONCEPT_SCHEMA, parse_json_object, strip_citations
from lexrag.models import ModelPool, load_causal_lm
from lexrag.pipeline import Artifacts, make_context, run_pipeline
from lexrag.queries import Query

Q_EN = "Can the employer terminate the employment relationship without notice for good cause?"
Q_DE = "Kann der Arbeitgeber das Arbeitsverhältnis aus wichtigen Gründen fristlos kündigen?"


def llm_cfg(tiny_llm, cache_dir, **extra):
    over = {"runtime.progress": False, "llm.enabled": True, "llm.model": str(tiny_llm), "llm.device": "cpu",
            "llm.cache_dir": str(cache_dir), "llm.max_new_tokens": 8, "count.k": 5}
    over.update(extra)
    return load_config(None, over)


def seeded_client(cfg, tiny_llm):
    """A client that stores answers as the attached tiny model's (its fingerprint), so a run with
    that model replays them."""
    from lexrag.models.paths import model_fingerprint

    return LLMClient(cfg.llm, LLMCache(cfg.llm.cache_dir), None, tiny_llm.name, model_id=model_fingerprint(tiny_llm))


# ---------------------------------------------------------------- prompts


def test_every_template_renders_and_a_missing_variable_is_named():
    names = template_names()
    assert {"translate", "concepts", "hyde", "sparse", "dense", "repair_json"} <= set(names)
    for name in names:
        t = load_template(name)
        msgs = t.render({v: f"<{v}>" for v in t.variables()})
        assert msgs[-1]["role"] == "user" and all("{{" not in m["content"] for m in msgs)
        assert all(f"<{v}>" in "".join(m["content"] for m in msgs) for v in t.variables())
        assert t.version >= 1 and t.output in ("text", "json", "yesno")
    with pytest.raises(PromptError, match="template 'concepts' needs variable 'question'"):
        load_template("concepts").render({})
    with pytest.raises(PromptError, match="prompt template 'nope' not found"):
        load_template("nope")


def test_json_parsing_tolerates_fences_and_names_what_is_wrong():
    ok = parse_json_object('Sure:\n```json\n{"legal_area": "Arbeitsrecht", "key_concepts": ["Kündigung",],'
                           ' "keywords_de": "fristlos, Kündigung", "estimated_citations": "4"}\n```', CONCEPT_SCHEMA)
    assert ok["keywords_de"] == ["fristlos", "Kündigung"] and ok["estimated_citations"] == 4
    from lexrag.errors import LLMOutputError

    with pytest.raises(LLMOutputError, match="key 'keywords_de' is missing"):
        parse_json_object('{"legal_area": "x", "key_concepts": []}', CONCEPT_SCHEMA)
    with pytest.raises(LLMOutputError, match="no JSON object"):
        parse_json_object("Ich weiss es nicht.", CONCEPT_SCHEMA)


def test_strip_citations_moves_them_out_of_invented_text():
    text, found = strip_citations("Nach Art. 337 Abs. 1 OR (vgl. BGE 999 IV 1 E. 2) ist die Kündigung zulässig.")
    assert "337" not in text and "BGE" not in text and "Kündigung zulässig" in text
    assert found == ["Art. 337 Abs. 1 OR", "BGE 999 IV 1 E. 2"]


# ---------------------------------------------------------------- loader and model pool


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_loader_reads_a_tiny_model_in_4bit_nf4_and_generates_in_batches(tmp_path, arch):
    import bitsandbytes as bnb
    from lexrag.testing import make_tiny_llm

    lm = load_causal_lm(make_tiny_llm(tmp_path / arch, arch), "nf4", "cpu")
    layers = [m for m in lm.model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert layers and all(m.weight.quant_type == "nf4" for m in layers)
    assert lm.tokenizer.padding_side == "left"
    prompts = [lm.render_chat([{"role": "user", "content": "Der Vermieter muss"}]),
               lm.render_chat([{"role": "system", "content": "kurz"},
                               {"role": "user", "content": "The employer may terminate the employment immediately"}])]
    out = lm.generate(prompts, 6)
    assert len(out) == 2 and all(isinstance(t, str) and n_in > 0 and 0 < n_out <= 6 for t, n_in, n_out in out)
    assert out[0][1] < out[1][1]  # prompt tokens counted without the left padding


def test_a_missing_model_folder_is_a_clear_error(tmp_path, demo_artifacts):
    from lexrag.errors import ArtifactError, ModelLoadError

    with pytest.raises(ModelLoadError, match="LLM model folder not found"):
        load_causal_lm(tmp_path / "no-model")
    cfg = load_config(None, {"llm.enabled": True, "llm.model": str(tmp_path / "no-model"), "runtime.progress": False})
    with pytest.raises(ArtifactError, match="llm.model: no model folder at .*no-model"):
        Artifacts.from_folder(demo_artifacts, cfg)


def test_model_pool_releases_one_model_before_loading_the_next(tiny_llm):
    class Model:
        pass

    pool = ModelPool(resident=1)
    first = pool.get("encoder", Model)
    ref = weakref.ref(first)
    del first
    assert pool.get("encoder", Model) is ref()  # resident: not loaded again
    pool.get("llm", lambda: load_causal_lm(tiny_llm, "nf4", "cpu"))
    assert ref() is None and pool.loaded() == ["llm"]
    assert pool.loads == {"encoder": 1, "llm": 1}
    pool.release()
    assert pool.loaded() == []


# ---------------------------------------------------------------- variants through the pipeline


def test_llm_variants_reach_the_lexical_stage_as_their_own_signals(tmp_path, tiny_llm, demo_artifacts):
    cfg = llm_cfg(tiny_llm, tmp_path / "cache")
    client = seeded_client(cfg, tiny_llm)
    concepts = {"legal_area": "Arbeitsrecht", "key_concepts": ["fristlose Kündigung", "wichtiger Grund"],
                "provisions": ["Art. 337 OR"], "keywords_de": ["Arbeitsvertrag", "Kündigung"], "estimated_citations": 3,
                "citation_mix": {"law": 1.0, "bge": 0.0, "docket": 0.0}}
    for task, answer in [("translate", Q_DE), ("concepts", json.dumps(concepts, ensure_ascii=False)),
                         ("hyde", "Der Arbeitgeber kann das Arbeitsverhältnis aus wichtigen Gründen jederzeit fristlos auflösen."),
                         ("sparse", "fristlose Kündigung wichtiger Grund Arbeitsvertrag"),
                         ("dense", "Es ist zu entscheiden, ob ein wichtiger Grund die fristlose Kündigung rechtfertigt.")]:
        client.store(load_template(task), {"question": Q_EN}, answer, 40, 12, 0.5)
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline([Query("q1", Q_EN)], art, cfg)
    signals = {r.signal for r in res.signals}
    assert {"bm25_query", "bm25_de", "bm25_hyde", "bm25_sparse", "bm25_concepts", "llm_seeds"} <= signals
    state = res.states[0]
    assert state.variants["de"].text == Q_DE and state.variants["de"].origin.startswith("llm:translate@v1")
    assert state.variants["query"].origin == "input" and state.concepts["legal_area"] == "Arbeitsrecht"
    de_docs = next(r for r in res.signals if r.signal == "bm25_de").doc_ids("q1")[:10]
    assert any(art.corpus.citations[d].startswith("Art. 337 ") for d in de_docs)
    assert res.predictions["q1"][0].startswith("Art. 337 ")
    assert res.model_loads == {}  # every answer came from the cache: no model was loaded
    cost = res.costs["q1"]["rewrite"]
    # answers from the cache are cache hits, with their recorded tokens apart: no LLM work in this run
    assert cost["cache_hits"] == 5 and cost["cached_prompt_tokens"] == 200 and "llm_calls" not in cost
    assert res.timings["rewrite"] > 0 and "bm25" in res.timings


def test_llm_variants_reach_the_semantic_stage(tmp_path, tiny_llm):
    from lexrag.pipeline.build import build_artifacts
    from lexrag.testing import SENTENCES, make_tiny_encoder

    laws = tmp_path / "laws.csv"
    laws.write_text("citation,text,title\n" + "".join(f'Art. {i + 1} OR,"{s}",OR\n' for i, s in enumerate(SENTENCES)),
                    encoding="utf-8")
    enc = make_tiny_encoder(tmp_path / "enc")
    cfg = llm_cfg(tiny_llm, tmp_path / "cache", **{"semantic.enabled": True, "semantic.model": str(enc),
                                                  "semantic.device": "cpu", "semantic.max_seq": 64, "semantic.shard_size": 4,
                                                  "graph.enabled": False, "llm.tasks": ["translate", "hyde", "dense"]})
    build_artifacts(cfg, laws, tmp_path / "art")
    client = seeded_client(cfg, tiny_llm)
    for task, answer in [("translate", SENTENCES[1]), ("hyde", SENTENCES[2]), ("dense", SENTENCES[3])]:
        client.store(load_template(task), {"question": SENTENCES[5]}, answer)
    res = run_pipeline([Query("q", SENTENCES[5])], Artifacts.from_folder(tmp_path / "art", cfg), cfg)
    dense = {r.signal: r.doc_ids("q") for r in res.signals if r.family == "semantic"}
    assert set(dense) == {"dense_query", "dense_de", "dense_hyde", "dense_dense"}
    assert dense["dense_de"][0] == 1 and dense["dense_hyde"][0] == 2 and dense["dense_dense"][0] == 3
    assert res.model_loads == {"encoder": 1}


def test_malformed_json_is_repaired_retried_then_skipped_and_the_run_goes_on(tmp_path, tiny_llm, demo_artifacts, caplog):
    cfg = llm_cfg(tiny_llm, tmp_path / "cache", **{"llm.tasks": ["concepts", "translate"]})
    client = seeded_client(cfg, tiny_llm)
    concepts, repair, translate = (load_template(n) for n in ("concepts", "repair_json", "translate"))
    bad = "{'legal_area': 'Arbeitsrecht', key_concepts: [Kündigung]}"
    bad2 = "Gerne! Hier ist das JSON: legal_area = Mietrecht"
    for q, answer, de in [(Q_EN, bad, Q_DE), ("Who pays the rent?", bad2, "Wer bezahlt die Miete?")]:
        client.store(concepts, {"question": q}, answer)
        client.store(translate, {"question": q}, de)
    from lexrag.errors import LLMOutputError

    def repair_values(output):
        with pytest.raises(LLMOutputError) as e:
            parse_json_object(output, CONCEPT_SCHEMA)
        return {"keys": ", ".join(CONCEPT_SCHEMA), "error": str(e.value), "output": output}

    client.store(repair, repair_values(bad), '{"legal_area": "Arbeitsrecht", "key_concepts": ["Kündigung"], "keywords_de": ["fristlos"]}')
    client.store(repair, repair_values(bad2), "still not JSON")
    with caplog.at_level("WARNING", logger="lexrag.llm.rewrite"):
        res = run_pipeline([Query("fixed", Q_EN), Query("broken", "Who pays the rent?")], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    by_id = {s.query_id: s for s in res.states}
    assert by_id["fixed"].concepts["keywords_de"] == ["fristlos"] and "concepts" in by_id["fixed"].variants
    assert by_id["broken"].concepts == {} and "concepts" not in by_id["broken"].variants
    assert by_id["broken"].variants["de"].text == "Wer bezahlt die Miete?"  # the other task still ran
    assert "query 'broken': LLM task 'concepts' gave no usable JSON" in caplog.text
    assert res.costs["broken"]["rewrite"]["json_failures"] == 1 and res.costs["broken"]["rewrite"]["cache_hits"] == 3
    assert res.predictions["broken"]  # the run went on and answered


def test_a_citation_the_llm_names_never_reaches_the_output_unless_the_corpus_has_it(tmp_path, tiny_llm, demo_artifacts):
    cfg = llm_cfg(tiny_llm, tmp_path / "cache", **{"llm.tasks": ["concepts", "hyde"], "count.k": 50})
    client = seeded_client(cfg, tiny_llm)
    client.store(load_template("concepts"), {"question": Q_EN}, json.dumps(
        {"legal_area": "Arbeitsrecht", "key_concepts": ["Art. 999 Abs. 3 XYZ"], "keywords_de": ["Kündigung"],
         "provisions": ["Art. 999 Abs. 3 XYZ", "Art. 4711 OR", "Art. 337c OR"]}))
    client.store(load_template("hyde"), {"question": Q_EN}, "Nach BGE 999 IV 1 E. 2 und Art. 4711 OR ist fristlos zu kündigen.")
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline([Query("q", Q_EN)], art, cfg)
    state = res.states[0]
    assert "BGE 999" not in state.variants["hyde"].text and "4711" not in state.variants["hyde"].text
    assert {"Art. 999 Abs. 3 XYZ", "Art. 4711 OR", "BGE 999 IV 1 E. 2"} <= set(state.llm_citations)
    seeds = [art.corpus.citations[d] for d in next(r for r in res.signals if r.signal == "llm_seeds").doc_ids("q")]
    assert seeds and all(c.startswith("Art. 337c ") for c in seeds)  # the real article resolved, the invented ones dropped
    known = set(art.corpus.citations)
    for cits in (res.predictions["q"], res.ranked["q"]):
        assert set(cits) <= known
        assert not any("999" in c or "4711" in c or "XYZ" in c for c in cits)


# ---------------------------------------------------------------- cache and replay


def test_replay_reproduces_a_live_run_byte_for_byte_without_loading_a_model(tmp_path, tiny_llm, demo_artifacts, monkeypatch):
    queries = [Query("a", Q_EN), Query("b", "Who is liable for damage caused unlawfully?")]
    live = llm_cfg(tiny_llm, tmp_path / "cache")
    art = Artifacts.from_folder(demo_artifacts, live)
    res = run_pipeline(queries, art, live)
    assert res.model_loads == {"llm": 1}
    assert res.costs["a"]["rewrite"]["llm_calls"] >= 5 and res.costs["a"]["rewrite"]["gen_tokens"] > 0
    write_submission(tmp_path / "live.csv", res.predictions, res.query_ids)

    import lexrag.llm.protocol

    def no_loading(*a, **k):
        raise AssertionError("replay loaded a model")

    monkeypatch.setattr(lexrag.llm.protocol, "load_causal_lm", no_loading)  # where the transformers backend looks it up
    export_cache(tmp_path / "cache", tmp_path / "shipped")  # a cache as shipped in a Kaggle dataset
    (tmp_path / "shipped").chmod(0o555)
    replay = llm_cfg(tiny_llm.parent / "not-attached", tmp_path / "nowhere",
                     **{"llm.mode": "replay", "llm.replay_dirs": [str(tmp_path / "shipped")]})
    replay.llm.model = str(tiny_llm)  # the same model name keys the cache; its folder is never opened
    res2 = run_pipeline(queries, Artifacts.from_folder(demo_artifacts, replay), replay)
    write_submission(tmp_path / "replay.csv", res2.predictions, res2.query_ids)
    assert (tmp_path / "replay.csv").read_bytes() == (tmp_path / "live.csv").read_bytes()
    assert res2.model_loads == {} and res2.ranked == res.ranked
    assert [s.variants for s in res2.states] == [s.variants for s in res.states]


def test_replay_without_the_entry_names_it(tmp_path, tiny_llm, demo_artifacts):
    cfg = llm_cfg(tiny_llm, tmp_path / "cache", **{"llm.mode": "replay"})
    with pytest.raises(Exception, match="needs an LLM cache"):
        make_context(cfg, Artifacts.from_folder(demo_artifacts, cfg))
    LLMCache(tmp_path / "cache").close()
    with pytest.raises(ReplayMissError, match=r"template translate@v1:\w+ for query 'q7'.*llm.mode=live"):
        run_pipeline([Query("q7", Q_EN)], Artifacts.from_folder(demo_artifacts, cfg), cfg)


def test_cli_reports_a_replay_miss_in_one_line(tmp_path, tiny_llm, demo_artifacts):
    LLMCache(tmp_path / "cache").close()
    qs = tmp_path / "q.csv"
    qs.write_text(f'query_id,query\nq1,"{Q_EN}"\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "run", "--artifacts", str(demo_artifacts), "--queries", str(qs),
                        "--out", str(tmp_path / "s.csv"), "--set", "llm.enabled=true", "--set", f"llm.model={tiny_llm}",
                        "--set", "llm.mode=replay", "--set", f"llm.cache_dir={tmp_path / 'cache'}"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: replay: the LLM cache") and "'q1'" in r.stderr


_WRITER = """
import sys
from lexrag.llm.cache import LLMCache
c = LLMCache(sys.argv[1])
for i in range(150):
    c.put(f"{sys.argv[2]}-{i}", "m", "t", "h", {}, "out", 1, 1, 0.0)
"""


def test_two_processes_can_fill_one_cache_at_once(tmp_path):
    LLMCache(tmp_path / "c").close()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "c"), w]) for w in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(LLMCache(tmp_path / "c")) == 300


def test_llm_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="llm.tasks: unknown LLM task 'hide' \\(did you mean 'hyde'\\?\\)"):
        load_config(None, {"llm.tasks": ["hide"]})
    with pytest.raises(ConfigError, match="llm.enabled needs llm.model"):
        load_config(None, {"llm.enabled": True})
    with pytest.raises(ConfigError, match="lexical.variants: unknown query variant 'german'"):
        load_config(None, {"lexical.variants": ["german"]})


def test_a_cache_left_by_a_killed_run_still_replays(tmp_path):
    code = ("import os, sys\nfrom lexrag.llm.cache import LLMCache\nc = LLMCache(sys.argv[1])\n"
            "c.put('k', 'm', 't', 'h', {}, 'kept', 1, 1, 0.0)\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "c")], check=True)
    assert (tmp_path / "c" / "cache.sqlite-wal").is_file()  # never checkpointed
    assert LLMCache(None, readonly=[tmp_path / "c"]).get("k")["output"] == "kept"


def test_encoder_reranker_and_llm_take_turns_one_resident_at_a_time(tmp_path, tiny_llm, monkeypatch):
    from lexrag.pipeline.build import build_artifacts
    from lexrag.testing import SENTENCES, make_tiny_encoder, make_tiny_reranker

    laws = tmp_path / "laws.csv"
    laws.write_text("citation,text,title\n" + "".join(f'Art. {i + 1} OR,"{s}",OR\n' for i, s in enumerate(SENTENCES)),
                    encoding="utf-8")
    enc, rr = make_tiny_encoder(tmp_path / "enc"), make_tiny_reranker(tmp_path / "rr")
    cfg = llm_cfg(tiny_llm, tmp_path / "cache", **{
        "semantic.enabled": True, "semantic.model": str(enc), "semantic.device": "cpu", "semantic.max_seq": 64,
        "rerank.enabled": True, "rerank.model": str(rr), "rerank.device": "cpu", "rerank.tau": 0.0, "graph.enabled": False})
    build_artifacts(cfg, laws, tmp_path / "art")
    art = Artifacts.from_folder(tmp_path / "art", cfg)
    resident: list[list[str]] = []
    get = ModelPool.get

    def spy(self, key, loader):
        model = get(self, key, loader)
        resident.append(self.loaded())
        return model

    monkeypatch.setattr(ModelPool, "get", spy)
    res = run_pipeline([Query(f"q{i}", s) for i, s in enumerate(SENTENCES[4:])], art, cfg)
    assert res.model_loads == {"llm": 1, "encoder": 1, "reranker": 1}  # phase by phase: each loaded once
    assert max(len(r) for r in resident) == 1
    assert [r[0] for r in resident][0] == "llm" and resident[-1] == ["reranker"]
    assert res.current.signal == "rerank" and all(res.predictions.values())


def test_on_kaggle_an_attached_llm_cache_is_found_by_its_params_and_replayed(tmp_path, tiny_llm, demo_artifacts, monkeypatch):
    import shutil

    from lexrag.paths import resolve_paths

    cfg = llm_cfg(tiny_llm, tmp_path / "cache")
    live = run_pipeline([Query("a", Q_EN)], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    root = tmp_path / "input"
    for name in ("corpus", "bm25", "graph"):
        shutil.copytree(demo_artifacts / name, root / f"lexrag-{name}")
    export_cache(tmp_path / "cache", root / "lexrag-llm-cache")
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    kcfg = llm_cfg(tiny_llm, "", **{"llm.mode": "replay", "llm.model": "Qwen-folder-not-attached",
                                    "llm.model_name": tiny_llm.name, "paths.artifacts_dir": str(root),
                                    "paths.working_dir": str(tmp_path / "working")})
    paths = resolve_paths(kcfg.paths)
    art = Artifacts.load(paths, kcfg)
    assert art.cache_dirs == [root / "lexrag-llm-cache"]
    res = run_pipeline([Query("a", Q_EN)], art, kcfg, paths=paths)
    assert res.predictions == live.predictions and res.model_loads == {}
    assert res.states[0].variants == live.states[0].variants


def test_retrieve_gives_the_fused_ranking_of_any_query_text(tmp_path, demo_artifacts):
    from lexrag.pipeline import make_context, retrieve
    from lexrag.queries import QueryState

    cfg = load_config(None, {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    full = run_pipeline([Query("q", Q_DE)], art, cfg)
    ctx = make_context(cfg, art)
    reformulated = QueryState("q#r1", Q_DE)
    hits = retrieve([reformulated], ctx)["q#r1"]
    assert hits == full.fused.hits["q"] and hits


def test_graph_documents_are_chosen_by_the_german_variant_when_there_is_one():
    from lexrag.queries import QueryState

    q = QueryState("q", Q_EN)
    assert q.preferred_text(["de", "query"]) == Q_EN
    q.add_variant("de", Q_DE, "llm:translate@v1")
    q.add_variant("de", "ein zweiter Text", "other")  # the first writer keeps the variant
    assert q.preferred_text(["de", "query"]) == Q_DE and q.variants["de"].origin == "llm:translate@v1"


def test_export_refuses_to_overwrite_its_source_and_a_failed_load_is_not_retried(tmp_path):
    from lexrag.errors import ArtifactError, ModelLoadError

    c = LLMCache(tmp_path / "c")
    c.put("k", "m", "t", "h", {}, "paid for", 1, 1, 0.0)
    c.close()
    with pytest.raises(ArtifactError, match="both source and destination"):
        export_cache(tmp_path / "c", tmp_path / "c")
    assert LLMCache(None, readonly=[tmp_path / "c"]).get("k")["output"] == "paid for"
    calls = []

    def failing():
        calls.append(1)
        raise ModelLoadError("CUDA out of memory")

    pool = ModelPool()
    for _ in range(3):
        with pytest.raises(ModelLoadError):
            pool.get("llm", failing)
    assert len(calls) == 1  # one failed load, not one per query


# ---------------------------------------------------------------- verification


def test_verifier_probabilities_come_from_yes_no_logits_and_do_not_depend_on_the_batch(tiny_llm):
    lm = load_causal_lm(tiny_llm, "nf4", "cpu")
    t = load_template("verify")
    prompts = [lm.render_chat(t.render({"question": q, "citation": c, "text": x})) for q, c, x in [
        (Q_EN, "Art. 337 Abs. 1 OR", "Aus wichtigen Gründen kann der Arbeitgeber wie der Arbeitnehmer jederzeit das "
                                     "Arbeitsverhältnis fristlos auflösen."),
        ("Who pays?", "Art. 1 OR", "Kurz."),
        (Q_EN + " " + Q_EN, "Art. 8 ZGB", "Beweislast."),
    ]]
    together = [p for p, _ in lm.yes_probability(prompts)]
    shuffled = [p for p, _ in lm.yes_probability([prompts[2], prompts[0], prompts[1]])]
    alone = [lm.yes_probability([x])[0][0] for x in prompts]
    assert all(0.0 < p < 1.0 for p in together)
    assert together == pytest.approx([shuffled[1], shuffled[2], shuffled[0]], abs=2e-3)
    assert together == pytest.approx(alone, abs=2e-3)


def test_verified_order_moves_confirmed_candidates_ahead_and_keeps_the_rest():
    from lexrag.stages.verify import verified_order

    hits = [(10, 0.9), (11, 0.8), (12, 0.7), (13, 0.6), (14, 0.5)]
    out = verified_order(hits, [0.2, 0.9, 0.6, 0.1], 0.5)  # the fifth is beyond the depth
    assert [d for d, _ in out] == [11, 12, 10, 13, 14]
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(1.9) and scores[2] < 1.0


def test_verified_items_pull_in_their_graph_neighbours_below_themselves():
    from lexrag.stages.verify import verified_order

    hits = [(10, 0.9), (11, 0.8), (12, 0.7), (13, 0.6), (14, 0.5), (15, 0.4)]
    # 11 verified (0.9) brings 15 (beyond the depth) and 12 (judged and rejected: stays out);
    # 10 verified (0.6) brings 14 and 11 (already placed)
    out = verified_order(hits, [0.6, 0.9, 0.1, 0.2], 0.5, {11: [15, 12], 10: [14, 11]}, weight=0.5)
    assert [d for d, _ in out] == [11, 10, 15, 14, 12, 13]
    assert dict(out)[15] == pytest.approx(1.45) and dict(out)[14] == pytest.approx(1.3) and dict(out)[12] < 1.0


def test_graph_neighbours_are_siblings_then_co_cited_authorities(tiny_inputs, tmp_path):
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts
    from lexrag.index.corpus import Corpus
    from lexrag.index.graph import CitationGraph
    from lexrag.stages.verify import graph_neighbours

    laws, courts = tiny_inputs
    cfg = load_config(overrides={"runtime.progress": False})
    build_artifacts(cfg, laws, tmp_path / "a", courts=courts)
    corpus = Corpus(tmp_path / "a" / "corpus")
    g = CitationGraph.load(tmp_path / "a" / "graph", len(corpus))
    doc = corpus.citations.index("BGE 145 II 32 E. 3.1")
    nb = [corpus.citations[d] for d in graph_neighbours(g, doc, 3)]
    assert nb[0] == "BGE 145 II 32 E. 3.2" and "BGE 145 II 32 E. 3.1" not in nb and len(nb) <= 3
    assert graph_neighbours(g, doc, 0) == []


def test_verification_runs_live_with_the_tiny_model_and_replays_without_it(tmp_path, tiny_llm, demo_artifacts):
    extra = {"verify.enabled": True, "verify.depth": 4, "verify.threshold": 0.0, "llm.tasks": ["translate"],
             "verify.expand": False}
    live = llm_cfg(tiny_llm, tmp_path / "cache", **extra)
    art = Artifacts.from_folder(demo_artifacts, live)
    queries = [Query("a", Q_DE), Query("b", "Wer haftet für einen widerrechtlich zugefügten Schaden?")]
    res = run_pipeline(queries, art, live)
    assert res.current.signal == "rerank" and res.costs["a"]["verify"]["llm_calls"] == 4
    for qid in ("a", "b"):
        top = res.current.hits[qid][:4]
        assert all(1.0 <= s <= 2.0 for _, s in top)  # threshold 0: every judged candidate is verified, by P(Yes)
        assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
        assert res.current.hits[qid][4][1] < 1.0 and set(res.predictions[qid]) <= set(art.corpus.citations)
    replay = llm_cfg(tiny_llm, tmp_path / "cache", **extra, **{"llm.mode": "replay"})
    res2 = run_pipeline(queries, Artifacts.from_folder(demo_artifacts, replay), replay)
    assert res2.predictions == res.predictions and res2.current.hits == res.current.hits and res2.model_loads == {}


def test_the_backend_is_named_in_the_config_not_guessed_from_the_folder(tmp_path, demo_artifacts, tiny_llm):
    """The scripted stand-in runs only with llm.backend=scripted; its folder under the default
    backend, or a real model folder under the scripted one, is one line saying what to set."""
    from lexrag.errors import ArtifactError
    from lexrag.llm.protocol import LLM

    scripted = Path(__file__).resolve().parents[1] / "demo" / "scripted_llm"
    base = {"llm.enabled": True, "runtime.progress": False, "llm.cache_dir": str(tmp_path / "c")}
    with pytest.raises(ArtifactError, match="holds a scripted stand-in .* set llm.backend=scripted"):
        Artifacts.from_folder(demo_artifacts, load_config(None, {**base, "llm.model": str(scripted)}))
    with pytest.raises(ArtifactError, match="llm.backend=scripted needs a folder holding lexrag_scripted.json"):
        Artifacts.from_folder(demo_artifacts, load_config(None, {**base, "llm.model": str(tiny_llm), "llm.backend": "scripted"}))
    art = Artifacts.from_folder(demo_artifacts, load_config(None, {**base, "llm.model": str(scripted), "llm.backend": "scripted"}))
    assert isinstance(art.loader("llm")(), LLM)


# ---------------------------------------------------------------- the cache is an accelerator, never a substitute


def _run_with_status(cfg, demo_artifacts):
    from lexrag.eval.status import run_status

    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline([Query("q1", Q_EN)], art, cfg)
    return res, run_status(cfg, art, res)


def test_a_damaged_own_cache_or_an_older_one_beside_a_live_model_is_set_aside(tmp_path, tiny_llm, demo_artifacts):
    """On Kaggle (``runtime.on_stage_error: skip``) a cache is an accelerator: a damaged own cache
    and an older shipped one are set aside with a status note and the attached model answers;
    locally the same damaged cache stops the run in one line (tests/test_faults.py)."""
    import sqlite3

    own = tmp_path / "cache"
    LLMCache(own).close()  # a real cache folder...
    (own / "cache.sqlite").write_bytes(b"not a database" * 100)  # ...whose file is damaged
    old = tmp_path / "old"  # a shipped cache of an older lexrag: its table has no model identity
    old.mkdir()
    from lexrag.artifacts import write_params

    con = sqlite3.connect(old / "cache.sqlite")
    con.execute("CREATE TABLE generations (key TEXT PRIMARY KEY, model TEXT, template TEXT, input_sha256 TEXT, settings TEXT, "
                "output TEXT, prompt_tokens INTEGER, gen_tokens INTEGER, seconds REAL, created REAL)")
    settings = LLMClient(llm_cfg(tiny_llm, own).llm, LLMCache(None), None, tiny_llm.name).settings(load_template("translate"))
    from lexrag.llm.cache import cache_key

    key, h = cache_key(tiny_llm.name, load_template("translate").id, load_template("translate").render({"question": Q_EN}), settings)
    con.execute("INSERT INTO generations VALUES (?,?,?,?,?,?,?,?,?,?)", (key, tiny_llm.name, "translate", h, "{}", Q_DE, 1, 1, 0.1, 0))
    con.commit()
    con.close()
    write_params(old, "llm_cache", "test", {"format": "sqlite", "table": "generations"}, files=False)

    # as on Kaggle (a failing part degrades the run): the bad caches are set aside, the model answers
    cfg = llm_cfg(tiny_llm, own, **{"llm.tasks": ["translate"], "llm.replay_dirs": [str(old)], "runtime.on_stage_error": "skip"})
    res, status = _run_with_status(cfg, demo_artifacts)
    # every stage ran (the random tiny model's German may match nothing: then the run says FAILED for that, not the caches)
    assert all(r.state == "ran" for r in status.rows) and next(r for r in status.rows if r.stage == "rewrite").state == "ran"
    notes = " | ".join(status.notes)
    assert f"LLM cache {own} set aside" in notes and "kept in memory only" in notes  # the damaged own cache
    assert "1 stored answers were written by another model" in notes  # the older cache's answer has no identity
    assert res.states[0].variants["de"].text != Q_DE  # the live model answered, not the older cache
    assert "note: LLM cache" in status.table() and status.to_dict()["notes"] == status.notes
    # the same older cache replays where no model is attached: the named model's answers are used
    replay = llm_cfg(tiny_llm, tmp_path / "c2", **{"llm.tasks": ["translate"], "llm.replay_dirs": [str(old)], "llm.mode": "replay"})
    res, status = _run_with_status(replay, demo_artifacts)
    assert res.states[0].variants["de"].text == Q_DE and not status.notes


def test_another_models_answers_are_never_replayed_for_the_attached_model(tmp_path, tiny_llm, demo_artifacts):
    import shutil

    cfg = llm_cfg(tiny_llm, tmp_path / "cache", **{"llm.tasks": ["translate"]})
    other = tmp_path / "other-model"  # the same name in the cache, other weights: another fingerprint
    shutil.copytree(tiny_llm, other)
    weights = next(p for p in other.iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes() + b"\0" * 8)
    from lexrag.models.paths import model_fingerprint

    # stored under the name the config gives the model (as a preset fixes llm.model_name), by the other weights
    LLMClient(cfg.llm, LLMCache(cfg.llm.cache_dir), None, tiny_llm.name, model_id=model_fingerprint(other)).store(
        load_template("translate"), {"question": Q_EN}, Q_DE)
    res, status = _run_with_status(cfg, demo_artifacts)
    assert res.states[0].variants["de"].text != Q_DE and "written by another model" in " | ".join(status.notes)
    seeded_client(cfg, tiny_llm).store(load_template("translate"), {"question": Q_EN}, Q_DE)  # now its own answer
    res, status = _run_with_status(cfg, demo_artifacts)
    assert res.states[0].variants["de"].text == Q_DE and not status.notes


def test_a_tilde_in_the_cache_dir_is_the_home_folder(tmp_path, monkeypatch):
    from lexrag.pipeline.artifacts import llm_cache_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config(None, {"llm.cache_dir": "~/lexrag-cache"})
    assert llm_cache_dir(cfg) == tmp_path / "lexrag-cache"  # not a folder literally named "~"


def test_a_chat_template_that_never_finishes_is_refused_at_load(tmp_path, tiny_llm, monkeypatch):
    """Nested range loops run for hours in Jinja's sandbox: the load renders one message under a
    bound and refuses the template in one line."""
    import shutil

    import lexrag.models.causal_lm as causal_lm
    from lexrag.errors import ModelLoadError

    folder = tmp_path / "looping"
    shutil.copytree(tiny_llm, folder)
    cfg_file = folder / "tokenizer_config.json"
    doc = json.loads(cfg_file.read_text(encoding="utf-8"))
    doc["chat_template"] = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
    cfg_file.write_text(json.dumps(doc), encoding="utf-8")
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    monkeypatch.setattr(causal_lm, "TEMPLATE_PROBE_S", 0.5)  # the loop would take hours; half a second shows it
    with pytest.raises(ModelLoadError, match="did not render a one-line message"):
        load_causal_lm(folder, "none", "cpu")
    load_causal_lm(tiny_llm, "none", "cpu")  # a real template renders at once


def test_every_llm_backend_the_config_offers_has_a_loader_of_one_shape():
    import dataclasses
    import inspect

    from lexrag.config.sections import LLMConfig
    from lexrag.llm.protocol import BACKENDS

    choices = next(f for f in dataclasses.fields(LLMConfig) if f.name == "backend").metadata["choices"]
    assert set(choices) == set(BACKENDS)
    assert all(list(inspect.signature(fn).parameters) == ["folder", "lc"] for fn in BACKENDS.values())


@pytest.mark.parametrize("script, expected", [
    ({"default_yes": 2.0}, "'default_yes' must be a probability in \\[0, 1\\], got '2.0'"),
    ({"default_yes": "abc"}, "'default_yes' must be a probability in \\[0, 1\\], got 'abc'"),
    ({"rules": {"when": []}}, "'rules' must be a list of rules"),
])
def test_a_scripted_llm_file_with_a_bad_default_is_one_line_naming_the_field(tmp_path, script, expected):
    from lexrag.errors import ModelLoadError
    from lexrag.llm.scripted import FORMAT, SCRIPT_FILE, load_scripted

    (tmp_path / SCRIPT_FILE).write_text(json.dumps({"format": FORMAT, **script}), encoding="utf-8")
    with pytest.raises(ModelLoadError, match=expected):
        load_scripted(tmp_path)
