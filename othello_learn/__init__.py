"""Learning Othello on top of the ``othello`` rules engine: the WTHOR dataset
(``othello_learn.data``), networks and encoders (``.models``), supervised training
(``.train``) and self-play (``.selfplay``), one installable package so no module
has to edit ``sys.path`` to find another."""
