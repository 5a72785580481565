"""The front-door table: every public entry point's bad inputs and the exact error each must give."""
