"""The driver that runs real SGLang's own code behind the seam (module map: see below)."""
