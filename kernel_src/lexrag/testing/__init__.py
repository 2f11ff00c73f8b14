"""Tiny models for tests and checks: random weights, a tokenizer trained on a few sentences,
saved as ordinary model folders so lexrag's real loaders read them (``make_tiny_encoder``,
``make_tiny_reranker``, ``make_tiny_llm``).  The test suite, the benchmarks and
``python -m lexrag.cli.gpu_check`` build them; they need ``tokenizers``, ``transformers`` and
(for the encoder) ``sentence-transformers``.  Random weights generate nonsense: they check that
a path runs, never quality.  Nothing here is ever committed as weights.  Also a tiny FreeDict
dictionary (``write_dictd``); synthetic court considerations are in :mod:`lexrag.testing.synthetic`."""

from __future__ import annotations

import contextlib
import gzip
from pathlib import Path
from typing import Iterator

__all__ = ["SENTENCES", "LAW_DOCS", "CHAT_TEMPLATE", "make_tiny_encoder", "make_tiny_reranker", "make_tiny_llm", "write_dictd"]

# nine German legal sentences: a corpus small enough to check BM25 by hand against bm25s
LAW_DOCS = [
    "Der Vermieter muss die Mietsache in einem zum vorausgesetzten Gebrauch tauglichen Zustand übergeben.",
    "Der Mieter kann die Kündigung anfechten, wenn sie gegen Treu und Glauben verstösst.",
    "Der Arbeitgeber kann das Arbeitsverhältnis aus wichtigen Gründen fristlos auflösen.",
    "Wer einem andern widerrechtlich Schaden zufügt, wird ihm zum Ersatze verpflichtet.",
    "Die Beschwerde ist innert 30 Tagen beim Bundesgericht einzureichen.",
    "Der Käufer muss die gekaufte Sache prüfen und Mängel sofort anzeigen.",
    "Die Verjährung beträgt zehn Jahre, wenn das Gesetz nichts anderes bestimmt.",
    "Ein Ehegatte kann die Scheidung verlangen, wenn die Ehegatten getrennt gelebt haben.",
    "Der Pflichtteil beträgt die Hälfte des gesetzlichen Erbanspruchs.",
]

SENTENCES = [
    "Der Vermieter muss die Mietsache in gebrauchstauglichem Zustand übergeben.",
    "Der Arbeitgeber kann das Arbeitsverhältnis aus wichtigen Gründen fristlos auflösen.",
    "Wer einem andern widerrechtlich Schaden zufügt, wird ihm zum Ersatze verpflichtet.",
    "Die Beschwerde ist innert 30 Tagen beim Bundesgericht einzureichen.",
    "The landlord must hand over the rented property in a usable condition.",
    "The employer may terminate the employment immediately for good cause.",
    "Whoever unlawfully causes damage to another is liable for compensation.",
    "The appeal must be filed with the Federal Supreme Court within 30 days.",
]


def _tokenizer(folder: Path):
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(SENTENCES * 3, trainers.WordPieceTrainer(vocab_size=400, special_tokens=special))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=128)
    fast.save_pretrained(folder)
    return fast


def _config(vocab_size: int, hidden: int = 32, layers: int = 2, **kw):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                      intermediate_size=2 * hidden, max_position_embeddings=128, **kw)


def make_tiny_encoder(folder: str | Path, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """A sentence-transformers folder: tiny BERT + mean pooling + normalisation."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import BertModel

    folder = Path(folder)
    hf = folder / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(hf)
    torch.manual_seed(seed)
    BertModel(_config(len(tok), hidden, layers)).save_pretrained(hf)
    st = SentenceTransformer(modules=[models.Transformer(str(hf), max_seq_length=64), models.Pooling(hidden, "mean"), models.Normalize()],
                             device="cpu")
    st.save(str(folder / "st"))
    return folder / "st"


def make_tiny_reranker(folder: str | Path, seed: int = 0) -> Path:
    """A cross-encoder folder: tiny BERT with a one-logit classification head."""
    import torch
    from transformers import BertForSequenceClassification

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(folder)
    torch.manual_seed(seed)
    BertForSequenceClassification(_config(len(tok), num_labels=1)).save_pretrained(folder)
    return folder


CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make_tiny_llm(folder: str | Path, arch: str = "qwen2", seed: int = 0, hidden: int = 64, layers: int = 2) -> Path:
    """A causal-LM folder (Qwen2- or Llama-style, random weights) with a byte-level BPE tokenizer
    trained on a few sentences and a ChatML chat template: what the real loader reads."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    special = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = SENTENCES + ['{"legal_area": "Mietrecht", "key_concepts": ["Kündigung"], "keywords_de": ["Miete"]}']
    tok.train_from_iterator(words * 3, trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    common = dict(vocab_size=len(fast), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=2048, eos_token_id=fast.eos_token_id,
                  pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    if arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, bos_token_id=fast.convert_tokens_to_ids("<|im_start|>")))
    else:
        raise ValueError(arch)
    model.save_pretrained(folder)
    return folder


def write_dictd(folder, entries: list[tuple[str, str]]) -> Path:
    """A dictd dictionary (FreeDict's format) of ``entries`` (headword, entry text) written into
    ``folder``: ``en-de.index`` and ``en-de.dict.dz``; returns the index file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def b64(n: int) -> str:
        out = ""
        while True:
            out, n = digits[n % 64] + out, n // 64
            if n == 0:
                return out

    data, index = b"", []
    for head, body in [("00-database-info", "00-database-info\nEdition: test-1\n"), *entries]:
        text = body.encode("utf-8")  # an entry starts with its headword line
        index.append(f"{head}\t{b64(len(data))}\t{b64(len(text))}")
        data += text
    (folder / "en-de.index").write_text("\n".join(index) + "\n", encoding="utf-8")
    (folder / "en-de.dict.dz").write_bytes(gzip.compress(data))
    return folder / "en-de.index"


@contextlib.contextmanager
def swap_steps(name: str, **steps) -> Iterator[None]:
    """Within the block, catalogue entry ``name`` has other steps (``build=...``, ``load=...``): a
    fault injected into a build or a load; its own spec is put back after."""
    import dataclasses

    from lexrag import registry

    own = registry.spec(name)  # declared by its module (import lexrag.pipeline first for the whole catalogue)
    i = registry.ARTIFACTS.index(own)
    registry.ARTIFACTS[i] = dataclasses.replace(own, **steps)
    try:
        yield
    finally:
        registry.ARTIFACTS[i] = own
