"""deferlab's property suites, their strategies, the claim registry and the implementation seam.

Run from a checkout with ``bash scripts/test.sh``, or installed with ``deferlab test [pytest args]``
(see README.md in this folder for where a new test goes).
"""
