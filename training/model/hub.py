"""Hugging Face hub names (`--tokenizer gpt2`, `--init-from gpt2`): fail in seconds when offline.

Without this, transformers retries every file it looks for, five times with growing pauses: about
four minutes per name on a machine without network before a misleading error. Here a name is, in
order: a local directory; a copy in the local Hugging Face cache; or a download, which needs the
hub (or the proxy in front of it) to answer one HTTP request within a few seconds.
"""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

from trainstack.contract.errors import UserError

CONNECT_TIMEOUT_S = 5.0


def looks_like_path(name: str) -> bool:
    """`./x`, `/x`, `~/x`, `a/b/c`: a directory, never a hub name (those are `name` or `org/name`)."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name


def resolve(name: str, flag: str, cached_files: tuple[str, ...]) -> tuple[str, bool]:
    """(what to load, local_files_only) for `name`; UserError (one line) when it cannot be had.

    `cached_files`: files whose presence in the Hugging Face cache means the name was downloaded before.
    """
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser()), True
    if looks_like_path(name):
        raise UserError(f"{flag} {name}: no such directory; pass an existing local directory or a hub name")
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        if any(isinstance(try_to_load_from_cache(name, f), str) for f in cached_files):
            return name, True
    except ValueError:  # not a valid repository id either
        raise UserError(f"{flag} {name}: neither a local directory nor a valid hub name") from None
    advice = (f"{flag} {name} is a Hugging Face hub name and is not in the local cache, so it needs the network; "
              "pass a local directory instead (e.g. one saved with save_pretrained, or a run's export)")
    if constants.HF_HUB_OFFLINE:
        raise UserError(f"{advice}, or unset HF_HUB_OFFLINE to download it")
    problem = _unreachable(constants.ENDPOINT)
    if problem:
        raise UserError(f"{advice}, or make the hub reachable ({problem})")
    return name, False


def _unreachable(endpoint: str) -> str | None:
    """Why one HTTP request to the hub fails, or None when it gets any answer (proxies as configured).

    A real request, not just a TCP connection: a firewall or proxy that accepts connections but
    cannot reach the hub (TLS errors, resets) is what sends the downloader into its retries.
    """
    from huggingface_hub.utils import get_session

    def ask():
        get_session().head(endpoint, timeout=CONNECT_TIMEOUT_S)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)  # also bounds a hanging DNS lookup
    try:
        pool.submit(ask).result(timeout=2 * CONNECT_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        return f"{endpoint} did not answer within {2 * CONNECT_TIMEOUT_S:.0f}s"
    except Exception as exc:  # the HTTP client's connection, TLS and timeout errors
        return f"{endpoint}: {str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}"
    finally:
        pool.shutdown(wait=False)
    return None
