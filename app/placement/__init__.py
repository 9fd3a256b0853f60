"""Placements: which device holds each block, as edits, files and llama.cpp commands."""

from .placement import CPU, MIXED, Placement

__all__ = ["CPU", "MIXED", "Placement"]
