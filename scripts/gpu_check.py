#!/usr/bin/env python
"""Check (not a benchmark): every GPU path of lexrag with tiny random-weight models, in minutes.

  python scripts/gpu_check.py             # on a CUDA machine: every check on the GPU
  python scripts/gpu_check.py --cpu       # the reduced CPU mode the test suite runs
  python scripts/gpu_check.py --json out.json

Builds a tiny Qwen2-style chat model, a tiny sentence-transformers encoder and a tiny cross-encoder
(tests/tinymodels.py), loads each through lexrag's own loaders and runs:

- generation and P(Yes) with the LLM in fp16 and in 4-bit NF4 (``llm.quantization``);
- the encoder (``semantic.device``) and the reranker (``rerank.device``);
- ``cuda:1`` on a machine with one GPU: lexrag must fall back to the GPU it has, with a warning;
- the out-of-memory path: an allocation larger than the GPU, then ``release_memory`` must give the
  memory back so the next load works (GPU mode only).

Each check prints one line with its seconds, items or tokens per second and the peak GPU memory
(``torch.cuda.max_memory_allocated``); the run ends ``OK`` or ``FAILED (n checks)`` and exits 0 or 1.
Random weights generate nonsense: this checks that the paths run on the device, not quality.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny-model builders the tests use


def _peak_gb(torch, device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    return round(torch.cuda.max_memory_allocated(torch.device(device)) / 2**30, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="reduced mode on the CPU (no CUDA needed)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per LLM check")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    import torch

    from lexrag.models import load_causal_lm, load_encoder, release_memory, resolve_device, usable_gpus
    from lexrag.stages.rerank import Reranker
    from tinymodels import make_tiny_encoder, make_tiny_llm, make_tiny_reranker

    gpus = usable_gpus()
    if not args.cpu and not gpus:
        print("FAILED: no usable CUDA GPU (compute capability >= 7.0); run with --cpu for the reduced CPU mode")
        return 1
    device = "cpu" if args.cpu else f"cuda:{gpus[0]}"
    work = Path(tempfile.mkdtemp(prefix="lexrag-gpu-check-"))
    llm_dir = make_tiny_llm(work / "tiny-qwen2")
    enc_dir = make_tiny_encoder(work / "enc")
    rr_dir = make_tiny_reranker(work / "rr")
    prompts_msgs = [[{"role": "user", "content": f"Frage {i}: Wer haftet für den Schaden nach Art. {41 + i} OR?"}]
                    for i in range(args.prompts)]
    results: list[dict] = []

    def check(name: str, fn) -> None:
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            rec = {"check": name, **(fn() or {})}
            rec["ok"] = True
        except Exception as e:  # noqa: BLE001 - a check reports its failure and the next one runs
            rec = {"check": name, "ok": False, "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        rec["peak_gpu_gb"] = _peak_gb(torch, device)
        results.append(rec)
        extra = ", ".join(f"{k} {v}" for k, v in rec.items() if k not in ("check", "ok", "seconds", "error"))
        print(f"{'ok  ' if rec['ok'] else 'FAIL'} {name:<28} {rec['seconds']:7.2f}s  {extra}"
              + (f"  {rec['error']}" if not rec["ok"] else ""))

    def llm(quant: str):
        def run():
            t0 = time.perf_counter()
            lm = load_causal_lm(llm_dir, quantization=quant, device=device, compute_dtype="float16" if device != "cpu" else "float32")
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
            return {"load_s": round(load_s, 2), "prompt_tok_per_s": round(prompt_tokens / max(gen_s, 1e-9), 1),
                    "gen_tok_per_s": round(gen_tokens / max(gen_s, 1e-9), 1),
                    "p_yes_per_s": round(len(prompts) / max(yes_s, 1e-9), 1)}
        return run

    def encoder():
        m = load_encoder(enc_dir, device=device, fp16=device != "cpu", max_seq=64)
        texts = [f"Art. {i} OR: Der Vertrag kommt durch übereinstimmende Willensäusserung zustande." for i in range(256)]
        t0 = time.perf_counter()
        v = m.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        dt = time.perf_counter() - t0
        assert v.shape[0] == len(texts)
        return {"items_per_s": round(len(texts) / max(dt, 1e-9), 1)}

    def reranker():
        rr = Reranker(rr_dir, device=device, max_length=64, batch_size=32, fp16=device != "cpu")
        texts = [f"Art. {i} ZGB: Jedermann hat nach Treu und Glauben zu handeln." for i in range(128)]
        t0 = time.perf_counter()
        s = rr.scores("Gilt Treu und Glauben?", texts)
        dt = time.perf_counter() - t0
        assert s.shape == (len(texts),)
        return {"items_per_s": round(len(texts) / max(dt, 1e-9), 1)}

    def second_gpu():
        want = "cuda:1"
        got = resolve_device(want)
        expect = "cuda:1" if 1 in gpus else (f"cuda:{gpus[0]}" if gpus else "cpu")
        assert got == expect, f"{want} resolved to {got}, expected {expect}"
        return {"resolved": got}

    def oom():
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        try:
            torch.empty(int(total * 1.5), dtype=torch.uint8, device=device)
            raise AssertionError("an allocation of 1.5x the GPU's memory succeeded")
        except torch.cuda.OutOfMemoryError:
            pass
        release_memory()
        lm = load_causal_lm(llm_dir, quantization="nf4", device=device)  # the next load still works
        del lm
        release_memory()
        return {"gpu_gb": round(total / 2**30, 1)}

    check("llm fp16" if device != "cpu" else "llm fp32 (cpu)", llm("none"))
    check("llm nf4", llm("nf4"))
    check("encoder", encoder)
    check("reranker", reranker)
    check("cuda:1 on this machine", second_gpu)
    if device != "cpu":
        check("out of memory, then a load", oom)
    failed = [r["check"] for r in results if not r["ok"]]
    info = {"device": device, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(torch.device(device)) if device != "cpu" else None, "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(f"{'OK' if not failed else f'FAILED ({len(failed)} checks: ' + ', '.join(failed) + ')'}: {len(results)} checks on "
          f"{info['gpu'] or 'the CPU'} (torch {torch.__version__})")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
