"""deferlab's own tests (not shipped): the suite plugin the shipped checks use (`deferlab.properties.suite`).

Why the same plugin: these tests run claim searches too (the seam's proofs, the recorder's own tests), with
the same profiles, devices and recorder; a session over both trees registers it once.
"""

pytest_plugins = ("deferlab.properties.suite",)
