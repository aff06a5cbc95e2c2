"""Lightning training and evaluation entry points (the configs they read are in the
checkout's train/configs/)."""
