"""transformers' progress bars without the notebook warning box.

huggingface_hub (which transformers imports) imports `tqdm.auto`. In a Jupyter kernel without ipywidgets that import
warns "IProgress not found. Please update jupyter and ipywidgets" (a red box under the first cell that loads a model)
and then falls back to tqdm's console bar, `tqdm.std`. Importing `tqdm.auto` first with that one warning silenced
gives the same console bar and no box; with ipywidgets installed tqdm.auto picks its notebook bar as it always did.
"""

from __future__ import annotations

import sys
import warnings


def quiet_tqdm_auto() -> None:
    """Import tqdm.auto before transformers does, without its 'IProgress not found' warning (idempotent)."""
    if "tqdm.auto" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        try:
            import tqdm.auto  # noqa: F401 - imported for its side effect: the choice of bar, made quietly
        except ImportError:  # no tqdm: transformers brings its own requirement, nothing to quiet
            pass
