"""deferlab's independent oracle: the algorithms, pure NumPy (Pillow only where the described system calls it).

Imports only `reference.system` (the shared description) besides itself."""
