"""Bytes in and out, for every layer: a file replaced whole (files.py), server-sent events
parsed (sse.py, for the providers and the room's API)."""
