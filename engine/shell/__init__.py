"""Reading a shell command as the shell runs it: its words (words.py, what `sh -c` would
expand), the programs it runs (programs.py) and the reading of a whole command ahead of
its run (read.py). Pure functions, for the shell tool and for the rules that match a
command; no other part of the engine below them."""
