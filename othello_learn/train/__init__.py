"""Lightning training, ``othello-train``: the command and its ``fit`` (``train``), its flags and
recipes (``arguments``, ``config``), the LightningModule and its accuracy by game phase (``module``,
``metrics``), the callbacks that save and validate (``checkpoints``, ``validation``), stop signals
(``stops``), the logs (``logs``) and the checks a start makes before it trains (``run_checks``).
The training recipes ship in ``recipes/`` (a checkout's ``train/configs/`` points there)."""

__all__ = ["train", "arguments", "config", "module", "metrics", "checkpoints", "validation", "stops", "logs",
           "run_checks"]
