"""Players and matches: the batched ``Player`` interface with the baselines (``base``), network
players (``network``), other programs over NBoard/GTP (``external``), player specs such as
``gumbel:CKPT:100`` (``specs``), and the arena with its openings and Elo statistics."""

__all__ = ["base", "network", "external", "specs", "arena", "openings", "elo"]
