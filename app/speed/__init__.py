"""The speed model: decode and prompt tokens per second for a placement, and its calibration."""
