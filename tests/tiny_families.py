"""Builders of tiny random models of families with special attention: encoder-decoders (T5, BART), logit softcapping
(Gemma 2), attention sinks (gpt-oss), long context (a Llama with 8,192 positions). Each is built from a config and written with save_pretrained."""

from __future__ import annotations

import torch

WORDS = "the cat sat on mat a dog ran away . hello world".split()


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "</s>", *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>", pad_token="<pad>")
    return tok, len(vocab)


def _configs(n: int) -> dict:
    from transformers import BartConfig, Gemma2Config, GptOssConfig, LlamaConfig, T5Config

    small = dict(vocab_size=n, pad_token_id=0)
    decoder = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8, hidden_size=32)
    return {
        "t5": T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                       decoder_start_token_id=0, eos_token_id=2, **small),
        "bart": BartConfig(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                           bos_token_id=2, eos_token_id=2, decoder_start_token_id=2, **small),
        "gemma2": Gemma2Config(intermediate_size=64, attn_logit_softcapping=5.0, max_position_embeddings=64,
                               **decoder, **small),
        "gpt_oss": GptOssConfig(intermediate_size=32, num_local_experts=2, num_experts_per_tok=1,
                                max_position_embeddings=64, **decoder, **small),
        "long_llama": LlamaConfig(intermediate_size=64, max_position_embeddings=8192,
                                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **decoder, **small),
    }  # fmt: skip


def build(kind: str, folder, encoder_only: bool = False, lm_head: bool = False):
    """A tiny random model of `kind` saved with its tokenizer; `lm_head`: a decoder with its language-model head."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, T5EncoderModel

    tok, n = _tokenizer()
    config = _configs(n)[kind]
    torch.manual_seed(0)
    if encoder_only:
        model = T5EncoderModel(config)
    elif config.is_encoder_decoder:
        model = AutoModelForSeq2SeqLM.from_config(config)
    else:
        model = (AutoModelForCausalLM if lm_head else AutoModel).from_config(config)
    with torch.no_grad():  # sinks start at zero: give them values that matter
        for module in model.modules():
            if isinstance(getattr(module, "sinks", None), torch.nn.Parameter):
                module.sinks.normal_(0, 1.0)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


#: What the byte-level BPE tokenizer of `build_gpt2_bpe` learns its merges from: frequent words become one piece, rare
#: ones stay cut into several.
BPE_CORPUS = ["The cat sat on the mat because it was tired.", "The dog ran away from the cat.", "the mat, the cat"] * 20


def build_gpt2_bpe(folder, positions: int = 64):
    """A tiny causal GPT-2 with a real byte-level BPE tokenizer (Ġ marks a space; rare words come in pieces), trained
    offline on a few sentences; saved with its language-model head (GPT2LMHeadModel), so it predicts tokens.
    `positions`: the longest text it reads."""
    import json
    from pathlib import Path

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)  # fmt: skip
    backend.train_from_iterator(BPE_CORPUS, trainer)
    end = "<|endoftext|>"
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=end, eos_token=end, unk_token=end)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=backend.get_vocab_size(), n_embd=32, n_layer=2, n_head=4, n_positions=positions,
                         bos_token_id=0, eos_token_id=0)).save_pretrained(folder)  # fmt: skip
    tok.save_pretrained(folder)
    settings = Path(folder) / "tokenizer_config.json"  # GPT-2 takes no token_type_ids
    settings.write_text(
        json.dumps(json.loads(settings.read_text()) | {"model_input_names": ["input_ids", "attention_mask"]})
    )
    return folder
