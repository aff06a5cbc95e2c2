"""What reads a trained network or a training run and reports on it: ``othello-eval``
(``evaluate``: accuracy by game phase; export and calibrate a net), its table and plot
(``phase_report``) and ``othello-curves`` (``curves``: learning curves of training runs).
Above ``train``: it reads the training's checkpoints, metrics and run folders, never the reverse."""

__all__ = ["evaluate", "phase_report", "curves"]
