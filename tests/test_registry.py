"""Adding a stage with an artifact of its own: the stage's module (a build step, a load step, the
stage) plus one registry entry. ``lexrag build`` builds it, ``Artifacts.load`` loads it, the walk
runs the stage, and the run status names it when it is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lexrag.config import load_config
from lexrag.queries import Query
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase

# ---- the new stage's module: an index of the documents that name a law code, and a signal from it


def build_toy(cfg, dest: Path, inputs) -> None:
    from lexrag.artifacts import write_params

    dest.mkdir(parents=True, exist_ok=True)
    docs = [i for i, c in enumerate(inputs.corpus.citations) if c.endswith(" ZGB")]
    (dest / "zgb.json").write_text(json.dumps(docs), encoding="utf-8")
    write_params(dest, "toy", "tests.test_registry.build_toy", {"code": "ZGB"}, n_docs=len(inputs.corpus))


def load_toy(folder: Path, cfg, art) -> list[int]:
    from lexrag.artifacts import read_params

    read_params(folder, "toy")
    return json.loads((folder / "zgb.json").read_text(encoding="utf-8"))


class ToyStage:
    name, family, phase, essential, signals, needs = "toy", "lexical", Phase.CONTENT, False, ("toy_zgb",), ("toy",)

    def enabled(self, cfg, art) -> bool:
        return getattr(art, "toy", None) is not None

    def run(self, batch, ctx):
        docs = ctx.art.toy[:5]
        return [Ranking("toy_zgb", "lexical", {q: [(d, 1.0 / (r + 1)) for r, d in enumerate(docs)] for q in batch.query_ids})]


# ---- the test


@pytest.fixture
def toy_registered():
    from lexrag.registry import ArtifactSpec, register_artifact, unregister_artifact
    from lexrag.stages.base import register_stage, unregister_stage

    register_artifact(ArtifactSpec("toy", "test_registry:build_toy", "test_registry:load_toy", ("corpus",),
                                   dataset="lexrag-toy", attr="toy"))
    try:
        register_stage(ToyStage())
        yield
    finally:  # a failed registration must not leave the toy artifact behind for every later test
        unregister_stage("toy")
        unregister_artifact("toy")


def test_a_stage_with_its_own_artifact_is_one_module_plus_one_registry_entry(tmp_path, tiny_inputs, toy_registered):
    from lexrag.eval.status import run_status
    from lexrag.index.build import build_artifacts
    from lexrag.pipeline import Artifacts, run_pipeline

    laws, courts = tiny_inputs
    cfg = load_config(None, {"runtime.progress": False, "fusion.weights": {"toy_zgb": 1.0}})
    build_artifacts(cfg, laws, tmp_path / "art", courts=courts)
    assert (tmp_path / "art" / "toy" / "zgb.json").is_file()
    art = Artifacts.load(tmp_path / "art", cfg)
    assert art.toy == [i for i, c in enumerate(art.corpus.citations) if c.endswith(" ZGB")] and art.toy
    res = run_pipeline([Query("q1", "Treu und Glauben")], art, cfg)
    assert "toy_zgb" in {r.signal for r in res.signals}
    assert run_status(cfg, art, res).to_dict()["stages"]["toy"]["state"] == "ran"
    # without the artifact the stage is missing, named with the reason, and the run is DEGRADED
    import shutil

    shutil.rmtree(tmp_path / "art" / "toy")
    art = Artifacts.load(tmp_path / "art", cfg, degrade=True)
    res = run_pipeline([Query("q1", "Treu und Glauben")], art, cfg)
    st = run_status(cfg, art, res)
    assert st.status == "DEGRADED" and st.to_dict()["stages"]["toy"]["state"] == "missing"
    assert "toy" in st.to_dict()["stages"]["toy"]["why"]
