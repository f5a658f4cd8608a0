"""AttentionTrace: one immutable record of what attention did on one sentence, every layer and head."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .attention import DEFAULT_FILL, Stages, check_scale, stages_from_scores
from .errors import AttnvizError

STAGES = ("scores", "scaled", "masked", "weights")


def _frozen(a, dtype) -> np.ndarray | None:
    if a is None:
        return None
    a = np.ascontiguousarray(a, dtype=dtype)
    if not a.flags.owndata:  # a view of someone else's memory (a slice, a torch tensor): could change under us
        a = a.copy()
    a.setflags(write=False)
    return a


def _per_layer(name: str, value, n_layer: int) -> np.ndarray:
    """One number for every layer, or one per layer."""
    value = np.asarray(value, dtype=np.float64)
    if value.size not in (1, n_layer) or value.ndim > 1:
        raise AttnvizError(f"{name} must be one number or one per layer ({n_layer}), got shape {value.shape}")
    return _frozen(np.broadcast_to(value.reshape(-1), (n_layer,)), np.float64)


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Every stage of attention for one sentence; arrays are numpy, read-only, axis order [layer, head, query, key].

    scores   float32 [L, H, T, T]  raw q.k^T, before scaling and mask (None when weights-only)
    scale    float64 [L]           what the model multiplied scores by
    mask     bool    [L, T, T]     True where the query may attend the key
    fill     float64 [L]           what masked cells were replaced by before the softmax
    weights  float32 [L, H, T, T]  the softmax weights the model used
    bias     float32 [L, H, T, T]  additive position bias some models put in the mask (T5-style), else None

    `scaled` and `masked` are derived, so stored stages cannot disagree.
    A weights-only trace (model families that bypass transformers' attention seam) has scores,
    scale, mask and fill set to None; `stages` says which stages exist and `notes` says why.
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    scores: np.ndarray | None = None
    scale: np.ndarray | None = None
    mask: np.ndarray | None = None
    fill: np.ndarray | None = None
    bias: np.ndarray | None = None
    model_name: str = ""
    source: str = "pretrained"  # "pretrained" or "module" (our MultiHeadAttention)
    d_head: int = 0
    n_dropped: int = 0  # tokens cut off because the text was longer than the model's limit
    options: tuple = ()  # the experiment that produced this trace, as sorted (name, value) pairs
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("tokens", tuple(str(t) for t in self.tokens))
        set_("weights", _frozen(self.weights, np.float32))
        set_("scores", _frozen(self.scores, np.float32))
        set_("mask", _frozen(self.mask, bool))
        set_("bias", _frozen(self.bias, np.float32))
        set_("notes", tuple(self.notes))
        set_("options", tuple(self.options))
        if self.weights.ndim != 4:
            raise AttnvizError(f"weights must be [layer, head, query, key], got shape {self.weights.shape}")
        L, H, T, K = self.weights.shape
        if T != K or T != len(self.tokens):
            raise AttnvizError(f"weights {self.weights.shape} do not match {len(self.tokens)} tokens")
        if self.scores is None:
            if any(x is not None for x in (self.scale, self.mask, self.fill, self.bias)):
                raise AttnvizError("scale, mask, fill and bias need scores")
            return
        set_("scale", _per_layer("scale", self.scale, L))
        set_("fill", _per_layer("fill", DEFAULT_FILL if self.fill is None else self.fill, L))
        if self.mask is None:
            set_("mask", _frozen(np.ones((L, T, T), bool), bool))
        checks = {"scores": (self.scores, (L, H, T, T)), "mask": (self.mask, (L, T, T))}
        if self.bias is not None:
            checks["bias"] = (self.bias, (L, H, T, T))
        for name, (arr, shape) in checks.items():
            if arr.shape != shape:
                raise AttnvizError(f"{name} has shape {arr.shape}, expected {shape}")

    # --- sizes ---
    @property
    def n_layer(self) -> int:
        return self.weights.shape[0]

    @property
    def n_head(self) -> int:
        return self.weights.shape[1]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages this trace can show: all four, or only ("weights",) for a weights-only trace."""
        return STAGES if self.scores is not None else ("weights",)

    @property
    def weights_only(self) -> bool:
        return self.scores is None

    # --- derived stages ---
    @property
    def scaled(self) -> np.ndarray | None:
        """scores * scale (plus the model's additive position bias, if it has one)."""
        if self.scores is None:
            return None
        out = self.scores * self.scale[:, None, None, None].astype(np.float32)
        return out if self.bias is None else out + self.bias

    @property
    def masked(self) -> np.ndarray | None:
        """scaled with disallowed cells replaced by the fill value of their layer."""
        if self.scores is None:
            return None
        fill = self.fill[:, None, None, None].astype(np.float32)
        return np.where(self.mask[:, None], self.scaled, fill)

    def stage(self, name: str) -> np.ndarray:
        """One stage by name, [layer, head, query, key]; a clear error if this trace lacks it."""
        if name not in STAGES:
            raise AttnvizError(f"unknown stage {name!r}; choose one of {', '.join(STAGES)}")
        if name not in self.stages:
            raise AttnvizError(
                f"the {name!r} stage was not captured for {self.model_name}: this model family bypasses "
                "transformers' attention interface, so only the final weights are available."
            )
        return getattr(self, name)

    def recompute(self, layer: int, scale: float | None = None, mask=None, fill: float | None = None) -> Stages:
        """What-if without a new forward pass: re-derive one layer's stages from its stored scores.

        Any of scale, mask ([T, T] boolean, True = may attend) and fill may be replaced; the rest keep
        their captured values. Only this layer changes: later layers still saw the original weights.
        Returns numpy `Stages`, each [head, query, key].
        """
        if self.scores is None:
            raise AttnvizError(f"{self.model_name} gave weights only; there are no scores to recompute from.")
        if not -self.n_layer <= layer < self.n_layer:
            raise AttnvizError(f"layer {layer} out of range 0..{self.n_layer - 1}")
        scale = float(self.scale[layer]) if scale is None else check_scale(scale)
        mask = self.mask[layer] if mask is None else np.asarray(mask, bool)
        fill = float(self.fill[layer]) if fill is None else float(fill)
        scores = torch.from_numpy(np.array(self.scores[layer]))
        bias = None if self.bias is None else torch.from_numpy(np.array(self.bias[layer]))
        st = stages_from_scores(scores, scale, torch.from_numpy(np.array(mask)), fill, bias=bias)
        return Stages(*(s.numpy() for s in st))

    def summary(self) -> str:
        kind = "weights only" if self.weights_only else "all stages"
        return (
            f"{self.model_name}: {self.n_layer} layers x {self.n_head} heads, d_head={self.d_head}, "
            f"{self.n_tokens} tokens, {kind}"
        )
