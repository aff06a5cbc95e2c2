"""Networks and input encoders (raw and handcrafted planes), computed batched on the model's device."""

__all__ = ["encoders", "nets", "batch", "losses", "fastpath"]
