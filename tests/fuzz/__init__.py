"""Protocol fuzzer: the request grammar, mutations, real client captures and the oracles."""
