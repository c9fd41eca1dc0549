"""Llama-style decoder for the trainer: RMSNorm, RoPE, SwiGLU, grouped-query attention, tied embeddings.

Follows nanoGPT's one-sitting layout and torchtitan's typed frozen config. Packed rows hold several documents:
attention is causal *and* document-masked (a token sees only earlier tokens of its own document) and RoPE
positions restart at every document, so each document is computed as if it were alone in the row.

Kernels come through `trainer.kernels.get_ops(config.kernels, device)`: fused Triton ops on CUDA, the
PyTorch references elsewhere; the loss never materialises (tokens × vocab) logits on the Triton path.
Parallelism is not this file's business: no DeepSpeed import; the trainer wraps the module. Every op that
reads a parameter runs inside the forward of the module that owns it (the LM head is a module, not a raw
matmul on the embedding weight), because ZeRO-3 gathers a module's parameters only around its own forward.

Attention backends (config.attention):
- "sdpa": scaled_dot_product_attention; is_causal when there are no document ids, else a boolean
  block-diagonal causal mask (B, 1, T, T). Exact everywhere; O(T²) mask memory.
- "flex": flex_attention with a document-causal BlockMask (skips fully masked tiles), compiled on CUDA.
- "auto": flex on CUDA when document ids are given, sdpa otherwise.
The mask (dense or BlockMask) is built once per forward, from that batch's document ids, in
`Transformer._hidden`, and the same object is handed to every layer: its cost is per batch, not per layer.

torch.compile (`compile_blocks`, the trainer's `model.compile`): each Block's forward is compiled on its own,
torchtitan's per-block granularity: one graph compiled once and reused by every layer (they share code and
shapes), and the modules around the blocks stay eager. See compile_blocks for why the forward and not the
module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from trainer.kernels import BACKENDS, KernelOps, get_ops
from trainer.kernels.reference import IGNORE_INDEX

ATTENTION_IMPLS = ("auto", "sdpa", "flex")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """Architecture and execution switches of the decoder."""

    d_model: int  # residual stream width
    n_layers: int  # transformer blocks
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (GQA: each serves n_heads / n_kv_heads query heads)
    ffn_hidden: int  # SwiGLU inner width
    vocab_size: int = (
        50304  # GPT-2's 50,257 padded to a multiple of 64; the trainer sets its tokenizer's size
    )
    max_seq_len: int = 2048  # longest row the trainer may feed (RoPE itself has no table limit)
    rope_theta: float = 10000.0  # RoPE base
    norm_eps: float = 1e-5  # RMSNorm epsilon
    tie_embeddings: bool = True  # output head shares the embedding matrix (as GPT-2 and Llama 3.2 1B)
    init_std: float = 0.02  # std of every weight init; residual output projections get /sqrt(2·n_layers)
    kernels: str = "auto"  # triton | reference | auto (Triton on CUDA, reference elsewhere)
    attention: str = "auto"  # sdpa | flex | auto (see module docstring)

    def __post_init__(self) -> None:
        for name in (
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "ffn_hidden",
            "vocab_size",
            "max_seq_len",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"ModelConfig.d_model={self.d_model} must be divisible by n_heads={self.n_heads}"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"ModelConfig head_dim={self.head_dim} must be even for RoPE")
        if self.kernels not in BACKENDS:
            raise ValueError(f"ModelConfig.kernels must be one of {BACKENDS}, got {self.kernels!r}")
        if self.attention not in ATTENTION_IMPLS:
            raise ValueError(
                f"ModelConfig.attention must be one of {ATTENTION_IMPLS}, got {self.attention!r}"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def num_params(self) -> int:
        """Parameter count from the shapes (tied embedding counted once), for sizing without building."""
        d, kv = self.d_model, self.n_kv_heads * self.head_dim
        attn = 2 * d * d + 2 * d * kv  # wq, wo, wk, wv
        mlp = 3 * d * self.ffn_hidden  # w1, w3, w2
        per_layer = attn + mlp + 2 * d  # + two RMSNorm weights
        head = 0 if self.tie_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.n_layers * per_layer + d + head


# Named sizes. Counts with the default vocab (tied), checked by tests/trainer/test_model.py:
# debug 3.3M (embedding-dominated), 124m 123.6M (GPT-2 small's shape, MHA), 350m 353.6M (GQA 16/8), 1b 1.026B
# (Llama 3.2 1B's width, depth and GQA 32/8, with a narrower FFN so the name holds at a 50K vocabulary).
SIZES: dict[str, ModelConfig] = {
    "debug": ModelConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=192),
    "124m": ModelConfig(d_model=768, n_layers=12, n_heads=12, n_kv_heads=12, ffn_hidden=2048),
    "350m": ModelConfig(d_model=1024, n_layers=24, n_heads=16, n_kv_heads=8, ffn_hidden=3072),
    "1b": ModelConfig(d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_hidden=7680),
}


def model_config(size: str, **overrides) -> ModelConfig:
    """A named size, with fields overridden (e.g. vocab_size from the tokenizer, kernels from the run config)."""
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; known: {sorted(SIZES)}")
    return replace(SIZES[size], **overrides)


# ---------------------------------------------------------------- packing helpers


def document_ids_from_eod(tokens: torch.Tensor, eod_id: int) -> torch.Tensor:
    """(B, T) tokens → (B, T) document index within each row; an EOD token ends (belongs to) its document."""
    is_eod = (tokens == eod_id).to(torch.int32)
    return torch.cumsum(is_eod, dim=-1) - is_eod  # EODs strictly before t


def positions_from_document_ids(doc_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) document ids → (B, T) position of each token within its document (restarts at 0 per document)."""
    t = torch.arange(doc_ids.shape[-1], device=doc_ids.device).expand_as(doc_ids)
    starts = torch.ones_like(doc_ids, dtype=torch.bool)
    starts[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    start_index = torch.where(starts, t, torch.zeros_like(t)).cummax(dim=-1).values  # latest start ≤ t
    return t - start_index


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) positions → cos, sin of shape (B, T, head_dim/2), fp32.

    Computed per step rather than kept as a buffer: a buffer would be cast to bf16 along with the model
    (angles of late positions then lose most of their bits) and would be one more thing ZeRO-3 has to place.
    """
    inv_freq = theta ** (
        -torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim
    )
    angles = positions.to(torch.float32)[..., None] * inv_freq  # (B, T, D/2)
    return angles.cos(), angles.sin()


# ---------------------------------------------------------------- attention masking


@cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    # compiled once per process: eager flex_attention materialises the scores and is only a reference
    return torch.compile(flex_attention, dynamic=False)


@cache
def _compiled_create_block_mask():
    from torch.nn.attention.flex_attention import create_block_mask

    # what PyTorch advises since create_block_mask(_compile=True) was deprecated: its deprecation warning
    # is also a graph break, which fails a model compiled whole with fullgraph=True (seen on an H100)
    return torch.compile(create_block_mask)


def document_causal_block_mask(doc_ids: torch.Tensor, compile_mask: bool):
    """flex BlockMask of one batch: causal and inside documents. (B, T) doc_ids; built once per forward.

    compile_mask: create_block_mask under torch.compile (what torchtitan and attention-gym use on GPU): it
    evaluates the mask function tile by tile instead of materialising the (B, T, T) boolean grid through
    vmap, and it is compiled once per batch shape: the mask function is a new closure every batch, but Dynamo
    guards on its code and on the tensor it closes over (shape, dtype), not on the values, so a new document
    layout at the same shape reuses the compiled graph.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    b, t = doc_ids.shape

    def document_causal(b_, h_, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (doc_ids[b_, q_idx] == doc_ids[b_, kv_idx])

    # inside a compiled graph, the enclosing compile traces the plain function
    build = (
        _compiled_create_block_mask()
        if compile_mask and not torch.compiler.is_compiling()
        else create_block_mask
    )
    return build(document_causal, b, None, t, t, device=doc_ids.device)


class AttentionMask:
    """How attention is masked for one batch: plain causal, SDPA with a dense mask, or a flex BlockMask."""

    def __init__(
        self, doc_ids: torch.Tensor | None, impl: str, n_heads: int, compile_flex: bool | None = None
    ):
        self.doc_ids = doc_ids
        on_cuda = doc_ids is not None and doc_ids.is_cuda
        self.impl = ("flex" if on_cuda else "sdpa") if impl == "auto" else impl
        self.dense = None
        self.block_mask = None
        if doc_ids is None:
            self.impl = "causal"
            return
        t = doc_ids.shape[1]
        if self.impl == "sdpa":
            causal = torch.ones(t, t, dtype=torch.bool, device=doc_ids.device).tril()
            self.dense = (causal & (doc_ids[:, :, None] == doc_ids[:, None, :]))[:, None]  # (B, 1, T, T)
        else:
            self.compile_flex = on_cuda if compile_flex is None else compile_flex
            self.block_mask = document_causal_block_mask(doc_ids, compile_mask=self.compile_flex)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q: (B, Hq, T, D), k/v: (B, Hkv, T, D) → (B, Hq, T, D)."""
        gqa = q.shape[1] != k.shape[1]
        if self.impl == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        if self.impl == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.dense, enable_gqa=gqa)
        if self.compile_flex and not torch.compiler.is_compiling():
            flex = _compiled_flex()
        else:  # eager reference, or inside a compiled block, whose graph takes flex_attention in directly
            from torch.nn.attention.flex_attention import flex_attention as flex
        return flex(q, k, v, block_mask=self.block_mask, enable_gqa=gqa)


# ---------------------------------------------------------------- modules


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, ops: KernelOps) -> torch.Tensor:
        return ops.rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)

    def forward(self, x, cos, sin, mask: AttentionMask, ops: KernelOps) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim)  # (B, T, Hq, D)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim)  # (B, T, Hkv, D)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        q, k = ops.apply_rope(q, k, cos, sin)
        y = mask.attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (B, Hq, T, D)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)  # gate
        self.w3 = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)  # up
        self.w2 = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)  # down

    def forward(self, x: torch.Tensor, ops: KernelOps) -> torch.Tensor:
        return self.w2(ops.swiglu(self.w1(x), self.w3(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.ffn = FeedForward(cfg)

    def forward(self, x, cos, sin, mask: AttentionMask, ops: KernelOps) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x, ops), cos, sin, mask, ops)
        return x + self.ffn(self.ffn_norm(x, ops), ops)


class LMHead(nn.Module):
    """Final projection; with targets, the fused linear + cross-entropy (no full logits on the Triton path)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))

    def forward(self, h, ops: KernelOps, targets=None, ignore_index=IGNORE_INDEX, normalizer=None):
        if targets is None:
            return h @ self.weight.t()  # (B, T, V)
        return ops.linear_cross_entropy(
            h.reshape(-1, h.shape[-1]), self.weight, targets.reshape(-1), ignore_index=ignore_index,
            normalizer=normalizer,
        )  # fmt: skip


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.output = LMHead(config)
        if config.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """GPT-2/nanoGPT init: N(0, std) everywhere, residual output projections scaled by 1/sqrt(2·n_layers)
        so the residual stream's variance does not grow with depth; norms start at 1."""
        std = self.config.init_std
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, mean=0.0, std=std / math.sqrt(2 * self.config.n_layers))
            else:
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(
        self,
        tokens: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        doc_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        ignore_index: int = IGNORE_INDEX,
        loss_normalizer: float | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tokens (B, T) → logits (B, T, V), or with targets (B, T) the scalar fp32 loss.

        doc_ids (B, T): document index of each token in a packed row (see `document_ids_from_eod`); attention
        then stays inside documents and positions restart per document. loss_normalizer: the non-ignored
        target count of the whole optimizer step under gradient accumulation (default: this batch's count).
        """
        ops = get_ops(self.config.kernels, tokens.device)
        x = self._hidden(tokens, ops, doc_ids, position_ids)
        return self.output(x, ops, targets, ignore_index, loss_normalizer)

    def hidden(
        self,
        tokens: torch.Tensor,
        *,
        doc_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tokens (B, T) → the final-normed hidden states (B, T, C) the LM head projects (`output.weight`).
        The perplexity export stops here, so its scorer can run the head in cache-sized chunks."""
        return self._hidden(tokens, get_ops(self.config.kernels, tokens.device), doc_ids, position_ids)

    def _hidden(
        self,
        tokens: torch.Tensor,
        ops: KernelOps,
        doc_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
    ) -> torch.Tensor:
        b, t = tokens.shape
        if position_ids is None:
            if doc_ids is not None:
                position_ids = positions_from_document_ids(doc_ids)
            else:
                position_ids = torch.arange(t, device=tokens.device).expand(b, t)
        cos, sin = rope_tables(position_ids, self.config.head_dim, self.config.rope_theta)
        mask = AttentionMask(doc_ids, self.config.attention, self.config.n_heads)
        x = self.tok_embeddings(tokens)  # (B, T, C)
        for layer in self.layers:
            x = layer(x, cos, sin, mask, ops)
        return self.norm(x, ops)


def compile_blocks(model: Transformer) -> int:
    """torch.compile every Block's forward in place; returns how many. Call before DeepSpeed wraps the model.

    The forward, not the module (`torch.compile(block)` / `block.compile()`): a compiled module call would
    take the module's hooks into the graph, and under ZeRO-3 those hooks are DeepSpeed's parameter
    gathering and release (registered on each block, a ZeRO-3 leaf module: trainer/config.py,
    ZERO3_LEAF_MODULES). Compiling only the forward leaves them outside, running eagerly around a graph
    that sees the block's gathered weights as inputs; stages 0-2 have no such hooks and see the same
    graph. In place, so parameter names (`layers.0.attn.wq.weight`: checkpoints, universal checkpoints,
    the export) do not gain torch.compile's `_orig_mod.` prefix. Before `deepspeed.initialize`, so the
    engine wraps the model it will train; DeepSpeed's own `engine.compile()` compiles the whole module
    with its hooks inside instead (graph breaks at each of them).
    """
    for block in model.layers:
        block.forward = torch.compile(block.forward)
    return len(model.layers)
