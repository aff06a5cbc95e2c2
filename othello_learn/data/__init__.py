"""WTHOR reading and writing, dataset building, and the Lightning DataModule."""
