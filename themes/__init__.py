"""Colour themes (data) and the app stylesheet."""
