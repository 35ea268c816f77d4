"""Depends on torch>=9."""
