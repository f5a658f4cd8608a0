"""Tokens on axes, in hover and in tables read as text: byte-level BPE's alphabet decoded, spaces and newlines shown
as marks. Checked against the tokenizer's own byte-level decoder (the Rust `tokenizers` one), token by token."""

from __future__ import annotations

import re

import attnviz
from attnviz.plots.common import LONGEST_LABEL, numbered, readable_tokens, tick_labels, ticks

TEXT = "The cat sat on the mat.\nIt was café <b>tired</b>"


def _marks(text: str) -> str:
    return text.replace(" ", "·").replace("\n", "↵")


def test_byte_level_bpe_tokens_read_as_their_text_with_visible_spaces(gpt2_bpe_dir):
    loaded = attnviz.load_model(str(gpt2_bpe_dir))
    tr = attnviz.trace(loaded, TEXT)
    assert any(t.startswith("Ġ") for t in tr.tokens) and "Ċ" in "".join(tr.tokens)  # the raw tokens carry markers
    own = [loaded.tokenizer.convert_tokens_to_string([t]) for t in tr.tokens]  # the tokenizer's decoder, one at a time
    expected = [_marks(t) if "\ufffd" not in t else None for t in own]  # a lone piece of "é" decodes to U+FFFD there
    got = readable_tokens(tr.tokens)
    assert [g for g, e in zip(got, expected) if e is not None] == [e for e in expected if e is not None]
    assert "·cat" in got and "↵" in got
    assert not any(c in "".join(got) for c in "ĠĊ")
    # é comes in two byte pieces here: each shows the whole character and which piece it is, never a \\xNN escape
    assert "\\x" not in "".join(got) and sum("é(1/2)" in g for g in got) == sum("é(2/2)" in g for g in got) == 1
    joined = re.sub(r"(.)\(1/\d\)", r"\1", re.sub(r".\([2-9]/\d\)", "", "".join(got)))  # each character once
    assert joined.replace("·", " ").replace("↵", "\n") == TEXT  # nothing lost
    assert tick_labels(tr.tokens)[got.index("·cat")].endswith(" ·cat")  # axes use the same labels, escaped
    assert all("<b>" not in label for label in tick_labels(tr.tokens))
    assert numbered(tr.tokens)[1] == f"01 {got[1]}"


def test_a_character_split_over_byte_tokens_reads_whole_in_each_piece():
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    alphabet = bytes_to_unicode()  # GPT-2's own byte alphabet, as transformers writes it
    drawn = lambda data: "".join(alphabet[b] for b in data)  # noqa: E731 - bytes as byte-level BPE writes them
    quote, emoji = "”".encode(), "🙂".encode()  # 3 and 4 bytes
    tokens = [drawn(b" said"), drawn(quote[:2]), drawn(quote[2:] + b" ok"), drawn(emoji[:1]), drawn(emoji[1:]),
              "<|endoftext|>", drawn(bytes([0x94]))]  # fmt: skip
    assert readable_tokens(tokens) == ["·said", "”(1/2)", "”(2/2)·ok", "🙂(1/2)", "🙂(2/2)", "<|endoftext|>", "\\x94"]


def test_wordpiece_and_sentencepiece_tokens_keep_their_text():
    assert readable_tokens(["[CLS]", "the", "cat", "##s", "[SEP]"]) == ["[CLS]", "the", "cat", "##s", "[SEP]"]
    assert readable_tokens(["▁The", "▁cat", "s", "</s>"]) == ["·The", "·cat", "s", "</s>"]
    assert readable_tokens(["né", "ß"]) == [
        "né",
        "ß",
    ]  # Latin-1 letters of a non-byte-level vocabulary stay as they are


def test_long_tick_labels_are_cut_and_never_inside_an_entity():
    long_word = "linkscarrythewholeview,everycontrolofit."
    shown = ticks([long_word, "<b>" * 10, "cat"])["ticktext"]
    assert shown[0] == f"00 {long_word}"[: LONGEST_LABEL - 1] + "…" and len(shown[0]) == LONGEST_LABEL
    assert shown[1].endswith("…") and len(shown[1]) <= LONGEST_LABEL and "<" not in shown[1]
    assert re.fullmatch(r"01 (&lt;|&gt;|b)*…", shown[1]), shown[1]  # whole entities only: no "&l" left dangling
    assert shown[2] == "02 cat"  # short labels are left alone
