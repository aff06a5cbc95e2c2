"""Lightning training: ``othello-train`` and what it is made of; the training recipes they read ship in
``recipes/`` (a checkout's ``train/configs/`` points there)."""

__all__ = ["train", "arguments", "config", "data_checks", "resume", "stops", "checkpoints", "module", "metrics",
           "loggers", "lightning_logs", "run_files", "validation"]
