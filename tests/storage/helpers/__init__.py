"""Helpers shared by the storage tests and the subprocess scripts they start."""
