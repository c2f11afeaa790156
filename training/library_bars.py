"""The libraries' own progress bars, kept off the console where they say nothing a user needs.

transformers draws "Loading weights" on every from_pretrained (sample, evaluate, a teacher) and "Writing
model shards" on every export, --no-progress or not; datasets draws "Generating train split: N examples"
while `prepare` reads the corpus, counting pieces of files, not the documents it reports. Our own bars
(train's, prepare's "tokenizing") and the hub's download bars stay.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def quiet_transformers_bars() -> None:
    """Off for the process: transformers' bars only (disable_progress_bar also turns the hub's off; they are
    turned back on, since a first download of gpt2 is worth watching)."""
    import huggingface_hub.utils
    from transformers.utils import logging

    hub_was_off = huggingface_hub.utils.are_progress_bars_disabled()
    logging.disable_progress_bar()
    if not hub_was_off:
        huggingface_hub.utils.enable_progress_bars()


@contextlib.contextmanager
def no_datasets_bars() -> Iterator[None]:
    """datasets' bars off inside the block, as they were after it."""
    import datasets

    was_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not was_off:
            datasets.enable_progress_bars()
