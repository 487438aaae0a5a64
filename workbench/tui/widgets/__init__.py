"""Widgets of the workbench: one widget per module."""
