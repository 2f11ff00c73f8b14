from pathlib import Path

import pytest
from lexrag.config import ConfigError, load_config, parse_overrides
from lexrag.io.csvio import CsvInputError
from lexrag.paths import resolve_paths
from lexrag.queries import load_gold, load_queries

ROOT = Path(__file__).resolve().parents[1]


def test_queries_checks(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text('query_id,query,gold_citations\nq1,"Frage?",Art. 1 OR; Art. 2 OR\nq2,"",\n', encoding="utf-8")
    with pytest.warns(UserWarning, match="line 3: query 'q2' is empty"):
        qs = load_queries(p)
    assert [q.query_id for q in qs] == ["q1", "q2"]
    with pytest.warns(UserWarning, match="1 row\\(s\\) without gold citations \\(lines 3\\) are left out \\(not scored"):
        assert load_gold(p) == {"q1": ["Art. 1 OR", "Art. 2 OR"]}  # no gold: not scored anywhere
    huge = tmp_path / "h.csv"
    huge.write_text("query_id,query\nq1," + "a" * 50 + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="query 'q1' has 50 characters; truncated to 10"):
        assert load_queries(huge, max_chars=10)[0].text == "a" * 10


def test_blank_lines_before_the_header_are_skipped_and_a_repeated_header_is_no_question(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("\n\nquery_id,query,gold_citations\nq1,Frage?,Art. 1 OR\n\ufeffquery_id, query ,gold_citations\n"
                 "q2,Miete?,Art. 2 OR\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="line\\(s\\) 5 repeat the header \\(files joined together\\?\\); skipped"):
        assert [q.query_id for q in load_queries(p)] == ["q1", "q2"]
    with pytest.warns(UserWarning, match="repeat the header"):
        assert load_gold(p) == {"q1": ["Art. 1 OR"], "q2": ["Art. 2 OR"]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("id,query\n1,x\n", r"missing column\(s\) query_id"),
        ("query_id,query\nq1,x\nq1,y\n", "line 3: query_id 'q1' repeats line 2"),
        ("query_id,query\n,x\n", "line 2: empty query_id"),
        ("query_id,query\nq1,x,y\n", "1 malformed row"),
    ],
)
def test_bad_query_files(tmp_path, text, message):
    p = tmp_path / "q.csv"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(CsvInputError, match=message):
        load_queries(p)


def test_query_file_in_cp1252_is_read_with_warning(tmp_path):
    p = tmp_path / "q.csv"
    p.write_bytes("query_id,query\nq1,Kündigung\n".encode("cp1252"))
    with pytest.warns(UserWarning, match="not UTF-8"):
        assert load_queries(p)[0].text == "Kündigung"


def test_config_defaults_yaml_and_overrides(tmp_path):
    cfg = load_config()
    assert cfg.fusion.rrf_k == 60 and cfg.fusion.weights["citation_seeds"] == 4.0
    y = tmp_path / "c.yaml"
    y.write_text("fusion:\n  rrf_k: 30\ncount:\n  method: elbow\n", encoding="utf-8")
    cfg = load_config(y, parse_overrides(["lexical.k1=1.2", "lexical.enabled=false"]))
    assert (cfg.fusion.rrf_k, cfg.count.method, cfg.lexical.k1, cfg.lexical.enabled) == (30, "elbow", 1.2, False)
    cfg = load_config(None, {"count.k": 7, "lexical": {"top_k": 50}})
    assert cfg.count.k == 7 and cfg.lexical.top_k == 50


def test_config_errors_name_the_key(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("fusion:\n  rrf_kk: 30\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown config key 'fusion.rrf_kk'"):
        load_config(y)
    with pytest.raises(ConfigError, match="unknown config key 'nope'"):
        load_config(None, {"nope": {}})
    with pytest.raises(ConfigError, match="fusion.rrf_k: expected int, got str"):
        load_config(None, {"fusion.rrf_k": "sixty"})
    with pytest.raises(ConfigError, match="count.method must be"):
        load_config(None, {"count.method": "magic"})
    with pytest.raises(ConfigError, match="not of the form"):
        parse_overrides(["rrf_k"])


def test_paths_local_and_kaggle(monkeypatch):
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    p = resolve_paths()
    assert (p.input_dir, p.artifacts_dir, p.kaggle) == (Path("data"), Path("artifacts"), False)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    cfg = load_config(None, {"paths.competition": "llm-agentic-legal-information-retrieval"})
    p = resolve_paths(cfg.paths)
    assert p.kaggle and p.working_dir == Path("/kaggle/working")
    assert p.input_dir == Path("/kaggle/input/competitions/llm-agentic-legal-information-retrieval")
    cfg = load_config(None, {"paths.artifacts_dir": "/somewhere"})
    assert resolve_paths(cfg.paths).artifacts_dir == Path("/somewhere")


def test_no_kaggle_paths_outside_the_resolver():
    offenders = [
        p.name for p in (ROOT / "kernel_src" / "lexrag").rglob("*.py")
        if p.name != "paths.py" and "/kaggle" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_kaggle_artifact_found_by_params_in_attached_dataset(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    ds = tmp_path / "lexrag-bm25-german"
    ds.mkdir()
    (ds / "params.json").write_text(json.dumps({"artifact": "bm25"}), encoding="utf-8")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "test.csv").write_text("query_id,query\n", encoding="utf-8")
    p = resolve_paths(load_config(None, {"paths.artifacts_dir": str(tmp_path), "paths.input_dir": str(tmp_path / "comp")}).paths)
    assert p.artifact("bm25") == ds
    assert p.input_file("test.csv") == tmp_path / "other" / "test.csv"


def test_presets_are_valid_configs():
    from lexrag.config import presets

    assert {"exam", "kaggle", "lexical"} <= set(presets())
    for name in presets():
        load_config(name)
    assert load_config("kaggle").prior.enabled and not load_config("lexical").graph.enabled
    with pytest.raises(ConfigError, match="presets: exam, kaggle, lexical"):
        load_config("no-such-preset")


def test_model_folders_are_found_in_attached_datasets(tmp_path, monkeypatch):
    from lexrag.models.paths import ModelNotFound

    (tmp_path / "bge-m3-dataset" / "bge-m3").mkdir(parents=True)
    (tmp_path / "bge-m3-dataset" / "bge-m3" / "modules.json").write_text("{}", encoding="utf-8")
    cfg = load_config(None, {"paths.artifacts_dir": str(tmp_path)})
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    with pytest.raises(ModelNotFound, match=r"semantic.model: no model folder at bge-m3: set semantic.model to a folder"):
        resolve_paths(cfg.paths).model("bge-m3", "semantic.model")  # locally: only a path counts
    here = tmp_path / "bge-m3-dataset" / "bge-m3"
    assert resolve_paths(cfg.paths).model(f"nothing-here | {here}") == here
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    assert resolve_paths(cfg.paths).model("bge-m3") == here
    assert resolve_paths(cfg.paths).model(str(tmp_path / "bge-m3-dataset")) == here  # down to the model folder


@pytest.mark.parametrize("layout", ["classic", "nested"])
def test_the_kaggle_presets_models_are_found_as_users_attach_them(tmp_path, monkeypatch, layout):
    """Qwen as the Kaggle Model qwen-lm/qwen2.5/transformers/7b-instruct (two versions: the newest
    wins), BGE-M3 and the reranker as datasets whose folder names differ from the model names, found
    by the kaggle preset's own settings; a miss names what it saw and the setting that picks it."""
    import json

    from lexrag.models.paths import ModelNotFound

    qwen = "models/qwen-lm/qwen2.5/transformers/7b-instruct" if layout == "nested" else "qwen2.5/transformers/7b-instruct"
    ds = (lambda s: f"datasets/someone/{s}") if layout == "nested" else (lambda s: s)
    if layout == "nested":  # BGE-M3 and the reranker as Kaggle Models too, under folder names that say nothing
        other = tmp_path.with_name(tmp_path.name + "-as-models")
        _tree(other, {
            "models/baai/bge-m3/transformers/default/1/config.json": json.dumps({"architectures": ["XLMRobertaModel"]}),
            "models/baai/bge-reranker-v2-m3/pytorch/default/2/config.json":
                json.dumps({"architectures": ["XLMRobertaForSequenceClassification"]}),
            "models/baai/bge-m3/transformers/default/1/model.safetensors": "weights",
            "models/baai/bge-reranker-v2-m3/pytorch/default/2/model.safetensors": "weights",
        })
        monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
        monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(other))
        k = load_config("kaggle")
        pm = resolve_paths(k.paths)
        assert pm.model(k.semantic.model, "semantic.model") == other / "models/baai/bge-m3/transformers/default/1"
        assert pm.model(k.rerank.model, "rerank.model") == other / "models/baai/bge-reranker-v2-m3/pytorch/default/2"
    _tree(tmp_path, {
        f"{qwen}/1/config.json": json.dumps({"architectures": ["Qwen2ForCausalLM"]}),
        f"{qwen}/2/config.json": json.dumps({"architectures": ["Qwen2ForCausalLM"]}),
        f"{ds('my-embedder')}/weights/config.json": json.dumps({"_name_or_path": "BAAI/bge-m3"}),
        f"{ds('my-embedder')}/weights/modules.json": "[]",
        f"{ds('my-embedder')}/weights/model.safetensors": "weights",  # found by its config.json: it must hold weights
        # a reranker fine-tuned from bge-m3 says so in its config: the name of its own folder wins
        f"{ds('bge-reranker-v2-m3')}/config.json": json.dumps({"_name_or_path": "BAAI/bge-m3",
                                                               "architectures": ["XLMRobertaForSequenceClassification"]}),
    })
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(tmp_path))
    cfg = load_config("kaggle")
    p = resolve_paths(cfg.paths)
    assert p.model(cfg.llm.model, "llm.model") == tmp_path / qwen / "2"
    assert p.model(cfg.semantic.model, "semantic.model") == tmp_path / ds("my-embedder") / "weights"
    assert p.model(cfg.rerank.model, "rerank.model") == tmp_path / ds("bge-reranker-v2-m3")
    with pytest.raises(ModelNotFound) as e:
        p.model("Qwen2.5-7B-Instruct", "llm.model")
    msg = str(e.value)
    assert "llm.model: no model folder matches Qwen2.5-7B-Instruct" in msg and str(tmp_path / qwen / "2") in msg
    pick = "qwen-lm/qwen2.5/transformers/7b-instruct" if layout == "nested" else "qwen2.5/transformers/7b-instruct"
    assert f"llm.model={pick}" in msg
    assert p.model(pick, "llm.model") == tmp_path / qwen / "2"  # the setting the message gives works


def _tree(root, files):
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("layout", ["classic", "nested"])
def test_resolver_finds_everything_in_either_kaggle_layout(tmp_path, monkeypatch, layout):
    import json

    comp = "competitions/legal-ir" if layout == "nested" else "legal-ir"
    ds = (lambda s: f"datasets/someone/{s}") if layout == "nested" else (lambda s: s)
    model = ("models/qwen-lm/qwen2.5/transformers/7b-instruct/1" if layout == "nested" else "qwen2.5/transformers/7b-instruct/1")
    _tree(tmp_path, {
        f"{comp}/test.csv": "query_id,query\n",
        f"{ds('lexrag-corpus')}/params.json": json.dumps({"artifact": "corpus"}),
        f"{ds('lexrag-llm-cache')}/params.json": json.dumps({"artifact": "llm_cache"}),
        f"{ds('lexrag-wheels')}/lexrag-0.1.0-py3-none-any.whl": "",
        f"{ds('bge-m3-weights')}/bge-m3/modules.json": "{}",
        f"{model}/config.json": "{}",
    })
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(tmp_path))
    p = resolve_paths(load_config(None, {"paths.competition": "legal-ir"}).paths)
    assert p.input_file("test.csv") == tmp_path / comp / "test.csv"
    assert p.artifact("corpus") == tmp_path / ds("lexrag-corpus")
    assert p.find_artifacts("llm_cache") == [tmp_path / ds("lexrag-llm-cache")]
    assert p.wheels_dir() == tmp_path / ds("lexrag-wheels")
    assert p.model("bge-m3") == tmp_path / ds("bge-m3-weights") / "bge-m3"
    assert p.model("7b-instruct") == tmp_path / model  # descends into the version folder
    from lexrag.errors import ArtifactError, LexragError

    with pytest.raises(ArtifactError,
                       match=r"artifact 'graph' not found: searched .* found corpus, llm_cache; attach the lexrag-graph dataset"):
        p.artifact("graph")
    with pytest.raises(LexragError, match="model: no model folder matches bge-reranker-v2-m3 .searched"):
        p.model("bge-reranker-v2-m3")
    with pytest.raises(LexragError, match="train.csv not found: searched"):
        p.input_file("train.csv")


def test_notebook_parameters_from_papermill_strings():
    from lexrag.errors import ConfigError
    from lexrag.config.notebook import notebook_flag, notebook_mapping

    assert [notebook_flag("x", v) for v in (True, "false", "False", "yes", "0", 1)] == [True, False, False, True, False, True]
    assert notebook_mapping("stages", '{"graph": false}') == {"graph": False} and notebook_mapping("o", None) == {}
    assert load_config(None, '{"count.k": 3}').count.k == 3  # a notebook's overrides string
    for bad in ("maybe", 2, None):
        with pytest.raises(ConfigError, match="parameter x: expected True or False"):
            notebook_flag("x", bad)
    with pytest.raises(ConfigError, match=r"parameter stages: expected a mapping such as \{\"graph\": false\}.*got str .x."):
        notebook_mapping("stages", "x")
    with pytest.raises(ConfigError, match="parameter overrides: expected a mapping .*got list"):
        load_config(None, [1])
    with pytest.raises(ConfigError, match=r"parameter o: .* is not valid YAML .*key 'count.k' appears twice"):
        notebook_mapping("o", "{count.k: 3, count.k: 5}")
    with pytest.raises(ConfigError, match=r"parameter o: '\{\"count.k\": 3' is not valid YAML"):
        notebook_mapping("o", '{"count.k": 3')


@pytest.mark.parametrize("kaggle", [False, True])
def test_an_empty_model_name_is_named_not_read_as_the_current_folder(tmp_path, monkeypatch, kaggle):
    from lexrag.errors import LexragError
    from lexrag.paths import resolve_paths

    if kaggle:
        monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
        monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(tmp_path))
    else:
        monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    with pytest.raises(LexragError, match="no model named: set semantic.model"):
        resolve_paths(load_config(None, {}).paths).model("", "semantic.model")


def test_with_two_copies_of_the_corpus_the_set_built_over_one_corpus_is_loaded(tmp_path, monkeypatch, tiny_inputs, caplog):
    """An older corpus in another dataset comes first in path order; the corpus that BM25 and the
    graph were built over is chosen, and the log names the copy left out and why."""
    import json
    import logging
    import shutil

    from lexrag.pipeline.build import build_artifacts
    from lexrag.index.corpus import Corpus
    from lexrag.pipeline import Artifacts

    laws, courts = tiny_inputs
    cfg = load_config(None, {"runtime.progress": False, "graph.enabled": True})
    old, new = tmp_path / "old", tmp_path / "new"
    build_artifacts(cfg, laws, old)
    build_artifacts(cfg, laws, new, courts=courts)
    params = old / "corpus" / "params.json"
    older = {k: v for k, v in json.loads(params.read_text(encoding="utf-8")).items() if k != "params_sha256"}  # no digest yet
    params.write_text(json.dumps({**older, "version": "0.0.9"}), encoding="utf-8")
    root = tmp_path / "input"
    shutil.copytree(old / "corpus", root / "datasets" / "a-old" / "lexrag-corpus")
    for name in ("corpus", "bm25", "graph"):
        shutil.copytree(new / name, root / "datasets" / "b-new" / f"lexrag-{name}")
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(root))
    paths = resolve_paths(cfg.paths)
    assert paths.find_artifacts("corpus")[0] == root / "datasets" / "a-old" / "lexrag-corpus"  # first in path order
    with caplog.at_level(logging.WARNING):
        art = Artifacts.load(paths, cfg, degrade=True)
    assert art.missing == {} and art.bm25 is not None and art.graph is not None
    assert len(art.corpus) == len(Corpus(new / "corpus"))
    assert any("a-old/lexrag-corpus not used: 2 of the other artifacts were built over" in r.getMessage() for r in caplog.records)


def test_between_two_complete_sets_the_fuller_corpus_wins_and_the_status_says_so(tmp_path, monkeypatch, tiny_inputs):
    """A laws-only set first in path order and a laws + courts set, each with its own BM25: both are
    consistent, so the set over more documents is loaded, and a note names the choice."""
    import shutil

    from lexrag.eval.status import RunStatus
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts

    laws, courts = tiny_inputs
    cfg = load_config(None, {"runtime.progress": False})
    small, full = tmp_path / "small", tmp_path / "full"
    build_artifacts(cfg, laws, small)
    build_artifacts(cfg, laws, full, courts=courts)
    root = tmp_path / "input"
    for src, ds in ((small, "a-laws-only"), (full, "b-full")):
        for name in ("corpus", "bm25"):
            shutil.copytree(src / name, root / "datasets" / ds / f"lexrag-{name}")
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(root))
    art = Artifacts.load(resolve_paths(cfg.paths), cfg, degrade=True)
    assert art.corpus_dir == root / "datasets" / "b-full" / "lexrag-corpus" and art.missing == {}
    assert any("2 corpus copies attached; using " + str(art.corpus_dir) in n and "a-laws-only" in n for n in art.notes)
    assert any("2 copies of bm25 attached" in n for n in art.notes)
    table = RunStatus("OK", notes=art.notes).table()
    assert "note: 2 corpus copies attached" in table


def test_outside_kaggle_every_missing_part_is_named_at_once(demo_artifacts):
    """Validation under the kaggle preset without its models: one error names each part that is
    missing (not the first only), so one attach-or-switch-off round fixes them all."""
    from lexrag.errors import ArtifactError
    from lexrag.pipeline import Artifacts

    with pytest.raises(ArtifactError) as e:
        Artifacts.from_folder(demo_artifacts, load_config("kaggle"))
    msg = str(e.value)
    assert "parts the config asks for cannot be loaded" in msg and "\n" not in msg
    assert all(f"[{p}]" in msg for p in ("prior", "semantic", "reranker", "llm")), msg
    with pytest.raises(ArtifactError, match=r"^(?!.*parts the config).*prior"):  # one missing part: its own message
        Artifacts.from_folder(demo_artifacts, load_config("exam", {"ranker.enabled": False, "count.method": "fixed"}))


def test_a_version_folder_named_with_a_superscript_digit_is_not_a_version(tmp_path):
    from lexrag.models.paths import _newest_first

    subs = [tmp_path / n for n in ("1", "²", "10", "notes")]
    assert [p.name for p in _newest_first(subs)] == ["10", "1", "notes", "²"]  # "²".isdigit() is true; int("²") fails


def test_a_run_given_an_artifacts_folder_loads_through_the_local_resolver(tmp_path, demo_artifacts):
    from lexrag.config import load_config
    from lexrag.paths import Paths, paths_for
    from lexrag.pipeline import Artifacts
    from lexrag.pipeline.artifacts import llm_cache_dir

    cfg = load_config(None, {"runtime.progress": False, "paths.working_dir": str(tmp_path / "work")})
    local = paths_for(demo_artifacts, cfg.paths)
    assert local == Paths.local(demo_artifacts, cfg.paths) and not local.kaggle
    assert local.artifact("bm25") == demo_artifacts / "bm25" and local.built("calibration") == demo_artifacts / "calibration"
    art = Artifacts.from_folder(demo_artifacts, cfg)  # a folder is the local resolver: one way to load
    assert art.paths == local and art.corpus_dir == demo_artifacts / "corpus"
    # the run's own LLM cache follows paths.working_dir with --artifacts too (it once stayed in ./llm_cache)
    assert llm_cache_dir(cfg, art.paths) == tmp_path / "work" / "llm_cache"


def test_a_config_key_that_moved_section_is_named_with_its_new_place():
    from lexrag.config import load_config
    from lexrag.errors import ConfigError

    with pytest.raises(ConfigError, match=r"graph.preference_variants is now query.preference_variants"):
        load_config(None, {"graph.preference_variants": ["query"]})
    assert load_config(None, {"query.preference_variants": ["query"]}).query.preference_variants == ["query"]


@pytest.mark.parametrize("variable", ["LEXRAG_KAGGLE_INPUT", "LEXRAG_KAGGLE_WORKING"])
def test_an_empty_kaggle_root_is_refused_not_read_as_the_current_folder(monkeypatch, variable):
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv(variable, " ")
    with pytest.raises(ConfigError, match=f"{variable} is set but empty; unset it"):
        resolve_paths(load_config(None).paths)


def test_replay_needs_only_the_name_that_keys_the_cache():
    # docs/cli.md's "from a cache" command: llm.model_name in replay mode, no model folder
    cfg = load_config(None, {"llm.enabled": True, "llm.model_name": "Qwen2.5-7B-Instruct", "llm.mode": "replay"})
    assert cfg.llm.model == "" and cfg.llm.model_name == "Qwen2.5-7B-Instruct"
    with pytest.raises(ConfigError, match="llm.enabled needs llm.model .* or in replay mode llm.model_name"):
        load_config(None, {"llm.enabled": True, "llm.model_name": "Qwen2.5-7B-Instruct"})  # live: the folder is needed


def test_a_notebook_cell_s_guard_logs_our_warnings_as_one_line(tmp_path, caplog):
    # an over-long question inside a notebook's guard: one log line, not a UserWarning with its source line
    import warnings

    from lexrag.errors import one_line_errors
    from lexrag.queries import load_queries

    q = tmp_path / "q.csv"
    q.write_text("query_id,query\nq1," + "x" * 50 + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with caplog.at_level("WARNING", logger="lexrag"), one_line_errors():
            load_queries(q, max_chars=10)
    assert [r.getMessage() for r in caplog.records if r.name == "lexrag"] == \
        [f"{q}: line 2: query 'q1' has 50 characters; truncated to 10"]


def test_notebook_04_reads_a_papermill_string_of_overrides_as_yaml(tmp_path):
    # `-p overrides '{"semantic.shard_size": 1000}'` arrives as a string, read as YAML like the other notebooks'
    from lexrag.kaggle.notebook import build_embeddings_cell

    with pytest.raises(ConfigError, match="semantic.shard_siz"):  # parsed and checked, not a ValueError from dict(str)
        build_embeddings_cell("kaggle", '{"semantic.shard_siz": 1000}', artifacts_dir=tmp_path)
