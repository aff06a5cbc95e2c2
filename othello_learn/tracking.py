"""Starting a W&B run, shared by the training and the self-play loop.

Why: online, W&B's own failures (no API key on a machine where it cannot ask for one, a
refused key, no network) surfaced as a 30-40 line traceback from inside Lightning or the
loop, exit 1, where every other bad setting is one line naming it (exit 2)."""

from __future__ import annotations

import typing

from othello_learn.files import UserError, one_line


def start_wandb(init: typing.Callable[[], typing.Any], online: bool):
    """``init()``, which starts the W&B run; online, W&B's own errors become one line naming
    ``--wandb-online``. Offline runs need no account, so their errors stay tracebacks (a bug)."""
    import wandb

    try:
        return init()
    except wandb.errors.Error as e:
        if not online:
            raise
        raise UserError(f"--wandb-online: W&B says: {one_line(e)} (run `wandb login` first, or drop --wandb-online to "
                        "log offline and `wandb sync` later)") from None
