"""Reading a shell command as the shell runs it: its words (words.py, what `sh -c` would
expand), the programs it runs (programs.py) and the reading of a whole command ahead of
its run (read.py); and the shell tool's result as its text carries it (result.py). Pure
functions, for the shell tool, the rules that match a command, and whoever shows a result;
no other part of the engine below them."""
