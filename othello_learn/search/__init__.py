"""Search: the batched tree that PUCT (``mcts``) and Gumbel (``gumbel``) share, and the
classical searches that need no network: alpha-beta on a square-weight evaluation and the exact
endgame solver. No module here knows about players or matches; ``othello_learn.players`` wraps them."""

__all__ = ["tree", "mcts", "gumbel", "alphabeta", "endgame"]
