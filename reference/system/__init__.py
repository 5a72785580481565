"""The shared description of the system under test: configs, profiles, errors and front-door checks,
policies, the item contract, the claims registry, the seam and IPC protocols. No algorithms; imports no
torch and nothing of deferlab outside this package."""
