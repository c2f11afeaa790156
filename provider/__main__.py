"""Entry point of the trainstack component package (PulumiPlugin.yaml beside it).

The language host runs this folder as a script, so Python puts provider/ on sys.path, not the checkout that
holds trainstack/ and trainstack/infra/: add it, then serve the hosted components (trainstack.provider).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainstack.provider import main  # noqa: E402

main()
