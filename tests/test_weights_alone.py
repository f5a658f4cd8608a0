"""The weights alone (attention.weights_from_scores, in place on the scores; what value norms read) equal the weights
stage of stages_from_scores bit for bit, whatever the model adds: a bias, softcapping, sinks, a mask, -inf fill."""

from __future__ import annotations

import pytest
import torch

from attnviz.attention import stages_from_scores, weights_from_scores


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("softcap", [None, 30.0])
@pytest.mark.parametrize("sinks", [None, "head", "query"])
@pytest.mark.parametrize("fill", [float(torch.finfo(torch.float32).min), float("-inf")])
def test_weights_alone_equal_the_weights_stage(bias, softcap, sinks, fill):
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 6, 6, generator=g) * 20
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    mask[2] = False  # a row that sees nothing
    extra = dict(
        bias=torch.randn(3, 6, 6, generator=g) if bias else None,
        softcap=softcap,
        sinks={None: None, "head": torch.randn(3, generator=g), "query": torch.randn(3, 6, generator=g)}[sinks],
    )
    want = stages_from_scores(scores, 0.125, mask, fill, **extra).weights
    got = weights_from_scores(scores.clone(), 0.125, mask, fill, **extra)
    assert torch.equal(got, want)
    assert not got.isnan().any()
