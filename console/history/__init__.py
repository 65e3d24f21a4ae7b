"""The history screen's plain parts (no widgets): the reader that owns the connection and
runs the reads, and the view that turns the engine's rows into what the lists draw."""
