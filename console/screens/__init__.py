"""The console's screens and dialogs, one per module."""
