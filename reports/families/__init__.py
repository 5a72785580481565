"""``deferlab families``: the model families deferlab checks, with the engines and releases that serve each."""
