"""`python scripts/first_view.py`: write the default view's trace made ahead (attnviz.ui.made_ahead) into the cache folder
the settings name (ATTNVIZ_CACHE_DIR), so that a cold server draws its first heatmaps without waiting for the model.
The image's build runs this (Dockerfile); a server writes the file itself after its first default trace where none is
there."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app's folder, where attnviz is

from attnviz.ui.first_view import main  # noqa: E402

if __name__ == "__main__":
    main()
