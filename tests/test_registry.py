"""Adding a stage with an artifact, a config section and a model of its own: the stage's module (its
section, a build step, a load step, the stage) plus one registration.  ``lexrag build`` and
``build_datasets.py`` build it (from a manifest entry), ``Artifacts.load`` loads it and locates its
model, the walk runs the stage, ``--set`` and ``lexrag config`` know its section, and the run
status names it when it is missing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from lexrag.config import load_config
from lexrag.config.fields import field_spec
from lexrag.queries import Query
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase

ROOT = Path(__file__).resolve().parents[1]

# ---- the new stage's module: an index of the documents that name a law code, ranked by an encoder


@dataclass
class ToyConfig:
    enabled: bool = field_spec(False, "rank the documents of one law code by an encoder's similarity to the question")
    model: str = field_spec("", "the encoder folder (sentence-transformers)")
    code: str = field_spec("ZGB", "the law code whose documents the index holds")
    top: int = field_spec(5, "documents returned per question", range=(1, None))


def build_toy(cfg, dest: Path, inputs) -> None:
    from lexrag.artifacts import write_params
    from lexrag.index.corpus import Corpus

    corpus = inputs.corpus or Corpus(inputs.corpus_dir, lookups=False)
    dest.mkdir(parents=True, exist_ok=True)
    docs = [i for i, c in enumerate(corpus.citations) if c.endswith(f" {cfg.toy.code}")]
    (dest / "docs.json").write_text(json.dumps(docs), encoding="utf-8")
    write_params(dest, "toy", "tests.test_registry.build_toy", {"code": cfg.toy.code}, n_docs=len(corpus))


def load_toy(folder: Path, cfg, art) -> list[int]:
    from lexrag.artifacts import read_params
    from lexrag.models import load_encoder

    read_params(folder, "toy")
    model = art.model_paths["toy"]  # located by Artifacts.load from toy.model before this step runs
    art.loaders["toy"] = lambda: load_encoder(model, "cpu", fp16=False, max_seq=64)
    return json.loads((folder / "docs.json").read_text(encoding="utf-8"))


class ToyStage:
    name, family, phase, essential, signals, needs = "toy", "lexical", Phase.CONTENT, False, ("toy_code",), ("toy",)

    def enabled(self, cfg, art) -> bool:
        return cfg.toy.enabled and getattr(art, "toy", None) is not None

    def run(self, batch, ctx):
        import numpy as np

        enc, docs = ctx.model("toy"), ctx.art.toy
        d = enc.encode(ctx.art.corpus.texts(docs), normalize_embeddings=True)
        out = {}
        for q, text in ((s.query_id, s.text) for s in batch.queries):
            sims = d @ enc.encode([text], normalize_embeddings=True)[0]
            order = np.argsort(-sims)[: ctx.cfg.toy.top]
            out[q] = [(docs[j], float(sims[j])) for j in order]
        return [Ranking("toy_code", "lexical", out)]


def register_toy() -> None:
    """The one registration: the section, the artifact with its steps, the stage."""
    from lexrag.config import register_section
    from lexrag.pipeline.build import register_artifact
    from lexrag.registry import ArtifactSpec
    from lexrag.stages.base import register_stage

    register_section("toy", ToyConfig)
    register_artifact(ArtifactSpec("toy", ("corpus",), switch="toy.enabled", dataset="lexrag-toy", attr="toy", model="toy.model",
                                   rebuild="python -m lexrag build ... --set toy.enabled=true --out ARTIFACTS",
                                   build=build_toy, load=load_toy))
    register_stage(ToyStage())


# ---- the tests


@pytest.fixture
def toy_registered():
    from lexrag.config import unregister_section
    from lexrag.pipeline.build import unregister_artifact
    from lexrag.stages.base import unregister_stage

    try:
        register_toy()
        yield
    finally:  # a failed registration must not leave the toy behind for every later test
        unregister_stage("toy")
        unregister_artifact("toy")
        unregister_section("toy")


@pytest.fixture(scope="module")
def toy_encoder(tmp_path_factory) -> Path:
    pytest.importorskip("sentence_transformers")
    from lexrag.testing import make_tiny_encoder

    return make_tiny_encoder(tmp_path_factory.mktemp("toy_encoder"))


def test_a_stage_with_its_own_section_artifact_and_model_is_one_module_plus_one_registration(
        tmp_path, tiny_inputs, toy_registered, toy_encoder, capsys):
    from lexrag.cli import main
    from lexrag.config import config_help
    from lexrag.eval.status import run_status
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.pipeline.build import build_artifacts

    laws, courts = tiny_inputs
    on = {"runtime.progress": False, "toy.enabled": True, "toy.model": str(toy_encoder), "toy.top": 3,
          "fusion.weights": {"toy_code": 1.0}}
    cfg = load_config(None, on)
    assert cfg.toy.top == 3 and "toy:\n  enabled: False" in config_help()
    with pytest.raises(Exception, match="toy.top must be >= 1"):
        load_config(None, {**on, "toy.top": 0})
    build_artifacts(cfg, laws, tmp_path / "art", courts=courts)
    assert (tmp_path / "art" / "toy" / "docs.json").is_file()
    art = Artifacts.from_folder(tmp_path / "art", cfg)
    assert art.toy == [i for i, c in enumerate(art.corpus.citations) if c.endswith(" ZGB")] and art.toy
    assert art.model_paths["toy"] == toy_encoder
    res = run_pipeline([Query("q1", "Treu und Glauben")], art, cfg)
    toy = next(r for r in res.signals if r.signal == "toy_code")
    assert len(toy.hits["q1"]) == 3 and {d for d, _ in toy.hits["q1"]} <= set(art.toy)
    assert run_status(cfg, art, res).to_dict()["stages"]["toy"]["state"] == "ran"
    # the command line knows the section
    q = tmp_path / "q.csv"
    q.write_text("query_id,query\nq1,Treu und Glauben\n", encoding="utf-8")
    args = ["run", "--queries", str(q), "--artifacts", str(tmp_path / "art"), "--out", str(tmp_path / "s.csv")]
    sets = [x for k, v in on.items() if k != "fusion.weights" for x in ("--set", f"{k}={v}")]
    assert main([*args, *sets, "--set", "fusion.weights.toy_code=1.0"]) == 0, capsys.readouterr().err
    # without its model, or without the artifact, the stage is missing, named with the reason, and the run DEGRADED
    import shutil

    for broken in ({"toy.model": str(tmp_path / "no-model")}, None):
        if broken is None:
            shutil.rmtree(tmp_path / "art" / "toy")
        c = load_config(None, {**on, **(broken or {})})
        art = Artifacts.from_folder(tmp_path / "art", c, degrade=True)
        st = run_status(c, art, run_pipeline([Query("q1", "Treu und Glauben")], art, c)).to_dict()
        assert st["status"] == "DEGRADED" and st["stages"]["toy"]["state"] == "missing", st["stages"]["toy"]
        assert ("no-model" if broken else "toy") in st["stages"]["toy"]["why"]


def test_build_datasets_builds_a_registered_artifact_from_its_manifest_entry(tmp_path, tiny_inputs, toy_registered, toy_encoder):
    from lexrag.kaggle.datasets import rebuild
    from lexrag.kaggle.manifest import check

    laws, courts = tiny_inputs
    doc = yaml.safe_load((ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    doc["artifacts"].append({"name": "toy", "dataset": "lexrag-toy", "title": "lexrag toy index", "license": "CC0-1.0",
                             "builder": "python build_datasets.py --only corpus,toy --set toy.enabled=true --out OUT"})
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    cfg = load_config(None, {"runtime.progress": False, "toy.enabled": True, "toy.model": str(toy_encoder)})
    out = tmp_path / "ds"
    built = rebuild(manifest, out, cfg, laws=laws, courts=courts, only=["corpus", "bm25", "toy"])
    assert "toy" in built["built"] and (out / "toy" / "docs.json").is_file()
    assert json.loads((out / "toy" / "dataset-metadata.json").read_text())["id"] == "lexrag/lexrag-toy"
    assert check(manifest, out, only=["corpus", "bm25", "toy"]) == []
    entry = next(a for a in yaml.safe_load(manifest.read_text(encoding="utf-8"))["artifacts"] if a["name"] == "toy")
    assert entry["params"] == {"code": "ZGB"} and {f["path"] for f in entry["files"]} >= {"docs.json", "params.json"}


def test_every_spec_lives_beside_its_own_steps_and_a_bad_registration_changes_nothing():
    """Each artifact's spec is declared in the module that owns it, with its build step and a load
    step exactly when a run loads it, both functions of that module or of what it imports by name
    (the import graph shows each arrow); the parts no build makes are specs with a load step."""
    import ast
    import inspect
    import sys

    import lexrag.pipeline.build as B
    from lexrag.registry import ARTIFACTS, ArtifactSpec, loadable, names

    def imported(module) -> set[str]:
        out = {module.__name__}
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lexrag"):
                out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        return out

    def follows(fn, module) -> bool:  # defined there, or in a module it imports (a package re-exports its own)
        return any(fn.__module__ == m or fn.__module__.startswith(m + ".") for m in imported(module))

    owners = {}
    for mod in list(sys.modules.values()):
        own = getattr(mod, "SPEC", None) if (getattr(mod, "__name__", "") or "").startswith("lexrag.") else None
        if isinstance(own, ArtifactSpec):
            owners[own.name] = mod
    assert set(names()) <= set(owners), set(names()) - set(owners)  # every dataset's spec is some module's SPEC
    for a in ARTIFACTS:
        if a.name not in names():
            assert a.load is not None and a.fix and not a.dataset, a  # a part: loaded, with its fix
            continue
        mod = owners[a.name]
        binder = sys.modules[a.build_in] if a.build_in else mod  # a build a floor above its load, bound there
        assert callable(a.build) and follows(a.build, binder), (a.name, a.build)
        assert (a.load is not None) == (a.attr is not None), a.name
        if a.load is not None:
            assert follows(a.load, mod), (a.name, a.load)
    assert set(loadable()) >= {"bm25", "graph", "prior", "ranker", "dictionary", "bm25_en", "semantic", "reranker", "llm",
                               "calibration"}
    with pytest.raises(ValueError, match="already registered"):
        B.register_artifact(ARTIFACTS[0])
    with pytest.raises(ValueError, match="load step exactly when"):
        B.register_artifact(ArtifactSpec("toy2", ("corpus",), dataset="lexrag-toy2", attr="toy2", build=build_toy))
    with pytest.raises(ValueError, match="bound by lexrag.index.bm25_build, once"):
        from lexrag.registry import bind_build

        bind_build("bm25", build_toy)  # bound already, and by its own module only
    with pytest.raises(ValueError, match="needs its build step"):
        B.register_artifact(ArtifactSpec("toy3", ("corpus",), dataset="lexrag-toy3"))
    assert not {"toy2", "toy3"} & {a.name for a in ARTIFACTS}  # refused: nothing changed

