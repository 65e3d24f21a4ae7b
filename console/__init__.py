"""The operator console (Textual). Hosts the engine in-process."""
