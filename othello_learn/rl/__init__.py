"""Reinforcement learning from self-play: batched self-play games (``selfplay``), training the
network on them (``learner``), and the AlphaZero loop over a run folder (``loop``): its settings
(``settings``), the run folder's files (``records``), the self-play worker processes
(``workers``) or Ray actors (``ray_backend``), the stages and publishing (``stages``), the gate's
matches (``matches``), and the Elo plot (``elo_plot``)."""

__all__ = ["selfplay", "learner", "settings", "records", "workers", "ray_backend", "stages", "matches", "loop", "elo_plot"]
