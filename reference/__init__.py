"""deferlab's reference: two rooms, imported by their own paths (this package re-exports nothing).

* `reference.system`: the shared description of the system under test (configs, profiles, errors and
  front-door checks, policies, the item contract and accepted modes, the claims registry and its one
  parser, the verdict vocabulary, the seam and IPC protocols, one label per real system). No algorithms,
  no torch; it imports nothing of deferlab outside itself, and it is the only part ``impl`` may import.
* `reference.oracle`: the independent oracle's algorithms, pure NumPy (+ Pillow only to decode and read
  raw bands); it imports only the description, never torch, and never calls ``Image.convert`` for a
  conversion it is meant to check.
"""
