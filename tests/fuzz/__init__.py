"""The standing fuzz suite (issue 13): malformed input everywhere the room takes it in.

Every property drives a real code path with generated input and asserts the same thing:
success or a one-line error, no traceback, no other exception, the room intact. The
budget is a hypothesis profile chosen in `conftest.py`: short in CI, long on request.
"""
