"""The fake trees are data: the fake checkout's own unit tests (``test/``) run only as a campaign's anchor, on a
fake tree, never in deferlab's own test runs."""

collect_ignore = ["test", "vllm_tree"]
