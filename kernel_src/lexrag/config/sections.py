"""The config's sections: one dataclass per stage or concern, each field made with
:func:`lexrag.config.fields.field_spec` (its default, its help text and, for a number, its valid
range; for a string, its choices).  :mod:`lexrag.config` assembles them into
:class:`lexrag.config.Config` and checks them."""

from __future__ import annotations

from dataclasses import dataclass

from lexrag.citations import CITATION_KINDS
from lexrag.config.fields import MAX_BATCH, MAX_CHARS, MAX_KEPT, MAX_PQ_M, MAX_REPEAT, MAX_ROUNDS, MAX_ROWS, MAX_TOKENS
from lexrag.config.fields import field_spec as _f  # the short name keeps the field tables below readable
from lexrag.signals import GRAPH_SIGNALS, VARIANTS

__all__ = [
    "COMMUNITY_RESOLUTION", "WEIGHTINGS",
    "CorpusConfig", "LexicalConfig", "StatutesConfig", "ArticlesConfig", "FeedbackConfig", "RankerConfig",
    "DictionaryConfig", "SeedConfig", "FusionConfig", "SemanticConfig", "RerankConfig", "GraphConfig",
    "PriorConfig", "VerifyConfig", "AgentConfig", "CountConfig", "LLMConfig", "QueryConfig", "RuntimeConfig",
    "PathsConfig", "EnglishConfig",
]


@dataclass
class CorpusConfig:
    chunk_rows: int = _f(20_000, "rows written per parquet row group when streaming the input CSVs (bounds memory; at least "
                                 "1,000: smaller row groups make a build crawl)", range=(1_000, MAX_ROWS))
    strict_quotes: bool = _f(True, "a record the CSV parser cannot close, or one over several lines of the wrong "
                                   "width (an unmatched quote: it swallows the rows after it), stops the build, "
                                   "naming its lines; false: drop it and count its lines in the build report. Records "
                                   "of the right width are kept, quoted fields over several lines included")


@dataclass
class LexicalConfig:
    enabled: bool = _f(True, "run the BM25 signals")
    k1: float = _f(1.5, "BM25 k1", range=(1e-09, None))
    b: float = _f(0.75, "BM25 b", range=(0, 1))
    method: str = _f("lucene", "BM25 variant (bm25s method): lucene | robertson | atire", choices=('lucene', 'robertson', 'atire'))
    stemmer: str = _f("german", "Snowball stemmer language (PyStemmer); empty string: no stemming")
    min_token_len: int = _f(2, "tokens shorter than this are dropped (paper: drop 1-char tokens)", range=(1, None))
    decompound: bool = _f(True, "index and search German compounds also by their parts (Mietvertrag: miet, vertrag), "
                                "split by the corpus' own word counts (lexrag.index.decompound)")
    decompound_min_part: int = _f(4, "letters a compound part has at least", range=(2, None))
    decompound_min_count: int = _f(5, "times a compound part occurs in the corpus at least", range=(1, None))
    top_k: int = _f(100, "documents kept per BM25 signal", range=(1, MAX_KEPT))
    fields: list = _f(
        ["citation", "title", "text", "heading", "heading", "path"],
        "corpus columns joined into each BM25 document, a column named n times weighing n times (the citation brings the "
        "code abbreviation, the title the law's name; heading and path, the article's heading and the headings above it, "
        "come from a corpus built with --headings and are empty otherwise: weights chosen by area, nested, docs/results.md)",
    )
    question_weight: int = _f(1, "the terms of the question's sentences that end in '?' count this many times (1: "
                                 "like every other term; for case stories that end in the question asked)",
                              range=(1, MAX_REPEAT))
    code_vote: float = _f(1.0, "statute vote: the best 50 law paragraphs vote for their law code with "
                               "their scores, and every law paragraph's score is multiplied by (1 + code_vote x "
                               "share) / (1 + code_vote), share being its code's vote over the best code's (0: off)")
    numbered_code_weight: float = _f(0.5, "score factor for paragraphs of laws keyed by an SR number instead of an "
                                          "abbreviation (no lexam_dev, train_dev or val gold cites one; 0 drops them)", range=(0, 1))
    variants: list = _f(
        ["query", "de", "hyde", "sparse", "concepts", "dict_de"],
        f"query variants searched, one signal bm25_<variant> each, when the query has that variant ({', '.join(VARIANTS)})",
    )


@dataclass
class StatutesConfig:
    enabled: bool = _f(False, "statute detection: BM25 restricted to the law codes the question names (abbreviations, "
                              "statute names from the law titles) as the bm25_statute signal, and to the agreed codes "
                              "(see agree) as bm25_statute_agreed")
    max_codes: int = _f(3, "codes taken from a question at most, in the order it names them", range=(1, MAX_KEPT))
    learned: bool = _f(False, "after the codes a question names, add the codes a model of the training questions "
                              "predicts (needs the prior artifact built with --train)")
    agree: float = _f(1.5, "a code is 'agreed' when the question names it or, with learned, its learned similarity "
                           "over the best code's plus its statute vote over the best code's reaches this (2: both "
                           "predictors' best); agreed codes form the bm25_statute_agreed signal (0: no such signal)", range=(0, None))
    agreed_top_k: int = _f(300, "documents kept in the bm25_statute_agreed signal", range=(1, MAX_KEPT))
    top_k: int = _f(100, "documents kept in the bm25_statute signal", range=(1, MAX_KEPT))


@dataclass
class ArticlesConfig:
    enabled: bool = _f(False, "article-level ranking: articles scored from their paragraphs' BM25, the paragraphs of "
                              "the best articles as the bm25_article signal")
    top_articles: int = _f(30, "articles whose paragraphs are emitted", range=(1, MAX_KEPT))


@dataclass
class FeedbackConfig:
    enabled: bool = _f(False, "pseudo-relevance feedback: the question expanded with the terms that weigh most in its "
                              "top BM25 documents, as the bm25_prf signal")


@dataclass
class RankerConfig:
    enabled: bool = _f(False, "reorder the top of the fused list by the learned ranker (LambdaRank over features that name "
                              "no code or area; needs the ranker artifact, built with --train and ranker.enabled)")
    depth: int = _f(300, "distinct citations of the fused list the ranker reorders (and a build trains on)",
                    range=(1, MAX_KEPT))
    reorder: bool = _f(True, "put the candidates in the learned order; false: keep the fused order, and only the "
                             "expected_f1 count reads the ranker's probabilities (the part that carried over to unseen areas)")
    laws_only: bool = _f(False, "only law candidates move; court decisions keep their slots (a ranker trained on exam gold never saw a "
                                "court citation rewarded)")


WEIGHTINGS = ("uniform", "indexed", "structured", "first_pass")  # dictionary.weighting (lexrag.index.dictionary.weighted)


@dataclass
class EnglishConfig:
    enabled: bool = _f(False, "search an English question as written in the laws' English texts (the bm25_en artifact, built "
                              "with --laws-en), as the bm25_en signal fused with the others; German questions are left alone")


@dataclass
class DictionaryConfig:
    enabled: bool = _f(False, "translate English questions word by word with the dictionary artifact (built with --dictionary) "
                              "into the dict_de variant, searched beside the question (and beside the LLM's translation)")
    weighting: str = _f("indexed", "how an English word's German senses share its weight: uniform (1/n each; the only one "
                                   "that needs no BM25 index), indexed (1/n over the senses the BM25 index holds), structured "
                                   "(indexed, each scaled to the idf of the word's senses taken together, so a rare wrong sense "
                                   "does not outweigh a common right one), first_pass (indexed, each by how many of the top "
                                   "documents of a first search with the indexed weighting hold it; not the feedback stage)",
                        choices=WEIGHTINGS)
    compounds: bool = _f(True, "also search German compounds made of two adjacent English words' noun senses, modifier first, "
                               "that the BM25 index holds whole (\"month period\" -> Monatsfrist); a pair's compounds "
                               "share one word's weight")
    first_pass_docs: int = _f(20, "top documents of the first search that the first_pass weighting counts senses in",
                              range=(1, MAX_KEPT))

    def reads_index(self) -> tuple[str, str] | None:
        """("<the settings that read the BM25 index> read(s) the BM25 index", the settings that
        translate without it), or None when none does: the one message of a config or a run without
        the index."""
        reads = [f"dictionary.weighting={self.weighting}"] * (self.weighting != "uniform") + ["dictionary.compounds"] * self.compounds
        if not reads:
            return None
        ways_out = ["dictionary.weighting=uniform"] * (self.weighting != "uniform") + ["dictionary.compounds=false"] * self.compounds
        return " and ".join(reads) + (" read" if len(reads) > 1 else " reads") + " the BM25 index", " ".join(ways_out)


@dataclass
class SeedConfig:
    enabled: bool = _f(True, "emit citations named in the query as the citation_seeds signal")


@dataclass
class FusionConfig:
    rrf_k: int = _f(60, "RRF constant k in w / (k + rank) (Cormack et al. 2009; paper: 60)")
    weights: dict = _f(
        {"citation_seeds": 4.0, "llm_seeds": 1.0, "bm25_de": 2.0, "bm25_dict_de": 2.0, "bm25_query": 1.0, "siblings": 0.3,
         "bm25_statute_agreed": 0.5},
        "per-signal RRF weight; signals not listed get default_weight",
    )
    default_weight: float = _f(1.0, "weight of a signal missing from weights")
    depth: int = _f(300, "fused candidates kept per query", range=(1, MAX_KEPT))
    boost: float = _f(5.0, "score factor for documents found by a content family and the graph family (paper: 5.0)")
    boost_exclude: list = _f(["siblings"], "signals that do not count towards the cross-signal boost (siblings restate content hits)")


@dataclass
class SemanticConfig:
    enabled: bool = _f(False, "dense retrieval (needs an encoder folder and the embeddings artifact)")
    model: str = _f("", "sentence-transformers folder (BGE-M3 on Kaggle); candidates separated by '|', each a path, a "
                        "Kaggle Model handle, a folder name or a config.json name (see lexrag.models.paths)")
    device: str = _f("auto", "cuda | cpu | auto")
    devices: list = _f([], "encode the corpus on several devices at once, e.g. [cuda:0, cuda:1] (Kaggle 2xT4)")
    fp16: bool = _f(True, "half precision on GPU")
    batch_size: int = _f(256, "encoding batch size (paper: 256)", range=(1, MAX_BATCH))
    max_seq: int = _f(256, "encoder max sequence length (paper: 256)", range=(8, MAX_TOKENS))
    shard_size: int = _f(100_000, "documents per embeddings shard (a resumable unit; paper: checkpoint every 100K)",
                          range=(1, MAX_ROWS))
    fields: list = _f(["title", "text"], "corpus columns joined into the encoded text")
    index: str = _f("flat", "flat (exact, the fp16 vectors in memory: 2 bytes a dimension) | ivfpq (compressed, exact "
                            "re-scoring of the top rescore_k) | auto (flat when it fits in memory)", choices=('flat', 'ivfpq', 'auto'))
    faiss_gpu: str = _f("auto", "auto: the index on the last usable GPU when faiss has GPU support and it takes <= "
                                "40% of that GPU | cpu | gpu", choices=('auto', 'cpu', 'gpu'))
    nlist: int = _f(2048, "IVF lists (ivfpq; about sqrt(N), trained on 100K vectors)", range=(1, MAX_KEPT))
    pq_m: int = _f(64, "PQ sub-quantizers, bytes per vector (ivfpq)", range=(1, MAX_PQ_M))
    nprobe: int = _f(64, "IVF lists searched per query (ivfpq)", range=(1, MAX_KEPT))
    rescore_k: int = _f(1000, "candidates re-scored exactly against the fp16 embeddings (ivfpq)", range=(1, MAX_KEPT))
    variants: list = _f(
        ["query", "de", "hyde", "dense"],
        "query variants encoded, one signal dense_<variant> each, when the query has that variant (paper: query, German, HyDE)",
    )


@dataclass
class RerankConfig:
    enabled: bool = _f(False, "cross-encoder reranking of the fused candidates (needs a model folder)")
    model: str = _f("", "CrossEncoder folder (bge-reranker-v2-m3 on Kaggle); candidates separated by '|', as for semantic.model")
    device: str = _f("auto", "cuda | cpu | auto")
    tau: float = _f(0.5, "candidates scoring below this are dropped (paper: 0.5)", range=(None, None))
    batch_size: int = _f(32, "pairs per batch", range=(1, MAX_BATCH))
    max_length: int = _f(512, "tokens per (query, document) pair; longer pairs are truncated", range=(8, MAX_TOKENS))


# the resolution whose communities the community signal uses (paper: 1.0), a constant: graph.resolutions must hold it
COMMUNITY_RESOLUTION = 1.0


@dataclass
class GraphConfig:
    enabled: bool = _f(False, "use the citation graph signals (off by default: see docs/results.md; "
                              "the graph artifact is built whenever court considerations are given)")
    seed_k: int = _f(20, "top fused candidates that seed the graph signals (paper: 20)", range=(1, MAX_KEPT))
    resolutions: list = _f([0.5, 1.0, 2.0], "Leiden resolutions, nested coarse -> fine")
    top_k: int = _f(100, "documents kept per graph signal", range=(1, MAX_KEPT))
    siblings_kinds: list = _f(
        ["bge", "docket"],
        "parents whose other documents the siblings signal emits: decisions; add 'law' for other paragraphs of an article",
        choices=CITATION_KINDS,
    )
    signals: dict = _f(
        {name: True for name in GRAPH_SIGNALS},
        "graph signals switched on",
    )


@dataclass
class PriorConfig:
    enabled: bool = _f(False, "use the training-gold prior (needs a prior artifact: build --train FILE)")
    min_count: int = _f(2, "ignore citations seen in fewer training gold sets", range=(1, None))
    neighbours: int = _f(0, "prior_similar: the citations of the training questions most like the question (tf-idf "
                            "cosine), from this many of them (0: off)", range=(0, MAX_KEPT))


@dataclass
class VerifyConfig:
    enabled: bool = _f(False, "LLM verification of the top candidates by P(Yes) (needs llm.enabled)")
    depth: int = _f(30, "candidates judged per query, from the top of the reranked (or fused) order",
                    range=(1, MAX_KEPT))
    threshold: float = _f(0.5, "candidates with P(Yes) at or above this move ahead, ordered by P(Yes)", range=(0, 1))
    max_text_chars: int = _f(1200, "candidate text shown to the verifier, cut at this many characters",
                             range=(1, MAX_CHARS))
    expand: bool = _f(True, "verified items pull in their graph neighbours (siblings and co-cited authorities; needs the graph)")
    expand_k: int = _f(3, "graph neighbours pulled in per verified item", range=(0, MAX_KEPT))


@dataclass
class AgentConfig:
    enabled: bool = _f(False, "agentic reformulation loop: planner -> retrieve -> observer, round by round (needs llm.enabled)")
    max_rounds: int = _f(10, "planner rounds at most (round 0 observes the question's own ranking)",
                         range=(1, MAX_ROUNDS))
    queries_per_round: int = _f(3, "German keyword queries the planner may write per round", range=(1, MAX_ROUNDS))
    observe_depth: int = _f(20, "top candidates of each retrieved (fused) list the observer judges with the "
                                "verifier's Yes/No logits", range=(1, MAX_KEPT))
    threshold: float = _f(0.5, "the observer keeps a candidate with P(Yes) at or above this", range=(0, 1))


@dataclass
class CountConfig:
    method: str = _f("fixed", "how many citations to emit per query: fixed | elbow | adaptive | expected_f1 (the cut that "
                              "maximises expected F1 under the learned ranker's relevance probabilities; needs ranker.enabled)",
                     choices=('fixed', 'elbow', 'adaptive', 'expected_f1'))
    k: int = _f(3, "citations emitted per query when method=fixed (the k the held-out legal areas of lexam_dev chose "
                   "for these defaults: repro/lexam_dev.yaml)", range=(1, MAX_KEPT))
    min_k: int = _f(8, "lower clip of the elbow and adaptive counts (paper: 8)", range=(0, MAX_KEPT))
    max_k: int = _f(50, "upper clip of the elbow and adaptive counts (paper: 50)", range=(1, MAX_KEPT))
    w_llm: float = _f(0.4, "adaptive: weight of n_LLM, the count the LLM estimated in concept extraction (paper: 0.4)")
    w_elbow: float = _f(0.3, "adaptive: weight of n_elbow, the elbow of the final score curve (paper: 0.3)")
    w_cal: float = _f(0.3, "adaptive: weight of n_cal, the count above the calibrated score threshold (paper: 0.3)")
    calibration: str = _f("", "adaptive: calibration folder written by `lexrag calibrate`; empty: the artifact 'calibration' "
                              "among the artifacts")
    whole_articles: int = _f(0, "also emit a law article as a whole ('Art. 41 OR') right after the n-th of its paragraphs in "
                                "the final order, taking a slot of the count (exam answers and the competition's train.csv "
                                "cite whole articles that are no corpus key; val.csv's gold is all corpus keys); 0: off",
                             range=(0, MAX_KEPT))
    articles_first: int = _f(0, "where the first n citations of the final order hold two or more paragraphs of one law "
                                "article, also emit the article as a whole ('Art. 62 ZPO') right before the first of them, "
                                "taking a slot of the count; 0: off", range=(0, MAX_KEPT))
    whole_articles_from: int = _f(0, "with whole_articles: keep the first n slots as ranked (paragraphs stay on top, "
                                     "where they are the gold form more often) and insert the articles due there right "
                                     "after them; 0: insert from the first slot on", range=(0, MAX_KEPT))


@dataclass
class LLMConfig:
    enabled: bool = _f(False, "LLM query rewriting (needs a causal LM folder, or a cache in replay mode)")
    model: str = _f("", "causal LM folder (Qwen2.5-7B-Instruct class on Kaggle); candidates separated by '|', as for semantic.model")
    backend: str = _f("transformers", "how the LLM runs: transformers (a causal LM folder, 4-bit NF4 on a GPU) | scripted "
                      "(fixed answers from the folder's lexrag_scripted.json: the demo and tests, no weights)",
                      choices=("transformers", "scripted"))
    model_name: str = _f("", "name that keys the LLM cache; empty: the model folder's name (give the same weights the "
                             "same name everywhere, so a cache built on one machine replays on another)")
    mode: str = _f("live", "live: generate what the cache lacks | replay: answer from the cache only, never load a model",
                   choices=('live', 'replay'))
    cache_dir: str = _f("", "folder of the LLM cache (cache.sqlite); empty: llm_cache in the working folder")
    replay_dirs: list = _f([], "read-only caches consulted before generating (e.g. an attached lexrag-llm-cache dataset)")
    tasks: list = _f(["translate", "concepts", "hyde", "sparse", "dense"], "rewrite tasks run per query")
    quantization: str = _f("nf4", "nf4 (bitsandbytes 4-bit NF4, double quantization) | none (fp16 on GPU, fp32 on CPU)",
                           choices=('nf4', 'none'))
    compute_dtype: str = _f("float16", "4-bit compute dtype: float16 (T4 has no bfloat16) | bfloat16 | float32",
                            choices=("float16", "bfloat16", "float32"))
    device: str = _f("auto", "cuda | cpu | auto (GPUs below compute capability 7.0 count as absent)")
    batch_size: int = _f(8, "prompts per generate call (left padding, longest first)", range=(1, MAX_BATCH))
    max_new_tokens: int = _f(1024, "upper bound on generated tokens per call; each template asks for its own, at most this",
                             range=(1, MAX_TOKENS))
    max_question_chars: int = _f(6000, "longer questions are cut for the LLM prompts, with a warning (about 4 characters a token)",
                                 range=(1, MAX_CHARS))
    max_answer_chars: int = _f(20_000, "longer LLM answers (generated or from a cache) are cut, with a warning, like "
                                       "queries at query.max_chars", range=(1, MAX_CHARS))


@dataclass
class QueryConfig:
    max_chars: int = _f(20_000, "longer queries are truncated (with a warning naming the query)", range=(1, MAX_CHARS))
    preference_variants: list = _f(
        ["de", "dict_de", "query"],
        "the text the BM25 re-searches read (statutes, articles, feedback, a graph node's best consideration or "
        "paragraph): the first of these variants the query has",
    )


@dataclass
class RuntimeConfig:
    time_budget_s: float = _f(
        0.0, "wall-clock budget for a run in seconds, checked before each stage call; past it only essential stages run; 0 = unlimited"
    )
    progress: bool = _f(True, "tqdm progress bars (switched off when CI is set)")
    batch_size: int = _f(16, "queries per stage call; the budget is checked before each call", range=(1, MAX_BATCH))
    reserve_s: float = _f(0.0, "seconds of the budget kept back for writing and checking the submission")
    on_stage_error: str = _f(
        "raise", "raise: a failing stage stops the run | skip: the queries it failed for go on without it (logged, in RunResult.failed)"
    , choices=('raise', 'skip'))
    resident_models: int = _f(1, "models kept loaded at once (encoder, reranker, LLM take turns on one GPU when 1)", range=(1, None))
    degrade_order: list = _f(
        [["agent"], ["verify"], ["rerank"], ["dense", "graph", "prior"], ["rewrite"],
         ["statutes", "feedback", "articles", "ranker", "dictionary", "english"]],
        "groups of optional stages dropped, first group first, when the projected time of the rest of the run exceeds the budget left "
        "(the extra BM25 passes last: one BM25 query each, the cheapest to keep)",
    )
    stage_estimates_s: dict = _f(
        {"rewrite": 20.0, "dense": 0.5, "graph": 1.0, "prior": 0.1, "rerank": 4.0, "verify": 20.0, "agent": 120.0,
         "statutes": 0.1, "feedback": 0.1, "articles": 0.1, "ranker": 0.05, "dictionary": 0.01},
        "seconds per query assumed for a stage until it has run on some queries (then its measured rate is used)",
    )


@dataclass
class PathsConfig:
    input_dir: str = _f("", "local folder with competition CSVs; empty: ./data (Kaggle: the input root)")
    artifacts_dir: str = _f("", "local folder with artifact subfolders; empty: ./artifacts")
    working_dir: str = _f("", "where outputs go; empty: the current folder (Kaggle: the working folder)")
    competition: str = _f("", "Kaggle competition folder name under the input root")
