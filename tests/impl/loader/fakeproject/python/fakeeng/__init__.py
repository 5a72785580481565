raise RuntimeError("the package init must never run")
