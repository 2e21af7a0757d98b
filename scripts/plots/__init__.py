"""The figures of a results file, one module per benchmark."""
