"""Pieces every algorithm may use: observation normalization and dynamic loss scaling."""
