"""The capture state of one forward pass: the experiment in force and what each attention call recorded.

The seam (attnviz.hf.capture) and the hooks of the families attnviz reads itself (attnviz.hf.readers) record into the
`Recorder` that `recording` makes this thread's. The state lives in a ContextVar: Streamlit runs each session in its
own thread and all sessions share one cached model, so a global would mix sessions up.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

import torch

from ..attention import DEFAULT_FILL, causal_mask
from ..trace import LayerRecord, Values, output_norms
from ..trace.layers import ScaleOn
from ..trace.mask import StructuredMask, recognise

#: Why a layer has no values: read from a family's own attention code (q and k only), or no output projection found.
OWN_CODE_VALUES = "attnviz reads this family's queries and keys from its own attention code, but not its values"
UNKNOWN_OUTPUT = (
    "attnviz does not know where this family's attention output projection is, so it cannot size what a head writes"
)


_CAPTURE: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("attnviz_capture", default=None)


class CaptureRefused(Exception):
    """Raised inside a forward pass when the model asks for attention math the seam does not reproduce."""


class InputsRead(Exception):
    """Raised by a hook that has read all it needs: the rest of the forward pass is skipped, not computed."""


@dataclass(frozen=True)
class Experiment:
    """Changes to the forward pass itself, so their effect reaches every later layer.

    causal / hide / scale / fill / dropping the padding mask apply to `layers` (None = all layers). In an
    encoder-decoder model they apply to one `part` only ("encoder", "decoder" or "cross" attention; its layers
    are counted within the part, its hidden positions index the part's keys); the other parts run as the model
    runs them, on whatever the changed part passed on.
    """

    causal: bool = False
    hide: tuple[int, ...] = ()  # key positions no query may attend
    scale: float | None = None  # replaces the model's own scale
    fill: float | None = None  # replaces the model's fill (dtype min) for masked cells
    pad_mask: bool = True  # False: padded positions stay visible (they soak up attention)
    layers: tuple[int, ...] | None = None
    part: str | None = None  # encoder-decoder models: which attention (None: models with one kind of attention)

    def applies_to(self, layer: int, role: str | None = None) -> bool:
        return (self.part is None or role == self.part) and (self.layers is None or layer in self.layers)

    @property
    def changes_attention(self) -> bool:
        return self.causal or bool(self.hide) or self.scale is not None or self.fill is not None


@dataclass
class Recorder:
    """Per-forward capture state: the experiment in force and what each attention call recorded."""

    experiment: Experiment = field(default_factory=Experiment)
    pad_keys: torch.Tensor | None = None  # [key] bool, True at padding positions
    layers: list[LayerRecord] = field(default_factory=list)
    modules: list[torch.nn.Module] = field(default_factory=list)
    own_code: bool = False  # attnviz.hf.readers's hooks record only into such a Recorder (an own-code family's trace)
    roles: dict = field(default_factory=dict)  # encoder-decoder: attention module -> encoder / decoder / cross
    masks: list = field(default_factory=list)  # (the dense mask seen, its structure) of the latest distinct masks
    outputs: dict = field(default_factory=dict)  # attention module -> OutputProjection (attnviz.hf.output_projection)
    value_widths: list = field(default_factory=list)  # each call's value width (None: no values seen), for the load
    values_left_out: str | None = None  # why this trace keeps no values (attnviz.hf.capacity.values_left_out)
    #: the model's last attention module and its attention calls: once that module's call is recorded as the last of
    #: them, nothing after it in the forward (that layer's output projection and feed-forward, a language-model head)
    #: can change a record, so `done` ends the pass there (InputsRead); None: the whole forward runs
    last: torch.nn.Module | None = None
    n_calls: int = 0

    def position(self, module) -> tuple[str | None, int]:
        """(part, layer within the part) of the attention call `module` is making now; (None, call index) for a
        model with one kind of attention."""
        role = self.roles.get(module)
        if role is None:
            return None, len(self.layers)
        return role, sum(self.roles.get(m) == role for m in self.modules)

    def structure(self, allowed, query, key) -> StructuredMask:
        """Batch item 0's mask by its structure, recognised once per distinct mask: layers that get the same mask
        (transformers builds one per kind of layer) share one StructuredMask."""
        n_q, n_k = query.shape[-2], key.shape[-2]
        if allowed is None:
            return StructuredMask(n_q, n_k, query.device)
        mask = allowed.expand(query.shape[0], 1, n_q, n_k)[0, 0]  # [query, key]
        for seen, found in self.masks:  # a view of the very same cells (each layer slices the model's mask anew)
            same_view = seen.data_ptr() == mask.data_ptr() and seen.stride() == mask.stride()
            if seen.shape == mask.shape and seen.device == mask.device and (same_view or torch.equal(seen, mask)):
                return found
        found = recognise(mask)
        self.masks = [*self.masks[-1:], (mask, found)]  # the two latest: local and global layers may alternate
        return found

    def keep(
        self,
        module,
        query,
        key,
        scale: float,
        allowed,
        fill: float,
        extra: dict,
        scale_on: ScaleOn = "scores",
        norms=None,
        value=None,
        no_values: str = OWN_CODE_VALUES,
    ) -> None:
        """Record batch item 0 of one attention call, its mask by structure (`structure`).

        allowed: a StructuredMask, or the boolean mask [batch or 1, 1, query, key] (None: all visible). extra: bias
        ([batch or 1, head or 1, query, key]), softcap and sinks, each None when the model has none. scale_on: where
        the model applied the scale ("scores", "q", "k", "q and k"; see LayerRecord). norms: the row norms the kernel
        gave (None: the record computes them). value: [batch, kv_head, key, d_value], kept with what each head writes
        from each key (`written`) when the module's output projection is known; else no_values says why there is none.
        """
        n_q, n_k = query.shape[-2], key.shape[-2]
        mask = allowed if isinstance(allowed, StructuredMask) else self.structure(allowed, query, key)
        bias = extra["bias"]
        bias = None if bias is None else bias.expand(query.shape[0], -1, n_q, n_k)[0]
        sinks = _first_item_sinks(extra["sinks"], query)
        proj = self.outputs.get(module)
        values, no_values = None, self.values_left_out or no_values
        if value is not None and proj is not None and self.values_left_out is None:
            values = Values(value[0], output_norms.table(value[0], proj.r_factors(query.shape[1], value.device)))
        record = LayerRecord(
            query[0],
            key[0],
            scale,
            mask,
            fill,
            bias,
            softcap=extra["softcap"],
            sinks=sinks,
            scale_on=scale_on,
            norms=norms,
            values=values,
            no_values=no_values,
        )
        self.layers.append(record)
        self.modules.append(module)
        self.value_widths.append(None if value is None else int(value.shape[-1]))
        self.done(module)

    def done(self, module) -> None:
        """End the forward pass (InputsRead) if `module`'s call just recorded is the last attention call it makes."""
        if self.last is not None and module is self.last and len(self.layers) == self.n_calls:
            raise InputsRead


def _first_item_sinks(sinks: torch.Tensor | None, query: torch.Tensor) -> torch.Tensor | None:
    """Sink logits of batch item 0: [head] for every query, or [head, query] from [batch, head, query]."""
    if sinks is None or sinks.dim() <= 1:
        return None if sinks is None else sinks.detach().reshape(-1)
    return sinks.detach().expand(query.shape[0], -1, query.shape[-2])[0]


def until_last(loaded) -> dict:
    """Recorder fields that end a forward after `loaded`'s last attention call (none when its modules are unknown)."""
    modules = loaded.attention_modules
    return dict(last=modules[-1], n_calls=loaded.n_layer) if modules else {}


def apply_experiment(rec: Recorder, layer: int, allowed, scale: float, n_q: int, n_k: int, device, role=None):
    """(allowed, scale, fill, changed) after this forward pass's experiment at `layer` of part `role`.

    changed=False when the experiment leaves this layer's result as it was (a mask the model already had, its
    own scale, a fill that no fully masked row ever sees): the layer then runs the model's own kernel.
    """
    exp, before = rec.experiment, allowed
    if exp.applies_to(layer, role):
        if exp.causal:
            allowed = _and(allowed, causal_mask(n_q, n_k, device=device))
        if exp.hide:
            visible = torch.ones(n_k, dtype=torch.bool, device=device)
            visible[list(exp.hide)] = False
            allowed = _and(allowed, visible)
        new_scale = scale if exp.scale is None else exp.scale
        fill = DEFAULT_FILL if exp.fill is None else exp.fill
    elif not exp.pad_mask and rec.pad_keys is not None and role != "decoder":  # the others keep the padding mask
        allowed, new_scale, fill = _and(allowed, ~rec.pad_keys.to(device)), scale, DEFAULT_FILL
    else:
        return allowed, scale, DEFAULT_FILL, False
    mask_changed = allowed is not before and not (before is not None and torch.equal(allowed, before))
    # a fill matters only on a row with no visible key; asked only then: reading a GPU tensor's value waits for the
    # device, which would stop the host queueing the next layer's work ahead of it
    changed = mask_changed or new_scale != scale
    changed = changed or (fill != DEFAULT_FILL and allowed is not None and bool((~allowed).all(-1).any()))
    return allowed, new_scale, fill, changed


def _and(allowed: torch.Tensor | None, extra: torch.Tensor) -> torch.Tensor:
    return extra if allowed is None else allowed & extra


@contextlib.contextmanager
def recording(rec: Recorder):
    """`rec` is this thread's capture state inside the block (the seam and attnviz.hf.readers's hooks record into it)."""
    token = _CAPTURE.set(rec)
    try:
        yield rec
    finally:
        _CAPTURE.reset(token)


def current() -> Recorder | None:
    """This thread's capture state, None outside `recording`."""
    return _CAPTURE.get()
