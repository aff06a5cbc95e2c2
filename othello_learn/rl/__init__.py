"""Reinforcement learning from self-play: batched self-play games (``selfplay``), training the
network on them (``learner``), and the AlphaZero loop over a run folder (``loop``) with its
Elo plot (``elo_plot``)."""

__all__ = ["selfplay", "learner", "loop", "elo_plot"]
