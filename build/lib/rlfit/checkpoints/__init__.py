"""Checkpoints: their format on disk, their checksums, the metrics copy beside them and when the runner saves."""
