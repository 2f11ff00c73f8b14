"""The embeddings artifact: an encoder's vectors of every corpus document, sharded and resumable.

``embeddings/`` holds ``shard_00000.npy`` ... float16 arrays of ``shard_size`` documents each
(the last one shorter), written atomically (temporary file, then rename), plus ``progress.json``
(what is being built) and, when every shard is there, ``params.json`` (model, dims,
normalisation, doc count, corpus id).  A build that is killed, or stopped on purpose by
``max_shards``/``time_budget_s`` (a Kaggle session running out), resumes from the last complete
shard; shard boundaries and batches inside a shard are fixed, so a resumed build is
byte-identical to an uninterrupted one on the same device.  ``resume_from`` copies complete
shards of an earlier output folder (a previous Kaggle session's output) whose ``progress.json``
matches.  :class:`Embeddings` reads them back (checked against the corpus and the encoder);
:mod:`lexrag.index.dense` searches them.  Memory for 2.65M x 1024 (BGE-M3): fp16 5.4 GB (fp32
would be 10.9 GB).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from lexrag.artifacts import ArtifactError, check_corpus_id, check_params, reading, write_params
from lexrag.io.inputfiles import read_json_file
from lexrag.errors import ModelLoadError
from lexrag.models import load_encoder, model_id, same_model
from lexrag.registry import ArtifactSpec, declare

__all__ = ["build_embeddings", "Embeddings", "SemanticError"]

ARTIFACT = "embeddings"

log = logging.getLogger(__name__)


class SemanticError(ModelLoadError):
    """A dense index that cannot be built as configured."""


def _shard_texts(corpus, shard_size: int, fields: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    buf: list[str] = []
    i = 0
    for batch in corpus.iter_texts(fields=fields):
        buf.extend(batch)
        while len(buf) >= shard_size:
            yield i, buf[:shard_size]
            buf = buf[shard_size:]
            i += 1
    if buf:
        yield i, buf


def _complete(path: Path, rows: int, dims: int) -> bool:
    try:
        a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return False
    return a.shape == (rows, dims) and a.dtype == np.float16


def _check_build_args(out: Path, max_shards, time_budget_s, resume_from) -> None:
    """The build's own arguments, named in one line each: counts and seconds of the right type, a
    resume folder that is an embeddings build, and an output that is no other artifact's folder."""
    from lexrag.artifacts import PARAMS
    from lexrag.io.outputs import enclosing_artifact

    if max_shards is not None and (isinstance(max_shards, bool) or not isinstance(max_shards, int) or max_shards < 1):
        raise ArtifactError(f"max_shards {max_shards!r}: give a number of shards of 1 or more, or None for all")
    if isinstance(time_budget_s, bool) or not isinstance(time_budget_s, (int, float)) or not time_budget_s >= 0:
        raise ArtifactError(f"time_budget_s {time_budget_s!r}: give seconds (0 or more; 0: no limit)")
    if resume_from:
        src = Path(resume_from)
        if not src.is_dir():
            raise ArtifactError(f"resume_from {src}: not a folder (an earlier, partial embeddings output); leave it out to "
                                "start afresh")
        if not (src / "progress.json").is_file():
            raise ArtifactError(f"resume_from {src}: no progress.json, so it is no embeddings build to resume from")
    inside = enclosing_artifact(out)
    own = read_json_file(out / PARAMS, ArtifactError) if inside is not None and inside == out.resolve() else None
    if inside is not None and not (isinstance(own, dict) and own.get("artifact") == "embeddings"):
        raise ArtifactError(f"out_dir {out} is or lies inside the artifact folder {inside}, which is not an embeddings "
                            "build: writing shards there would damage it; give a folder of its own (embeddings/)")


def build_embeddings(
    corpus,
    model_path: str | Path,
    out_dir: str | Path,
    corpus_id: str = "",
    shard_size: int = 100_000,
    batch_size: int = 256,
    max_seq: int = 256,
    fields: Sequence[str] = ("title", "text"),
    device: str = "auto",
    fp16: bool = True,
    devices: Sequence[str] | None = None,
    max_shards: int | None = None,
    time_budget_s: float = 0.0,
    resume_from: str | Path | None = None,
    progress: bool = False,
) -> bool:
    """Encode the corpus into shards; returns True when every shard exists (params.json written).

    ``devices`` (e.g. ``["cuda:0", "cuda:1"]``) encodes through sentence-transformers'
    multi-process pool, one process per device; with ``device="auto"`` and no ``devices``, every
    visible GPU is used when there is more than one.
    """
    out = Path(out_dir)
    _check_build_args(out, max_shards, time_budget_s, resume_from)  # before the model loads (minutes on Kaggle)
    made = not out.exists()
    model = load_encoder(model_path, device, fp16, max_seq)  # a model refused leaves no empty folder behind
    out.mkdir(parents=True, exist_ok=True)
    dims = int(model.get_embedding_dimension())
    n = len(corpus)
    n_shards = (n + shard_size - 1) // shard_size
    meta = {"model": model_id(model_path), "dims": dims, "normalize": True, "max_seq": max_seq, "fields": list(fields),
            "shard_size": shard_size, "n_docs": n, "corpus_id": corpus_id, "dtype": "float16"}
    prog = out / "progress.json"
    src = Path(resume_from) if resume_from else None
    if src is not None:  # resuming from another build's shards would give other vectors: said before anything is written
        earlier = read_json_file(src / "progress.json", ArtifactError)
        if earlier != meta:
            diffs = [f"{k}: {earlier.get(k)!r} -> {v!r}" for k, v in meta.items()
                     if not isinstance(earlier, dict) or earlier.get(k) != v]
            if made and not any(out.iterdir()):
                out.rmdir()
            raise ArtifactError(f"resume_from {src}: its shards are of another build ({'; '.join(diffs)[:300]}); give the "
                                "folder of an earlier run of this build, or leave resume_from out to start afresh")
    if prog.is_file():
        old = json.loads(prog.read_text(encoding="utf-8"))
        if old != meta:
            diffs = [f"{k}: {old.get(k)!r} -> {v!r}" for k, v in meta.items() if old.get(k) != v]
            raise ArtifactError(f"{out} holds embeddings of another build ({'; '.join(diffs)}); use an empty folder")
    else:
        prog.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    (out / "params.json").unlink(missing_ok=True)
    if src is not None:  # the earlier build's finished shards, kept or copied
        for i in range(n_shards):
            rows = min(shard_size, n - i * shard_size)
            name = f"shard_{i:05d}.npy"
            if not _complete(out / name, rows, dims) and _complete(src / name, rows, dims):
                shutil.copyfile(src / name, out / (name + ".tmp"))
                os.replace(out / (name + ".tmp"), out / name)
    if devices is None and device == "auto":
        from lexrag.models import usable_gpus

        gpus = usable_gpus()
        if len(gpus) > 1:  # Kaggle's 2xT4: encode on both
            devices = [f"cuda:{i}" for i in gpus]
    pool = model.start_multi_process_pool(list(devices)) if devices and len(devices) > 1 else None
    t0 = time.perf_counter()
    done_now = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_shards, desc="embedding shards", unit="shard")
    try:
        for i, texts in _shard_texts(corpus, shard_size, fields):
            path = out / f"shard_{i:05d}.npy"
            if not _complete(path, len(texts), dims):
                if max_shards is not None and done_now >= max_shards:
                    break
                if time_budget_s and time.perf_counter() - t0 > time_budget_s:
                    break
                emb = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False, pool=pool)
                tmp = out / f"shard_{i:05d}.tmp.npy"
                np.save(tmp, np.asarray(emb, dtype=np.float16), allow_pickle=False)
                os.replace(tmp, path)
                done_now += 1
            if bar is not None:
                bar.update(1)
    finally:
        if pool is not None:
            model.stop_multi_process_pool(pool)
        if bar is not None:
            bar.close()
    complete = all(_complete(out / f"shard_{i:05d}.npy", min(shard_size, n - i * shard_size), dims) for i in range(n_shards))
    if complete:
        write_params(out, ARTIFACT, "lexrag.index.embeddings.build_embeddings", meta, n_docs=n, n_shards=n_shards)
    return complete


class Embeddings:
    """The embeddings artifact: shard arrays memory-mapped, checked against corpus and config."""

    def __init__(self, folder: str | Path, n_docs: int, corpus_id: str | None = None, model_path: str | Path | None = None,
                 expected: dict | None = None):
        self.folder = Path(folder)
        self.params = check_params(self.folder, ARTIFACT, expected or {})
        p = self.params["params"]
        if p.get("n_docs") != n_docs:
            raise ArtifactError(f"embeddings at {folder} cover {p.get('n_docs')} documents, the corpus has {n_docs}; rebuild them")
        check_corpus_id(folder, ARTIFACT, p.get("corpus_id"), corpus_id)
        if model_path is not None and not same_model(str(p.get("model")), model_id(model_path)):
            raise ArtifactError(
                f"embeddings at {folder} were built with model {p.get('model')!r}, the configured encoder is "
                f"{model_id(model_path)!r}; queries and documents must share one model"
            )
        self.dims = int(p["dims"])
        self.n = n_docs
        self.shard_size = int(p["shard_size"])
        want = -(-n_docs // self.shard_size) if self.shard_size > 0 else -1
        if self.params.get("n_shards") != want:
            raise ArtifactError(f"embeddings at {folder}: params.json lists {self.params.get('n_shards')} shards, "
                                f"{n_docs} documents in shards of {self.shard_size} need {want}; rebuild them")
        with reading(ARTIFACT, self.folder):
            self.shards = [np.load(self.folder / f"shard_{i:05d}.npy", mmap_mode="r", allow_pickle=False)
                           for i in range(int(self.params["n_shards"]))]
        for i, s in enumerate(self.shards):
            rows = min(self.shard_size, n_docs - i * self.shard_size)
            if s.shape != (rows, self.dims):
                raise ArtifactError(f"{folder}/shard_{i:05d}.npy has shape {s.shape}, expected {(rows, self.dims)}; rebuild it")
        self._spot_check()

    def _spot_check(self, samples: int = 2048) -> None:
        """Refuse vectors that are not finite, or not of unit length where params.json says they are
        normalised (a NaN or a long vector would dominate every query's scores): a sample spread
        over the shards, every vector of a small corpus."""
        if self.n == 0:
            return
        ids = np.unique(np.linspace(0, self.n - 1, num=min(samples, self.n), dtype=np.int64))
        v = self.rows(ids)
        bad = ~np.isfinite(v).all(axis=1)
        if bad.any():
            raise ArtifactError(f"embeddings at {self.folder}: the vector of document {int(ids[bad][0])} is not finite "
                                f"({int(bad.sum())} of {len(ids)} sampled); rebuild them")
        if self.params["params"].get("normalize"):
            norms = np.linalg.norm(v, axis=1)
            off = np.abs(norms - 1.0) > 0.01
            if off.any():
                raise ArtifactError(f"embeddings at {self.folder}: params.json says normalised, but the vector of document "
                                    f"{int(ids[off][0])} has length {float(norms[off][0]):.3f} ({int(off.sum())} of "
                                    f"{len(ids)} sampled); rebuild them")

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """fp32 vectors of the given doc ids."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty((len(ids), self.dims), dtype=np.float32)
        shard, off = np.divmod(ids, self.shard_size)
        for s in np.unique(shard):
            m = shard == s
            out[m] = self.shards[s][off[m]]
        return out

    def read_shard(self, i: int, out: np.ndarray | None = None) -> np.ndarray:
        """Shard ``i``'s fp16 vectors read from its file (not through the memory map, so its pages
        are not counted in this process's resident set), into ``out`` (any C-contiguous buffer of
        the shard's byte size) when given."""
        path = self.folder / f"shard_{i:05d}.npy"
        rows = min(self.shard_size, self.n - i * self.shard_size)
        if out is None:
            out = np.empty((rows, self.dims), dtype=np.float16)
        view = memoryview(out).cast("B")
        if view.nbytes != rows * self.dims * 2:
            raise ValueError(f"buffer of {view.nbytes} bytes for shard {i} of {rows * self.dims * 2}")
        with reading(ARTIFACT, self.folder), open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            if shape != (rows, self.dims) or fortran or dtype != np.float16:
                raise ArtifactError(f"{path}: {dtype} {shape}{' Fortran order' if fortran else ''}, expected float16 "
                                    f"{(rows, self.dims)}; rebuild it")
            got = 0
            while got < view.nbytes:
                n = f.readinto(view[got:])
                if not n:
                    raise ArtifactError(f"{path}: {got} of {view.nbytes} data bytes (the file is truncated); rebuild it")
                got += n
        return out

    def iter_chunks(self) -> Iterator[np.ndarray]:
        """Every shard as fp32 vectors, read from its file (see :meth:`read_shard`)."""
        for i in range(len(self.shards)):
            yield self.read_shard(i).astype(np.float32)


def build_embeddings_step(cfg, dest: Path, inputs):
    from lexrag.artifacts import corpus_id
    from lexrag.index.corpus import Corpus

    corpus = inputs.corpus or Corpus(inputs.corpus_dir, lookups=False)
    kw, sc = dict(inputs.extra), cfg.semantic
    return build_embeddings(corpus, kw.pop("model", sc.model), dest, corpus_id=corpus_id(inputs.corpus_dir),
                            shard_size=sc.shard_size, batch_size=sc.batch_size, max_seq=sc.max_seq, fields=sc.fields,
                            device=sc.device, fp16=sc.fp16, devices=sc.devices or None, progress=cfg.runtime.progress, **kw)


# loaded by the dense part (lexrag.pipeline.artifacts), which reads it with its encoder
SPEC = declare(ArtifactSpec(
    "embeddings", ("corpus",), switch="semantic.enabled", dataset="lexrag-embeddings",
    title="lexrag corpus embeddings (BGE-M3, float16 shards)",
    description="float16 embeddings of the corpus in shards of 100K documents; built on a GPU (notebooks/04_build_embeddings)",
    builder="python build_datasets.py --only embeddings --out OUT --set semantic.model=MODEL_FOLDER",
    notebook="04_build_embeddings", build=build_embeddings_step,
    rebuild="notebooks/04_build_embeddings (or build_datasets.py --only embeddings) on a GPU"))
