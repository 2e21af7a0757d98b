"""Results files, their verdicts against baselines, summaries and HTML pages."""
