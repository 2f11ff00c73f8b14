"""Check (not a benchmark): every GPU path of lexrag with tiny random-weight models, in minutes.

  python -m lexrag.cli.gpu_check             # on a CUDA machine (a Kaggle cell with the wheels installed)
  python -m lexrag.cli.gpu_check --cpu       # the reduced CPU mode the test suite runs
  python -m lexrag.cli.gpu_check --json out.json

It ships in the lexrag wheel, so a Kaggle notebook with the lexrag-wheels dataset attached runs it
in a cell (``!python -m lexrag.cli.gpu_check``; ``scripts/gpu_check.py`` in the repository is the same).
It builds a tiny Qwen2-style chat model, a tiny sentence-transformers encoder and a tiny
cross-encoder (:mod:`lexrag.testing`), loads each through lexrag's own loaders and runs:

- generation and P(Yes) with the LLM in fp16 and in 4-bit NF4 on the first GPU (``llm.device``);
- the encoder and the reranker on the second GPU (``cuda:1`` where there are two, as the
  ``kaggle`` preset places them; the first GPU where there is one, with a warning);
- the pipeline as the ``kaggle`` preset places it: tiny corpus, BM25, embeddings encoded on the
  second GPU, the FAISS index where lexrag puts it (the last GPU when faiss has GPU support), the
  LLM rewrite and verification on the first GPU, dense retrieval and the reranker on the second,
  all three models resident at once; with its own out-of-memory handling hit: the reranker's
  first call runs out of memory (simulated), the chunk is retried query by query, and the status
  row must say the stage ran for every query;
- the out-of-memory path of the device itself: an allocation larger than the GPU, then
  ``release_memory`` must give the memory back so the next load works (GPU mode only).

Each check prints one line with its seconds, items or tokens per second and the peak GPU memory
per device (``torch.cuda.max_memory_allocated``); the run ends ``OK`` or ``FAILED (n checks)``
and exits 0 or 1.  Random weights generate nonsense: this checks that the paths run on the
devices, not quality.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]


def _peaks(torch, devices: list[str]) -> dict[str, float] | None:
    """Peak allocated GB per CUDA device since the last reset (None on the CPU)."""
    cuda = sorted({d for d in devices if d.startswith("cuda")})
    if not cuda:
        return None
    return {d: round(torch.cuda.max_memory_allocated(torch.device(d)) / 2**30, 3) for d in cuda}


def _tiny_laws(path: Path, sentences: list[str]) -> Path:
    """A laws CSV of a few paragraphs (the tiny tokenizers' own sentences, so they tokenize)."""
    german = [s for s in sentences if not s.startswith("The ")]
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["citation", "text", "title"])
        for i in range(60):
            w.writerow([f"Art. {i + 1} Abs. 1 OR", german[i % len(german)] + f" Absatz {i}.", "Obligationenrecht"])
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="reduced mode on the CPU (no CUDA needed)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per LLM check")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap, argv)
    if args.prompts < 1 or args.max_new_tokens < 1:
        ap.error("--prompts and --max-new-tokens must be >= 1")
    if args.json:  # before the checks: a folder, a link or a place that cannot be written is said now, not after them
        from lexrag.errors import LexragError
        from lexrag.io.outputs import check_output_file

        try:
            check_output_file(args.json, "--json", example="gpu_check.json")
        except LexragError as e:
            ap.error(str(e))
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    import torch

    from lexrag.models import usable_gpus

    gpus = usable_gpus()
    if not args.cpu and not gpus:
        print("FAILED: no usable CUDA GPU (compute capability >= 7.0); run with --cpu for the reduced CPU mode")
        return 1
    first = "cpu" if args.cpu else f"cuda:{gpus[0]}"
    second = "cpu" if args.cpu else (f"cuda:{gpus[1]}" if len(gpus) > 1 else first)
    devices = [first, second]
    import signal

    def stop(signum, frame):  # a SIGTERM (a timeout, a job killed) unwinds, so the folder below is removed
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    with tempfile.TemporaryDirectory(prefix="lexrag-gpu-check-") as tmp:  # the tiny models go with it
        return _checks(args, torch, devices, gpus, Path(tmp))


def _checks(args, torch, devices: list[str], gpus: list[int], work: Path) -> int:
    from lexrag.models import load_causal_lm, load_encoder, release_memory, resolve_device
    from lexrag.stages.rerank import Reranker
    from lexrag.testing import SENTENCES, make_tiny_encoder, make_tiny_llm, make_tiny_reranker

    first, second = devices
    llm_dir = make_tiny_llm(work / "tiny-qwen2")
    enc_dir = make_tiny_encoder(work / "enc")
    rr_dir = make_tiny_reranker(work / "rr")
    prompts_msgs = [[{"role": "user", "content": f"Frage {i}: Wer haftet für den Schaden nach Art. {41 + i} OR?"}]
                    for i in range(args.prompts)]
    results: list[dict] = []

    def check(name: str, fn) -> None:
        for d in devices:
            if d.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats(torch.device(d))
        t0 = time.perf_counter()
        try:
            rec = {"check": name, **(fn() or {})}
            rec["ok"] = True
        except Exception as e:  # noqa: BLE001 - a check reports its failure and the next one runs
            rec = {"check": name, "ok": False, "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        rec["peak_gpu_gb"] = _peaks(torch, devices)
        results.append(rec)
        extra = ", ".join(f"{k} {v}" for k, v in rec.items() if k not in ("check", "ok", "seconds", "error", "status"))
        print(f"{'ok  ' if rec['ok'] else 'FAIL'} {name:<32} {rec['seconds']:7.2f}s  {extra}"
              + (f"  {rec['error']}" if not rec["ok"] else ""))

    def llm(quant: str):
        def run():
            t0 = time.perf_counter()
            lm = load_causal_lm(llm_dir, quantization=quant, device=first, compute_dtype="float16" if first != "cpu" else "float32")
            load_s = time.perf_counter() - t0
            prompts = [lm.render_chat(m) for m in prompts_msgs]
            t1 = time.perf_counter()
            out = lm.generate(prompts, args.max_new_tokens)
            gen_s = time.perf_counter() - t1
            t2 = time.perf_counter()
            ps = lm.yes_probability(prompts)
            yes_s = time.perf_counter() - t2
            assert len(out) == len(prompts) and all(0.0 <= p <= 1.0 for p, _ in ps), "bad generation or P(Yes)"
            prompt_tokens = sum(n for _, n, _ in out)
            gen_tokens = sum(g for _, _, g in out)
            del lm
            release_memory()
            return {"device": first, "load_s": round(load_s, 2), "prompt_tok_per_s": round(prompt_tokens / max(gen_s, 1e-9), 1),
                    "gen_tok_per_s": round(gen_tokens / max(gen_s, 1e-9), 1),
                    "p_yes_per_s": round(len(prompts) / max(yes_s, 1e-9), 1)}
        return run

    def encoder():
        m = load_encoder(enc_dir, device=second, fp16=second != "cpu", max_seq=64)
        texts = [f"Art. {i} OR: Der Vertrag kommt durch übereinstimmende Willensäusserung zustande." for i in range(256)]
        t0 = time.perf_counter()
        v = m.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        dt = time.perf_counter() - t0
        assert v.shape[0] == len(texts)
        return {"device": second, "items_per_s": round(len(texts) / max(dt, 1e-9), 1)}

    def reranker():
        rr = Reranker(rr_dir, device=second, max_length=64, batch_size=32, fp16=second != "cpu")
        texts = [f"Art. {i} ZGB: Jedermann hat nach Treu und Glauben zu handeln." for i in range(128)]
        t0 = time.perf_counter()
        s = rr.scores("Gilt Treu und Glauben?", texts)
        dt = time.perf_counter() - t0
        assert s.shape == (len(texts),)
        return {"device": second, "items_per_s": round(len(texts) / max(dt, 1e-9), 1)}

    def second_gpu():
        want = "cuda:1"
        got = resolve_device(want)
        expect = "cuda:1" if 1 in gpus else (f"cuda:{gpus[0]}" if gpus else "cpu")
        assert got == expect, f"{want} resolved to {got}, expected {expect}"
        return {"resolved": got}

    def pipeline():
        from lexrag.config import load_config
        from lexrag.eval.status import run_status
        from lexrag.pipeline.build import build_artifacts
        from lexrag.pipeline import Artifacts, run_pipeline
        from lexrag.queries import Query

        over = {"runtime.progress": False, "runtime.on_stage_error": "skip", "runtime.resident_models": 3,
                "semantic.enabled": True, "semantic.model": str(enc_dir), "semantic.device": second, "semantic.max_seq": 64,
                "semantic.shard_size": 1000, "rerank.enabled": True, "rerank.model": str(rr_dir), "rerank.device": second,
                "rerank.max_length": 64, "rerank.tau": -1e9, "llm.enabled": True,  # random scores: keep every candidate
                "llm.model": str(llm_dir), "llm.device": first,
                "llm.quantization": "nf4", "llm.tasks": ["translate", "concepts"], "llm.max_new_tokens": args.max_new_tokens,
                "llm.cache_dir": str(work / "llm_cache"), "verify.enabled": True, "count.k": 5}
        cfg = load_config(None, over)
        build_artifacts(cfg, _tiny_laws(work / "laws.csv", SENTENCES), work / "art")
        art = Artifacts.from_folder(work / "art", cfg)
        real = art.loaders["reranker"]
        calls = {"n": 0}

        def reranker_that_runs_out_once():  # the first call does not fit; the pipeline must split the chunk
            rr = real()
            scores = rr.scores

            def once(query, texts):
                calls["n"] += 1
                if calls["n"] == 1:
                    raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated by lexrag.cli.gpu_check)")
                return scores(query, texts)

            rr.scores = once
            return rr

        art.loaders["reranker"] = reranker_that_runs_out_once
        queries = [Query(f"q{i}", s) for i, s in enumerate(SENTENCES)]
        res = run_pipeline(queries, art, cfg)
        status = run_status(cfg, art, res)
        rows = {r.stage: r for r in status.rows}
        want = ("rewrite", "bm25", "dense", "rerank", "verify", "count")
        bad = [f"{s}: {rows[s].state} {rows[s].queries}/{rows[s].total}" for s in want if s not in rows or rows[s].state != "ran"]
        assert not bad, "stages that did not run for every query: " + "; ".join(bad)
        assert calls["n"] > 1 and not res.failed, f"the simulated out-of-memory was not contained: {res.failed}"
        assert all(res.predictions[q.query_id] for q in queries), "a query has no answer"
        return {"faiss": art.dense.device, "llm": first, "encoder_reranker": second,
                "rerank_calls": calls["n"], "stages_s": {k: round(v, 2) for k, v in res.timings.items()}}

    def oom():
        total = torch.cuda.get_device_properties(torch.device(first)).total_memory
        try:
            torch.empty(int(total * 1.5), dtype=torch.uint8, device=first)
            raise AssertionError("an allocation of 1.5x the GPU's memory succeeded")
        except torch.cuda.OutOfMemoryError:
            pass
        release_memory()
        lm = load_causal_lm(llm_dir, quantization="nf4", device=first)  # the next load still works
        del lm
        release_memory()
        return {"gpu_gb": round(total / 2**30, 1)}

    check("llm fp16" if first != "cpu" else "llm fp32 (cpu)", llm("none"))
    check("llm nf4", llm("nf4"))
    check("encoder", encoder)
    check("reranker", reranker)
    check("cuda:1 on this machine", second_gpu)
    check("pipeline, three models resident", pipeline)
    if first != "cpu":
        check("out of memory, then a load", oom)
    failed = [r["check"] for r in results if not r["ok"]]
    names = [torch.cuda.get_device_name(torch.device(d)) for d in dict.fromkeys(devices) if d.startswith("cuda")]
    info = {"devices": devices, "torch": torch.__version__, "gpus": names, "results": results}
    if args.json:
        from lexrag.io.outputs import replace_text

        replace_text(args.json, json.dumps(info, indent=1))  # whole or not at all
    print(f"{'OK' if not failed else f'FAILED ({len(failed)} checks: ' + ', '.join(failed) + ')'}: {len(results)} checks on "
          f"{' + '.join(names) or 'the CPU'} (torch {torch.__version__})")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
