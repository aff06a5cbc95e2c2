"""Lightning training and evaluation entry points; the training recipes they read ship in
``recipes/`` (a checkout's ``train/configs/`` points there)."""
