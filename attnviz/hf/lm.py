"""Language-model heads: which class a checkpoint is loaded as, what its head predicts, and the logits it gives.

A checkpoint saved with its head (config.architectures naming a `*ForCausalLM`, `*LMHeadModel` or `*ForMaskedLM`
class) is loaded as that class, so the same model that is traced can also say which token comes next. A base
checkpoint (the bundled all-MiniLM-L6-v2 is a BertModel) is loaded as it is, and says in words that it cannot
predict tokens. The attention modules sit inside the head class exactly as in the base model, so capture, the
load probe and the readers of attnviz.hf.readers find them the same way.
"""

from __future__ import annotations

import torch

from ..errors import InputError, first_line
from .passes import call_kwargs

#: Class name endings of language-model heads, and what each predicts.
HEAD_SUFFIXES = {"ForCausalLM": "causal", "LMHeadModel": "causal", "ForMaskedLM": "masked"}
KINDS = {
    "causal": "predicts the next token",
    "masked": "predicts the token at a mask",
    "seq2seq": "predicts the decoder's next token",
}
NO_HEAD = (
    "it was saved without a language-model head (its checkpoint names {arch}), so it cannot predict tokens: it only "
    "gives hidden states. Load a checkpoint with its head, such as 'gpt2' or 'bert-base-uncased'."
)
UNTRAINED = (
    "its checkpoint names the head class {arch} but holds no weights for the head, so its predictions would be "
    "random: it cannot predict tokens."
)


def model_class(config):
    """The class to load: the checkpoint's own language-model head when it names one transformers has, the seq2seq
    LM for encoder-decoders (it can generate a target), a saved encoder-only half (T5EncoderModel) as itself, else
    AutoModel (the base model, no head)."""
    import transformers

    arch = architecture(config)
    if arch.endswith("EncoderModel") and arch.isidentifier() and hasattr(transformers, arch):
        return getattr(transformers, arch)
    if getattr(config, "is_encoder_decoder", False):
        return transformers.AutoModelForSeq2SeqLM
    return head_class(config) or transformers.AutoModel


def architecture(config) -> str:
    arch = (getattr(config, "architectures", None) or [""])[0]
    return arch if isinstance(arch, str) else ""


def head_class(config):
    """The transformers class of the language-model head the config names, or None (none named, or not one for
    this config's model type)."""
    import transformers

    arch = architecture(config)
    if not (arch.isidentifier() and arch.endswith(tuple(HEAD_SUFFIXES))):
        return None
    try:
        cls = getattr(transformers, arch, None)
    except Exception:  # noqa: BLE001 - a lazily imported class whose module fails to import is no head to load
        return None
    config_class = getattr(cls, "config_class", None)
    return cls if cls is not None and config_class in (None, type(config)) else None


def head_of(model, missing_keys=()) -> tuple[str, str]:
    """(kind, why not): kind is "causal", "masked", "seq2seq" or "" when the model cannot predict tokens, and then
    the sentence says why. `missing_keys` (from from_pretrained's loading info) tells an untrained head apart."""
    arch = architecture(model.config) or type(model).__name__
    name = type(model).__name__
    kind = next((k for suffix, k in HEAD_SUFFIXES.items() if name.endswith(suffix)), "")
    if not kind and getattr(model.config, "is_encoder_decoder", False):
        kind = "seq2seq"
    out = model.get_output_embeddings() if kind else None
    if out is None or getattr(out, "weight", None) is None:
        return "", NO_HEAD.format(arch=arch)
    weight_name = next((n for n, p in model.named_parameters() if p is out.weight), "")
    if weight_name in set(missing_keys or ()):
        return "", UNTRAINED.format(arch=arch)
    return kind, ""


def prediction_position(loaded, inputs: dict) -> int:
    """Where the model's prediction is read: the last real token, padding aside (a decoder predicts what follows
    it), or the first mask token (a masked LM). InputError when the model has no head or the text has no mask."""
    if not loaded.has_lm_head:
        raise InputError(f"{loaded.label} cannot predict tokens: {loaded.lm_note}")
    if loaded.lm_head == "seq2seq":
        raise InputError(
            f"{loaded.label} is an encoder-decoder model: its prediction is the decoder's next token for a target "
            "text, which this reads not yet; use a decoder such as 'gpt2'."
        )
    ids = inputs["input_ids"][0]
    if loaded.lm_head == "masked":
        mask = loaded.tokenizer.mask_token_id
        where = (ids == mask).nonzero().flatten().tolist() if mask is not None else []
        if not where:
            raise InputError(
                f"{loaded.label} is a masked language model: it predicts the token at a mask, and these "
                "inputs hold no mask token."
            )
        return int(where[0])
    real = inputs.get("attention_mask")
    return int(real[0].sum()) - 1 if real is not None else int(ids.shape[-1]) - 1


def next_token_logits(loaded, inputs: dict) -> torch.Tensor:
    """The logits [vocab] the model predicts for the encoded `inputs` (a batch of one, as `attnviz.hf.encode` makes):
    at the last real position for a decoder, at the first mask token for a masked LM.

    Raises InputError (in words) for a model without a language-model head.
    """
    position = prediction_position(loaded, inputs)
    names = loaded.inputs
    given = {k: v.to(loaded.device) for k, v in inputs.items() if names is None or k in names}
    try:
        with torch.inference_mode():
            out = loaded.model(**given, **call_kwargs(loaded.model))
    except Exception as e:  # noqa: BLE001 - only attnviz's own errors may reach a user
        raise InputError(f"{loaded.label} failed on this text ({first_line(e, named=True)}).") from None
    return out.logits[0, position].float()
