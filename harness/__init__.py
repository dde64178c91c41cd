"""The local harness: what runs, tests and measures the app with no Azure (README.md).

Nothing here ships: the Function App package, the Agent's and the simulator's images leave
this folder out (harness/tools/shipping.py checks it)."""
