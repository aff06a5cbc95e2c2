"""Search: the batched tree that PUCT (``mcts``) and Gumbel (``gumbel``) share, what both answer
(``output.PolicyOutput``, from ``run``; ``mcts.make_search`` builds either from its config), and the
classical searches that need no network: alpha-beta on a square-weight evaluation and the exact
endgame solver. No module here knows about players or matches; ``othello_learn.players`` wraps them."""

__all__ = ["tree", "output", "mcts", "gumbel", "alphabeta", "endgame"]
