"""PyTorch references a GPU check measures beside the suite's kernels, and their ratios."""
