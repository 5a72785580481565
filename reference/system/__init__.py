"""The shared description of the system under test: configs, profiles, errors and front-door checks,
policies, the item contract and accepted modes (``contract``), the claims registry with its one parser and
the verdict vocabulary (``claims``), the seam protocol and the label of each real system (``seam``), the
IPC acknowledgement protocol. No algorithms; imports no torch and nothing of deferlab outside this package."""
