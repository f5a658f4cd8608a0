"""What a generation adds to a trace: which tokens were the prompt, which the model wrote, and the steps between.

A causal decoder's row for a token never changes when later tokens are appended, so one trace of prompt + output
holds, row for row, the attention each step of the generation used: step s is the pass that read the prompt and the
first s generated tokens (rows 0 .. prompt_length + s - 1) and chose token s + 1. attnviz.hf.generate checks the
causality it relies on; this record only says where the steps are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import check_index

#: Spans of a chat template (system / user / assistant) and the two halves of any generation, by name.
PROMPT, GENERATED = "prompt", "generated"


@dataclass(frozen=True)
class Segment:
    """Tokens [start, stop) of one part of the sequence: "prompt", "generated" or a chat template's role."""

    role: str
    start: int
    stop: int


@dataclass(frozen=True)
class Generation:
    """The generation behind a trace: the prompt's length, the new tokens and their text after every step."""

    prompt_length: int
    new_ids: tuple[int, ...]
    texts: tuple[str, ...]  # texts[s]: the first s generated tokens decoded (texts[0] == "")
    segments: tuple[Segment, ...] = ()  # the chat template's roles over the prompt; () for a plain prompt
    sampled: bool = False
    seed: int | None = None
    stopped: str = "max_new_tokens"  # or "eos": the model wrote its end-of-sequence token

    def __post_init__(self):
        if len(self.texts) != len(self.new_ids) + 1:
            raise ValueError("texts needs one entry per step: the empty text, then one per generated token")

    n_new = property(lambda self: len(self.new_ids), doc="Tokens the model wrote.")
    n_tokens = property(lambda self: self.prompt_length + self.n_new)
    text = property(lambda self: self.texts[-1], doc="Everything the model wrote, decoded.")

    def window(self, step: int) -> tuple[int, int]:
        """The query rows (start, stop) step `step` read: the prompt and the first `step` generated tokens."""
        step = check_index("step", step, self.n_new + 1)
        return 0, self.prompt_length + step

    @property
    def spans(self) -> tuple[Segment, ...]:
        """The prompt (its chat roles when it has them) then the generated tokens, covering every token once."""
        prompt = self.segments or (Segment(PROMPT, 0, self.prompt_length),)
        return (*prompt, Segment(GENERATED, self.prompt_length, self.n_tokens))
