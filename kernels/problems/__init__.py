"""The built-in problem suite: one file per problem (see kernels/problems/README.md for the contract)."""
