"""WTHOR reading and writing, dataset building, and the Lightning DataModule."""

__all__ = ["wtb", "replay", "dataset", "datamodule", "wthor"]
