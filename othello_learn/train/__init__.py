"""Lightning training and evaluation entry points and configs."""
