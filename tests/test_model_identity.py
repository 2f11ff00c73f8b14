"""Models known by their weights: the identity of a model folder (the LLM cache's key, the
encoder an embeddings artifact was built with) reads the weight files' headers and sampled
bytes, so other weights behind the same JSON files and sizes are another model; a folder with a
config.json and no weights is not a model."""

from __future__ import annotations

import json
import struct

import pytest

from lexrag.models.paths import ModelNotFound, find_model, model_fingerprint
from lexrag.models import model_id, same_model


def _model(folder, fill: bytes, name="BAAI/bge-m3"):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"_name_or_path": name, "architectures": ["XLMRobertaModel"]}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [4096], "data_offsets": [0, 16384]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + fill * (16384 // len(fill)))
    return folder


def test_other_weights_behind_the_same_json_and_sizes_are_another_model(tmp_path):
    v1 = _model(tmp_path / "7b-instruct" / "1", b"\x01\x02\x03\x04")
    v2 = _model(tmp_path / "7b-instruct" / "2", b"\x05\x06\x07\x08")  # same config.json, same file sizes
    copy = _model(tmp_path / "copy" / "1", b"\x01\x02\x03\x04")
    assert (v1 / "model.safetensors").stat().st_size == (v2 / "model.safetensors").stat().st_size
    assert model_fingerprint(v1) != model_fingerprint(v2) and model_fingerprint(v1) == model_fingerprint(copy)
    assert not same_model(model_id(v1), model_id(v2)) and same_model(model_id(v1), model_id(copy))


def test_a_config_json_without_weights_is_not_the_model_it_names(tmp_path):
    stray = tmp_path / "inputs" / "notes"
    stray.mkdir(parents=True)
    (stray / "config.json").write_text(json.dumps({"_name_or_path": "BAAI/bge-m3"}))
    with pytest.raises(ModelNotFound):
        find_model("BAAI/bge-m3", [tmp_path / "inputs"], "semantic.model", True)
    real = _model(tmp_path / "inputs" / "encoder", b"\x01\x02\x03\x04")
    assert find_model("BAAI/bge-m3", [tmp_path / "inputs"], "semantic.model", True) == real
