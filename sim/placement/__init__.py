"""Owner placement (semantics §7): the strategies side by side (`strategies`) and run on the same requests
(`compare`): load imbalance and all-gather padding."""
