"""agentdeck's runtime: durable agent turns over an SQLite truth layer.

The engine never imports the console (or textual, or rich); a test enforces it.
"""

__version__ = "0.1.0"
