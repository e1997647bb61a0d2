"""llmpdb tests: the tree mirrors the package (inspect/, render/, commands/, breakpoints/, forward/, e2e/)."""
