"""MCTS, self-play, the RL loop, players and the arena."""
