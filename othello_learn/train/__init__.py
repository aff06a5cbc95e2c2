"""Lightning training and evaluation entry points; the training recipes they read ship in
``recipes/`` (a checkout's ``train/configs/`` points there)."""

__all__ = ["train", "arguments", "config", "data_checks", "resume", "stops", "checkpoints", "module", "metrics",
           "loggers", "lightning_logs", "run_files", "validation", "evaluate", "phase_report", "curves"]
